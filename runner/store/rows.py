"""The store's rows as typed values, and their encoding to and from SQLite's columns."""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, cast

from runner.model import RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.runspec.templates import run_document

_Row = TypeVar("_Row")


def new_run_uid(now: float | None = None) -> str:
    """A run's immutable id: 32 hex digits, the submit time in ms first (ids sort by it)."""
    ms = int((time.time() if now is None else now) * 1000)
    return f"{ms:012x}{secrets.token_hex(10)}"


def is_run_uid(text: str) -> bool:
    """Whether ``text`` has the shape of a run's id (a safe file name, nothing else)."""
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True, slots=True)
class RunRow:
    name: str
    workspace: str
    owner: str
    uid: int
    gid: int
    spec_text: str  # the run spec as JSON; parsed only when needed (see spec())
    priority: int
    state: RunState
    reason: Reason | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    restarts: int
    preemptions: int
    attempts: int
    preempted_by: RunRef | None
    stop_request: StopReason | None
    quota_noted: bool
    grp: str | None = None  # the sweep, replica group or schedule that made it
    streak: int = 0  # replicas: quick exits in a row (the restart back-off grows with it)
    deps_met: bool = False  # every run of spec.after has succeeded (checked no more)
    run_uid: str = ""  # immutable, unique, from the submit: names the run's files on disk
    # a group's run: spec_text is only its part, the rest is this template's (templates.py)
    template: int | None = None
    template_doc: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    backfilled: bool = False  # its latest attempt was started by backfill, behind the head
    held_by: str | None = None  # who holds it (astra hold): out of the order until released
    # the restart back-off (runner/engine/backoff.py): failures in a row, quick ones in a
    # row, and the end of its wait (wall clock, monotonic clock, boot); None: no wait
    fails: int = 0
    quick: int = 0
    restart_at: float | None = None
    restart_mono: float | None = None
    restart_boot: str | None = None

    def spec(self) -> dict[str, Any]:
        """The run's whole spec document."""
        value: dict[str, Any] = json.loads(self.spec_text)
        return value if self.template_doc is None else run_document(self.template_doc, value)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: int
    run: str
    attempt: int
    worker: int
    state: WorkerState
    handle: str | None
    gpus: tuple[int, ...]
    cpu_milli: int
    memory: int
    started_at: float
    stop_reason: StopReason | None
    stop_deadline: float | None
    stopping_for: RunRef | None
    killed: bool
    exit_code: int | None
    error: str | None
    finished_at: float | None
    run_uid: str = ""  # the run's id (see RunRow.run_uid): names the worker's handle
    started_mono: float | None = None  # CLOCK_MONOTONIC at the start, on boot ``boot_id``
    stop_deadline_mono: float | None = None  # and at the SIGKILL time, while it stops
    boot_id: str | None = None
    executor: str | None = None  # who started it; None: a row from before migration 7


def latest_workers(workers: list[WorkerRow]) -> dict[int, WorkerRow]:
    """Each worker index's row of its latest attempt."""
    latest: dict[int, WorkerRow] = {}
    for w in workers:
        if w.worker not in latest or w.attempt > latest[w.worker].attempt:
            latest[w.worker] = w
    return latest


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    run: str
    workspace: str
    time: float
    kind: str
    message: Reason
    grp: str | None = None  # set on a group's own events (``run`` is then the group's name)
    code: ReasonCode = ReasonCode.MESSAGE  # what the event says, for code to decide on


def _ref_json(ref: RunRef | None) -> str | None:
    return None if ref is None else json.dumps([ref.name, ref.workspace])


def _ref(text: str | None) -> RunRef | None:
    if text is None:
        return None
    name, workspace = json.loads(text)
    return RunRef(str(name), str(workspace))


_REASONS: dict[str, Reason] = {}  # a reason's stored JSON -> the Reason (immutable)
_REASONS_MAX = 4096  # distinct texts kept; the queue's waiting runs share a few


