"""A run spec's ``notify`` field: the Apprise URLs told of the run's events.

``[{"url": "json://host/hook", "events": ["succeeded", "failed"]}, …]``: at most
eight URLs of the schemes runner/notify/targets.py allows, each for the events it
names (succeeded and failed when it names none). A stored spec's URLs are not checked
again (Apprise's view of a URL may change with its version; the sender says so then).
"""

from __future__ import annotations

from runner.notify.targets import DEFAULT_EVENTS, MAX_RUN_TARGETS, check_events, check_url
from runner.runspec.fields import SpecError, _list, _object, _required, _string

Targets = tuple[tuple[str, tuple[str, ...]], ...]


def notify_field(value: object, path: str, *, stored: bool = False) -> Targets:
    found: list[tuple[str, tuple[str, ...]]] = []
    for index, item in enumerate(_list(value, path, MAX_RUN_TARGETS)):
        here = f"{path}[{index}]"
        entry = _object(item, here, ("url", "events"))
        url = _required(entry, here, "url", lambda v, p: _string(v, p))
        events = entry.get("events", [e.value for e in DEFAULT_EVENTS])
        try:
            if not stored:
                check_url(url, member=True)
        except ValueError as e:
            raise SpecError(f"{here}.url", str(e)) from None
        try:
            names = tuple(e.value for e in check_events(events))
        except ValueError as e:
            raise SpecError(f"{here}.events", str(e)) from None
        if any(url == earlier for earlier, _ in found):
            raise SpecError(f"{here}.url", "names a URL twice")
        found.append((url, names))
    return tuple(found)


def stored_notify_field(value: object, path: str) -> Targets:
    return notify_field(value, path, stored=True)
