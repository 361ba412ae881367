"""A daemon that is not there: replays what a real one said, recorded as JSON.

``FakeClient(fixture)`` answers the dashboard's calls from a file in
``tests/tui/fixtures/`` (made by ``python -m tests.tui.record_fixtures``):
the change stream gives the recorded snapshot, then the recorded changes, then
waits. Every endpoint's call (astraeus_tui/endpoints.py) is kept in ``calls`` and
answered by the method named for it, ``answer_<name>``: as the fixture says, or, for a
write, with a plain success. Run, group, event and GPU objects are
decoded through the daemon's schema (runner/schema.py) as the real client decodes
them, so a fixture that no longer matches it fails here, loudly.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.endpoints import Endpoint
from runner.model import RunState
from runner.schema import (
    Change,
    Event,
    GpuList,
    Group,
    GroupDetail,
    Run,
    RunDetail,
    RunTelemetry,
    Snapshot,
    Telemetry,
    Usage,
)

T = TypeVar("T")

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def typed(kind: type[T], data: object) -> T:
    """``data`` (a fixture's JSON) as the client decodes it; a Struct passes as it is."""
    return data if isinstance(data, kind) else msgspec.convert(data, kind)


def as_runs(runs: Sequence[Run | dict[str, Any]]) -> list[Run]:
    return [typed(Run, r) for r in runs]


def _minimal(name: str) -> Run:
    """A plain success's run object: only what the dashboard reads back of it."""
    return Run(id=name, name=name, workspace="?", state=RunState.QUEUED)


class FakeClient(DashboardApi):
    def __init__(self, fixture: dict[str, Any] | str) -> None:
        self.data = load_fixture(fixture) if isinstance(fixture, str) else fixture
        self.calls: list[tuple[str, Any]] = []
        self.changes_queue: asyncio.Queue[Change] | None = None
        self.snapshot = Snapshot(version=1, runs=as_runs(self.data["snapshot"]))
        self.recorded = [typed(Change, c) for c in self.data.get("changes", [])]
        self.details = {n: typed(RunDetail, r) for n, r in self.data.get("runs", {}).items()}
        self.event_log = {
            n: [typed(Event, e) for e in events]
            for n, events in self.data.get("events", {}).items()
        }
        self.gpu_list = typed(GpuList, self.data["gpus"]) if "gpus" in self.data else GpuList()
        self.group_list = [typed(Group, g) for g in self.data.get("groups", [])]
        self.group_details = {
            n: typed(GroupDetail, g) for n, g in self.data.get("group", {}).items()
        }

    @property
    def now(self) -> float:
        return float(self.data["now"])

    def clock(self) -> float:
        """The recording's moment, frozen."""
        return self.now

    async def close(self) -> None:
        pass

    async def changes(self) -> AsyncIterator[tuple[str, Snapshot | Change]]:
        yield "snapshot", self.snapshot
        for change in self.recorded:
            yield "change", change
        self.changes_queue = asyncio.Queue()
        while True:  # later changes, as a test pushes them
            yield "change", await self.changes_queue.get()

    def push(
        self,
        upsert: Sequence[Run | dict[str, Any]],
        remove: Sequence[str] = (),
        moved: Sequence[tuple[str, int | None]] = (),
    ) -> None:
        assert self.changes_queue is not None, "the dashboard has not opened the stream yet"
        self.changes_queue.put_nowait(
            Change(version=0, upsert=as_runs(upsert), remove=list(remove), moved=list(moved))
        )

    async def ask(self, endpoint: Endpoint[Any, T], *args: Any, **kwargs: Any) -> T:
        """The endpoint's answer (``answer_<name>`` here), kept in ``calls``: as
        ``(name, its one argument or a tuple of them)``, a control's as ``(action, run)``;
        the fixture's ``errors`` says which ones are refused."""
        bound = inspect.signature(endpoint.build).bind(None, *args, **kwargs)
        bound.apply_defaults()
        values = tuple(bound.arguments.values())[1:]
        if endpoint.name == "control":
            call, arg = values[1], values[0]
        else:
            call, arg = endpoint.name, values[0] if len(values) == 1 else values
        self.calls.append((call, arg))
        error = self.data.get("errors", {}).get(call)
        if error:
            raise ApiError(error["status"], error["code"], error["message"])
        answer: T = getattr(self, f"answer_{endpoint.name}")(*values)
        return answer

    async def events(self, run: str | None = None) -> list[Event]:
        return list(self.event_log.get(run or "", []))

    async def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        for line in self.data.get("logs", {}).get(name, "").splitlines(keepends=True)[-tail:]:
            yield line
        if follow:
            await asyncio.Event().wait()

    def answer_status(self) -> dict[str, Any]:
        return dict(self.data["status"])

    def answer_gpus(self) -> GpuList:
        return self.gpu_list

    def answer_workspaces(self) -> list[dict[str, Any]]:
        return list(self.data["workspaces"])

    def answer_show(self, name: str) -> RunDetail:
        if name not in self.details:
            raise ApiError(404, "NOT_FOUND", f"no run {name}")
        return self.details[name]

    def answer_why(self, name: str) -> dict[str, Any]:
        if name not in self.data.get("runs", {}):
            raise ApiError(404, "NOT_FOUND", f"no run {name}")
        answer: dict[str, Any] = self.data.get("why", {}).get(name) or {
            "run": name, "reason": "It is not waiting.", "chain": [], "levers": [],
            "estimate": None,
        }  # fmt: skip
        return dict(answer)

    def answer_submit(self, document: object) -> Run:
        return _minimal(document["metadata"]["name"] if isinstance(document, dict) else "?")

    def answer_preview(self, document: object) -> dict[str, Any]:
        name = document["metadata"]["name"] if isinstance(document, dict) else "?"
        default = {
            "name": name, "workspace": "?", "priority": 0, "position": 1, "queue_length": 1,
            "starts_now": True, "backfill": False, "gpus": [], "preempts": [], "reason": "",
            "estimate": {"starts_by": None, "after": []},
        }  # fmt: skip
        return self.data.get("preview") or default

    def answer_submit_text(self, text: str, content_type: str) -> Run:
        return _minimal("?")

    def answer_set_priority(self, name: str, priority: int) -> Run:
        return _minimal(name)

    def answer_update(self, name: str, change: dict[str, Any]) -> Run:
        return _minimal(name)

    def answer_delete(self, name: str) -> dict[str, Any]:
        return {"name": name, "outcome": "cancelled"}

    def answer_control(self, name: str, action: str) -> dict[str, Any]:
        outcome = {"hold": "held", "release": "released", "requeue": "requeuing"}[action]
        return {"name": name, "outcome": outcome}

    def answer_groups(self, kind: str | None = None) -> list[Group]:
        return list(self.group_list)

    def answer_group(self, name: str) -> GroupDetail:
        if name not in self.group_details:
            raise ApiError(404, "NOT_FOUND", f"no group {name}")
        return self.group_details[name]

    def answer_change_group(self, name: str, change: dict[str, Any]) -> Group:
        return self.answer_group(name)

    def answer_delete_group(self, name: str) -> dict[str, Any]:
        return {"name": name, "runs": {}}

    def answer_usage(self, since: str | None, by: str | None, daily: bool) -> Usage:
        """The fixture's ``usage`` answer (as ``GET /v1/usage`` gives it), or none used."""
        return typed(Usage, self.data["usage"]) if "usage" in self.data else Usage()

    def answer_telemetry(self, history: str | None = None) -> Telemetry:
        """The fixture's ``telemetry`` answer (``GET /v1/telemetry``), or no sample yet."""
        return typed(Telemetry, self.data["telemetry"]) if "telemetry" in self.data else Telemetry()

    def answer_run_telemetry(self, name: str, history: str | None = None) -> RunTelemetry:
        """The fixture's ``run_telemetry`` answer for ``name``, or 404 as for a run not kept."""
        found = self.data.get("run_telemetry", {})
        if name not in found:
            raise ApiError(404, "NOT_FOUND", f"no run named {name}")
        return typed(RunTelemetry, found[name])
