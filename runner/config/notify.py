"""The config's ``[[notify]]`` entries: Apprise URLs told of every run's chosen events.

::

    [[notify]]
    url = "json://127.0.0.1:9000/hook"
    events = ["succeeded", "failed", "preempted", "started", "timelimit"]
    workspaces = ["vision"]   # optional: only these workspaces' runs

Each URL is held to the schemes of runner/notify/targets.py and must be one Apprise can
parse; ``events`` defaults to succeeded and failed.
"""

from __future__ import annotations

from collections.abc import Mapping

from runner.config.checks import _Invalid, _show, _strings, _table
from runner.model import Workspace
from runner.notify.targets import (
    DEFAULT_EVENTS,
    MAX_CONFIG_TARGETS,
    Target,
    check_events,
    check_url,
)

_KEYS = ("url", "events", "workspaces")


def parse_notify(value: object, workspaces: Mapping[str, Workspace]) -> tuple[Target, ...]:
    """The ``[[notify]]`` array of tables, checked; ``_Invalid`` naming the entry's key."""
    if not isinstance(value, list):
        raise _Invalid("notify", f"must be an array of tables ([[notify]]), got {_show(value)}")
    if len(value) > MAX_CONFIG_TARGETS:
        raise _Invalid("notify", f"must have at most {MAX_CONFIG_TARGETS} entries")
    return tuple(_entry(item, f"notify[{i}]", workspaces) for i, item in enumerate(value))


def _entry(value: object, path: str, workspaces: Mapping[str, Workspace]) -> Target:
    table = _table(value, path, _KEYS)
    if "url" not in table:
        raise _Invalid(f"{path}.url", "required: an Apprise URL such as 'json://host/hook'")
    try:
        url = check_url(table["url"])
    except ValueError as e:
        raise _Invalid(f"{path}.url", str(e)) from None
    try:
        events = check_events(table.get("events", [e.value for e in DEFAULT_EVENTS]))
    except ValueError as e:
        raise _Invalid(f"{path}.events", str(e)) from None
    named = _strings(table.get("workspaces", []), f"{path}.workspaces")
    for index, ws in enumerate(named):
        if ws not in workspaces:
            raise _Invalid(
                f"{path}.workspaces[{index}]",
                f"no workspace named {_show(ws)} (defined: {', '.join(workspaces)})",
            )
    return Target(url, events, tuple(dict.fromkeys(named)))
