"""Run states, worker states and stop reasons are enums, whose values are the strings the
store, the wire and the messages hold: rows and JSON stay byte-identical.

The last test walks the syntax of every module under ``runner/`` and ``astraeus_tui/``
and finds no state or stop reason written as a bare string where code decides on it or
records it (a comparison, an assignment, a keyword argument, a dict key): only
runner/states.py (and runner/model.py, which exports them) spells them. Messages, event
kinds and docstrings are free text.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import msgspec

from runner.api.views import run_object, run_view
from runner.model import RunSpec, RunState, StopReason, TaskTemplate, WorkerState, sql_list
from runner.reasons import Viewer
from runner.rows import RunRow, WorkerRow
from runner.shown import Shown

NOTHING = Shown(0, False, None)  # nothing planned yet

ROOT = Path(__file__).resolve().parents[2]


def test_values_are_todays_strings() -> None:
    assert [s.value for s in RunState] == [
        "Queued", "Starting", "Running", "Stopping", "Succeeded", "Failed", "Cancelled",
    ]  # fmt: skip
    assert [s.value for s in WorkerState] == [
        "Starting", "Running", "Stopping", "Exited", "Lost", "Done", "Failed", "Cancelled",
    ]  # fmt: skip
    assert [s.value for s in StopReason] == [
        "preempt", "timelimit", "delete", "failed", "restart", "never-started", "withdrawn",
        "requeue", "idle-gpus",
    ]  # fmt: skip


def test_sets_are_defined_once_on_the_enums() -> None:
    assert {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED} == RunState.FINISHED
    assert set(RunState) - RunState.FINISHED == RunState.ACTIVE
    assert [s for s in RunState if s.finished] == [s for s in RunState if not s.active]
    assert RunState.QUEUED.active and not RunState.QUEUED.finished
    assert RunState.CANCELLED.finished and not RunState.CANCELLED.active
    assert {WorkerState.STARTING, WorkerState.RUNNING, WorkerState.STOPPING} == WorkerState.LIVE
    assert "LIVE" not in WorkerState.__members__ and "FINISHED" not in RunState.__members__


def test_sql_lists_keep_the_enum_order() -> None:
    assert sql_list(RunState.ACTIVE) == "('Queued', 'Starting', 'Running', 'Stopping')"
    assert sql_list(RunState.FINISHED) == "('Succeeded', 'Failed', 'Cancelled')"
    assert sql_list(WorkerState.LIVE) == "('Starting', 'Running', 'Stopping')"


def test_states_written_inside_the_stores_sql_are_enum_values() -> None:
    """The few SQL statements that spell a state in their text spell an enum's value."""
    values = {s.value for s in RunState} | {s.value for s in WorkerState}
    found: set[str] = set()
    for path in (ROOT / "runner" / "store").glob("*.py"):
        if path.name == "migrations.py":  # the schema's history: event kinds, not states
            continue
        text = path.read_text()
        for literal in re.findall(r"state\s*(?:=|IN\s*\()\s*'(\w+)'", text):
            found.add(literal)
        for group in re.findall(r"state IN \(([^)]*)\)", text):
            found.update(re.findall(r"'(\w+)'", group))
    assert found, "the pattern no longer finds the store's SQL"
    assert found <= values, found - values


def _run_row(state: str) -> RunRow:
    return RunRow(
        name="train",
        workspace="team",
        owner="ann",
        uid=1000,
        gid=1000,
        spec_text="{}",
        priority=0,
        state=RunState(state),
        reason=None,
        submitted_at=100.0,
        started_at=110.0,
        finished_at=None,
        exit_code=None,
        restarts=0,
        preemptions=0,
        attempts=1,
        preempted_by=None,
        stop_request=None,
        quota_noted=False,
    )


def _worker_row(state: WorkerState, reason: StopReason | None) -> WorkerRow:
    return WorkerRow(
        id=1,
        run="train",
        attempt=1,
        worker=0,
        state=state,
        handle="h",
        gpus=(0,),
        cpu_milli=1000,
        memory=1 << 30,
        started_at=110.0,
        stop_reason=reason,
        stop_deadline=200.0,
        stopping_for=None,
        killed=False,
        exit_code=None,
        error=None,
        finished_at=None,
    )