def _reason(text: str | None) -> Reason | None:
    """The stored reason, parsed once per distinct text: the waiting runs of a queue
    carry the same few ("Queued behind …"), and a Reason never changes."""
    if text is None:
        return None
    reason = _REASONS.get(text)
    if reason is None:
        reason = Reason.from_json(json.loads(text))
        if len(_REASONS) >= _REASONS_MAX:
            _REASONS.clear()
        _REASONS[text] = reason
    return reason


_STATES = {s.value: s for s in RunState}
_STOPS = {s.value: s for s in StopReason}


def _stop(text: str | None) -> StopReason | None:
    return None if text is None else _STOPS.get(text) or StopReason(text)


def _run_state(text: str) -> RunState:
    return _STATES.get(text) or RunState(text)


def reason_json(reason: Reason | None) -> str | None:
    return None if reason is None else json.dumps(reason.to_json())


# How a RunRow is read from the runs table. Its fields are its columns, in its own order
# (the one home of that order): the SELECT and the positions decoded below are made from
# them, so a field added anywhere brings its column to the same place. A field's column
# when the names differ; the fields the table does not hold (given by the reader); and how
# a stored value is decoded where it is not kept as it is stored.
_RUN_COLUMN_OF = {"spec_text": "spec"}
_RUN_NOT_STORED = ("template_doc",)
_RUN_DECODE: dict[str, Callable[[Any], Any]] = {
    "state": _run_state,
    "reason": _reason,
    "preempted_by": _ref,
    "stop_request": _stop,
    "quota_noted": bool,
    "deps_met": bool,
    "run_uid": lambda text: text or "",
    "backfilled": bool,
}
_RUN_FIELDS = tuple(f.name for f in fields(RunRow))
_RUN_STORED = tuple(f for f in _RUN_FIELDS if f not in _RUN_NOT_STORED)
RUN_COLUMNS = ", ".join(_RUN_COLUMN_OF.get(f, f) for f in _RUN_STORED)
RUN_TEMPLATE = _RUN_STORED.index("template")  # where ``template`` is in a row of RUN_COLUMNS
_RUN_TEMPLATE_DOC = _RUN_FIELDS.index("template_doc")
_RUN_DECODERS = tuple((_RUN_STORED.index(f), decode) for f, decode in _RUN_DECODE.items())


def run_from_tuple(row: tuple[Any, ...], template: dict[str, Any] | None) -> RunRow:
    """A row of ``SELECT {RUN_COLUMNS}`` read as a plain tuple, its template's document
    given: by position, the fields' own order (the queue's reads decode thousands of rows;
    keywords cost a quarter more)."""
    values = list(row)
    for at, decode in _RUN_DECODERS:
        values[at] = decode(values[at])
    values.insert(_RUN_TEMPLATE_DOC, template)
    return RunRow(*values)


_WORKERS = "SELECT w.*, r.run_uid AS run_uid FROM workers w LEFT JOIN runs r ON r.name = w.run"


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def from_columns(cls: type[_Row], row: sqlite3.Row, **decoded: Any) -> _Row:
    """A row type built from the columns named as its fields, each value put at its
    field's place (``fields(cls)`` gives the order); ``decoded``: the fields whose stored
    value is decoded first, or whose column has another name."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cast(Any, cls)))
    return cls(*[decoded[n] if n in decoded else row[n] for n in names])  # in fields' order


def _worker(row: sqlite3.Row) -> WorkerRow:
    return from_columns(
        WorkerRow,
        row,
        state=WorkerState(row["state"]),
        gpus=tuple(json.loads(row["gpus"])),
        stop_reason=_stop(row["stop_reason"]),
        stopping_for=_ref(row["stopping_for"]),
        killed=bool(row["killed"]),
        run_uid=row["run_uid"] or "",
    )


def _event(row: sqlite3.Row) -> EventRow:
    return from_columns(
        EventRow,
        row,
        message=Reason.from_json(json.loads(row["message"])),
        code=ReasonCode(row["code"]),
    )
