"""The store's rows as typed values, and their encoding to and from SQLite's columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar, cast

from runner.model import RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.rows import EventRow, RunRow, WorkerRow

_Row = TypeVar("_Row")


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
