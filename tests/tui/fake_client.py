"""A daemon that is not there: replays what a real one said, recorded as JSON.

``FakeClient(fixture)`` answers the dashboard's calls from a file in
``tests/tui/fixtures/`` (made by ``python -m tests.tui.record_fixtures``):
the change stream gives the recorded snapshot, then the recorded changes, then
waits. Writes (submit, priority, delete) are kept in ``calls`` and answered as
the fixture says, or with a plain success.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from astraeus_tui.client import ApiError

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


class FakeClient:
    def __init__(self, fixture: dict[str, Any] | str) -> None:
        self.data = load_fixture(fixture) if isinstance(fixture, str) else fixture
        self.calls: list[tuple[str, Any]] = []
        self.changes_queue: asyncio.Queue[dict[str, Any]] | None = None

    @property
    def now(self) -> float:
        return float(self.data["now"])

    def clock(self) -> float:
        """The recording's moment, frozen."""
        return self.now

    async def close(self) -> None:
        pass

    async def changes(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        yield "snapshot", {"version": 1, "runs": self.data["snapshot"]}
        for change in self.data.get("changes", []):
            yield "change", change
        self.changes_queue = asyncio.Queue()
        while True:  # later changes, as a test pushes them
            yield "change", await self.changes_queue.get()

    def push(self, upsert: list[dict[str, Any]], remove: Sequence[str] = ()) -> None:
        assert self.changes_queue is not None, "the dashboard has not opened the stream yet"
        self.changes_queue.put_nowait({"version": 0, "upsert": upsert, "remove": list(remove)})

    async def status(self) -> dict[str, Any]:
        return dict(self.data["status"])

    async def gpus(self) -> dict[str, Any]:
        return dict(self.data["gpus"])

    async def workspaces(self) -> list[dict[str, Any]]:
        return list(self.data["workspaces"])

    async def show(self, name: str) -> dict[str, Any]:
        runs = self.data.get("runs", {})
        if name not in runs:
            raise ApiError(404, "NOT_FOUND", f"no run {name}")
        return dict(runs[name])

    async def why(self, name: str) -> dict[str, Any]:
        if name not in self.data.get("runs", {}):
            raise ApiError(404, "NOT_FOUND", f"no run {name}")
        answer: dict[str, Any] = self.data.get("why", {}).get(name) or {
            "run": name, "reason": "It is not waiting.", "chain": [], "levers": [],
            "estimate": None,
        }  # fmt: skip
        return dict(answer)

    async def events(self, run: str | None = None) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.data.get("events", {}).get(run or "", [])
        return events

    async def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        for line in self.data.get("logs", {}).get(name, "").splitlines(keepends=True)[-tail:]:
            yield line
        if follow:
            await asyncio.Event().wait()

    async def _answer(self, call: str, arg: Any, default: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((call, arg))
        error = self.data.get("errors", {}).get(call)
        if error:
            raise ApiError(error["status"], error["code"], error["message"])
        return default

    async def submit(self, document: object) -> dict[str, Any]:
        name = document["metadata"]["name"] if isinstance(document, dict) else "?"
        return await self._answer("submit", document, {"name": name})

    async def preview(self, document: object) -> dict[str, Any]:
        name = document["metadata"]["name"] if isinstance(document, dict) else "?"
        default = {
            "name": name, "workspace": "?", "priority": 0, "position": 1, "queue_length": 1,
            "starts_now": True, "backfill": False, "gpus": [], "preempts": [], "reason": "",
            "estimate": {"starts_by": None, "after": []},
        }  # fmt: skip
        return await self._answer("preview", document, self.data.get("preview") or default)

    async def submit_text(self, text: str, content_type: str) -> dict[str, Any]:
        return await self._answer("submit_text", text, {"name": "?"})

    async def set_priority(self, name: str, priority: int) -> dict[str, Any]:
        return await self._answer("set_priority", (name, priority), {"name": name})

    async def delete(self, name: str) -> dict[str, Any]:
        return await self._answer("delete", name, {"name": name, "outcome": "cancelled"})

    async def groups(self) -> list[dict[str, Any]]:
        return list(self.data.get("groups", []))

    async def group(self, name: str) -> dict[str, Any]:
        if name not in self.data.get("group", {}):
            raise ApiError(404, "NOT_FOUND", f"no group {name}")
        return dict(self.data["group"][name])

    async def change_group(self, name: str, change: dict[str, Any]) -> dict[str, Any]:
        return await self._answer("change_group", (name, change), await self.group(name))

    async def delete_group(self, name: str) -> dict[str, Any]:
        return await self._answer("delete_group", name, {"name": name, "runs": {}})
