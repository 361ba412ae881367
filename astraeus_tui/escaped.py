"""The dashboard's view of the daemon with every string escaped (astraeus_tui/text.py).

``EscapedApi(api)`` answers as ``api`` does, but no string in an answer (run names,
reasons, events, groups, errors of the stream) holds a character that is not
printable: the widgets draw them as ``\\x1b``, ``\\n``, ``\\u202e``, never raw. A run's
``spec`` is left as sent (the detail screen shows it as JSON, which escapes them). A
run's output lines are the owner's own, but in a widget a raw ESC would break the
layout, so they are escaped too, tabs expanded first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import Enum
from typing import Any, TypeVar, cast

import msgspec

from astraeus_tui.client import DashboardApi
from astraeus_tui.endpoints import Endpoint
from astraeus_tui.text import shown
from runner.schema import Change, Event, Snapshot

_T = TypeVar("_T")

# answers of many samples, most with nothing to escape: checked whole before copied
_SAMPLES = frozenset({"telemetry", "run_telemetry"})


def escape_all(value: _T) -> _T:
    """``value`` (decoded JSON, or the Structs of runner/schema.py) with its strings, keys
    too, escaped; a ``spec`` kept, and a state (an enum) as it is."""
    return cast(_T, _escaped(value))


def _escaped(value: object) -> object:
    if isinstance(value, Enum):
        return value
    if isinstance(value, msgspec.Struct):
        fields = value.__struct_fields__
        return msgspec.structs.replace(
            value, **{f: _escaped(getattr(value, f)) for f in fields if f != "spec"}
        )
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {shown(k): v if k == "spec" else _escaped(v) for k, v in value.items()}
    return value


def _printable(value: object) -> bool:
    """No string in ``value`` holds a character to escape: its JSON, which escapes every
    control character (not DEL, not a bidi override), has no escape and is printable."""
    data = msgspec.json.encode(value)
    return b"\\" not in data and data.decode().isprintable()


def escape_stream(data: Snapshot | Change) -> Snapshot | Change:
    """``escape_all`` of a stream's message, quick for the runs that need nothing (most:
    a snapshot holds thousands)."""
    if _printable(data):
        return data
    if isinstance(data, Snapshot):
        runs = [r if _printable(r) else escape_all(r) for r in data.runs]
        return msgspec.structs.replace(data, runs=runs)
    upsert = [r if _printable(r) else escape_all(r) for r in data.upsert]
    moved = [(shown(rid), position) for rid, position in data.moved]
    return msgspec.structs.replace(data, upsert=upsert, remove=escape_all(data.remove), moved=moved)


class EscapedApi(DashboardApi):
    """A ``DashboardApi`` whose answers are escaped; the requests go through unchanged."""

    def __init__(self, api: DashboardApi) -> None:
        self.api = api

    async def ask(self, endpoint: Endpoint[Any, _T], *args: Any, **kwargs: Any) -> _T:
        found: _T = await getattr(self.api, endpoint.name)(*args, **kwargs)
        return found if endpoint.name in _SAMPLES and _printable(found) else escape_all(found)

    async def close(self) -> None:
        await self.api.close()

    async def changes(self) -> AsyncIterator[tuple[str, Snapshot | Change]]:
        async for event, data in self.api.changes():
            yield shown(event), escape_stream(data)

    async def events(self, run: str | None = None) -> list[Event]:
        return escape_all(await self.api.events(run))

    async def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        async for line in self.api.logs(name, tail=tail, follow=follow):
            end = "\n" if line.endswith("\n") else ""
            yield shown(line.removesuffix("\n").expandtabs()) + end