def test_the_wire_and_messages_show_the_value() -> None:
    assert f"{RunState.QUEUED}" == "Queued" and str(RunState.QUEUED) == "Queued"
    assert f"{WorkerState.LOST}" == "Lost" and f"{StopReason.NEVER_STARTED}" == "never-started"
    spec = RunSpec("train", TaskTemplate(image="x", gpus=1))
    worker = _worker_row(WorkerState.STOPPING, StopReason.PREEMPT)
    view = run_view(_run_row("Stopping"), spec, Viewer(), NOTHING, [worker], now=150.0)
    assert view.state is RunState.STOPPING
    obj = run_object(_run_row("Stopping"), spec, Viewer(), NOTHING, [worker], now=150.0)
    assert obj["state"] == "Stopping" and obj["workers_live"] == 1
    assert b'"state":"Stopping"' in msgspec.json.encode(view)
    text = json.dumps(obj)
    assert '"state": "Stopping"' in text
    assert json.loads(text)["state"] == "Stopping"
    assert (
        json.dumps({RunState.QUEUED: 1, "s": StopReason.PREEMPT}) == '{"Queued": 1, "s": "preempt"}'
    )


def test_rows_decode_into_the_enums(tmp_path: Path) -> None:
    from runner.store.db import Store

    store = Store(tmp_path / "state.db")
    store.runs.insert(_run_row("Queued"))
    with store.transaction() as tx:
        store.runs.request_stop(tx, "train", StopReason.DELETE)
        store.workers.insert(tx, "train", 1, 0, (0,), 1000, 1 << 30, 110.0)
    run = store.runs.get("train")
    assert run is not None and run.state is RunState.QUEUED
    assert run.stop_request is StopReason.DELETE
    (worker,) = store.workers.of("train")
    assert worker.state is WorkerState.STARTING and worker.stop_reason is None
    with store.transaction() as tx:
        store.workers.stop(tx, worker.id, StopReason.PREEMPT, 300.0)
    (worker,) = store.workers.of("train")
    assert worker.state is WorkerState.STOPPING and worker.stop_reason is StopReason.PREEMPT


# ---------------------------------------------------------------- no bare literals

STATES = {s.value for e in (RunState, WorkerState) for s in e}
LITERALS = STATES | {s.value for s in StopReason}
SCANNED = ("runner", "astraeus_tui")
EXEMPT = {"runner/model.py", "runner/states.py"}
# names whose values are states or stop reasons, when assigned or passed by keyword
STATE_NAMES = re.compile(
    r"(^|_)(state|states|target|ended|stop_reason|stop_request|request|why|finished|active"
    r"|live|running)$",
    re.IGNORECASE,
)


def _literals(node: ast.AST | None, among: set[str] = LITERALS) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in among else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for elt in node.elts for s in _literals(elt, among)]
    if isinstance(node, ast.IfExp):
        return _literals(node.body, among) + _literals(node.orelse, among)
    return []


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _found(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                out += [(node.lineno, s) for s in _literals(side)]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(STATE_NAMES.search(_name(t)) for t in targets):
                out += [(node.lineno, s) for s in _literals(node.value)]
        elif isinstance(node, ast.keyword) and node.arg and STATE_NAMES.search(node.arg):
            out += [(node.value.lineno, s) for s in _literals(node.value)]
        elif isinstance(node, ast.Dict):  # keyed by state (a command may be named "delete")
            keys = [k for k in node.keys if k is not None]
            out += [(node.lineno, s) for k in keys for s in _literals(k, STATES)]
    return out


def test_no_bare_state_or_stop_reason_literals() -> None:
    hits = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in EXEMPT:
                continue
            hits += [f"{rel}:{n}: {s!r}" for n, s in _found(ast.parse(path.read_text()))]
    assert not hits, "write the enum member (runner/model.py):\n" + "\n".join(hits)


def test_the_scan_finds_what_it_looks_for() -> None:
    code = (
        'if run.state == "Queued": pass\n'
        'x = w.state in ("Exited", "Lost")\n'
        'store.workers.stop(tx, 1, stop_reason="preempt")\n'
        'state = "Running" if others else "Stopping"\n'
        'STYLE = {"Starting": "cyan"}\n'
        'COMMANDS = {"delete": fast_delete}\n'
        'store.events.add(tx, name, ws, "Failed", Reason("Failed"), now)\n'  # an event kind
    )
    assert sorted(n for n, _ in _found(ast.parse(code))) == [1, 2, 2, 3, 4, 4, 5]
