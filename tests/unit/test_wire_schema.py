"""The wire schema (runner/schema.py): the daemon's JSON through it stays byte for byte.

``fixtures/views.json`` holds what runner/api/views.py rendered for the rows below
before the schema existed (as aiohttp's ``json_response`` writes it); the rendering
through the Structs must give the same bytes, and the client's decoding must read
them back into the same objects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from runner.engine.published import Published
from runner.model import Resources
from runner.planner.estimates import Estimate
from runner.planner.types import Head, Plan
from runner.reasons import Reason, ReasonCode, RunRef, Viewer
from runner.rows import GroupRow
from runner.runspec.parse import parse_spec
from runner.store.db import EventRow, RunRow, WorkerRow
from tests.unit.store_rows import T0, row_spec, run_row, worker_row

FIXTURE = Path(__file__).parent / "fixtures" / "views.json"
ADMIN = Viewer(None)
MEMBER = Viewer(frozenset({"vision"}))  # sees vision's runs, not nlp's


URGENT = RunRef("urgent", "vision")
SECRET = RunRef("secret", "nlp")
PLAN = Plan(
    starts=(), preemptions=(), quota_waits=frozenset(), order=("head-run", "behind", "dep"),
    head=Head("head-run", "vision", 5, T0 + 3600, Resources(2, 4000, 8 << 30, 1)),
    reasons={},
)  # fmt: skip
SHOWN = Published(1, PLAN, {}, False).shown  # what the API is given of it


def _runs() -> list[tuple[RunRow, list[WorkerRow], Estimate | None]]:
    """A queue with every shape a run object takes: head, waiting with an estimate,
    paused, stopping for a preemption, finished, private error, a group's run."""
    waits = Reason.of("Queued behind {0}.", URGENT, code=ReasonCode.QUEUED_BEHIND)
    stopping = [worker_row("victim", 0, "Stopping", stop_reason="preempt", stop_deadline=T0 + 130,
                           stopping_for=SECRET), worker_row("victim", 1, "Running")]  # fmt: skip
    return [
        (run_row("head-run", "vision", "Queued", reason=Reason.of(
            "Next to run", code=ReasonCode.HEAD_WAITS)), [], None),
        (run_row("behind", "vision", "Queued", reason=waits), [], Estimate(T0 + 7200)),
        (run_row("dep", "vision", "Queued", after=("head-run",), grp="sweep-a"), [],
         Estimate(None, ("head-run",))),
        (run_row("paused", "nlp", "Queued", preempted_by=URGENT, preemptions=1, reason=Reason.of(
            "Preempted by {0}", URGENT, code=ReasonCode.PREEMPTED_WAITING)), [], None),
        (run_row("victim", "nlp", "Stopping", workers=2, started_at=T0 + 10, backfilled=True,
                 reason=Reason.of("Preempted for {0}", SECRET, code=ReasonCode.PREEMPTED)),
         stopping, None),
        (run_row("done", "vision", "Succeeded", started_at=T0 + 10, finished_at=T0 + 99,
                 exit_code=0),
         [worker_row("done", 0, "Done", exit_code=0, finished_at=T0 + 99)], None),
        (run_row("parked", "nlp", "Queued", held_by="bob", begin_at="2026-12-02T03:00:00Z",
                 reason=Reason("Held by bob", code=ReasonCode.HELD)), [], None),
        (run_row("broke", "nlp", "Failed", exit_code=2, finished_at=T0 + 50, reason=Reason(
            "cannot open /secret/path", (), True, code=ReasonCode.MESSAGE)), [], None),
    ]  # fmt: skip


def _groups() -> list[tuple[GroupRow, list[RunRow]]]:
    template = {"metadata": {"name": "t"}, "spec": {"priority": 3}}
    docs = [
        ("sweep-a", "sweep", {"template": template, "list": [{"LR": 0.1}, {"LR": 0.01}]}),
        ("eval", "replicas", {"template": template, "replicas": 2}),
        ("nightly", "schedule", {"template": template, "cron": "0 3 * * *", "policy": "skip"}),
    ]
    runs = [run_row("sweep-a-0", "vision", "Running"), run_row("sweep-a-1", "vision", "Queued")]
    return [
        (
            GroupRow(
                name=name,
                kind=kind,
                workspace="vision",
                owner="alice",
                uid=1000,
                gid=1000,
                spec_text=json.dumps(doc),
                created_at=T0,
                replicas=2,
                next_at=T0 + 60,
                last_fired_at=T0 - 60 if kind == "schedule" else None,
            ),
            runs if kind != "schedule" else [],
        )
        for name, kind, doc in docs
    ]


M = ReasonCode.MESSAGE


def _events() -> list[EventRow]:
    return [
        EventRow(
            id=1,
            run="behind",
            workspace="vision",
            time=T0,
            kind="Submitted",
            message=Reason.of("Submitted by alice", code=M),
            code=ReasonCode.SUBMITTED,
        ),
        EventRow(
            id=2,
            run="victim",
            workspace="nlp",
            time=T0 + 5,
            kind="Preempted",
            message=Reason.of("Preempted for {0}", URGENT, code=M),
            code=ReasonCode.PREEMPTED,
        ),
        EventRow(
            id=3,
            run="nightly",
            workspace="vision",
            time=T0 + 6,
            kind="Fired",
            message=Reason.of("Fired", code=M),
            grp="nightly",
            code=ReasonCode.FIRED,
        ),
    ]


def rendered(views: Any = None) -> dict[str, str]:
    """Each object as the daemon's aiohttp answer carries it (``json.dumps``), by name."""
    if views is None:
        from runner.api import views
    views._SECRET = b"0" * 16  # the hidden runs' ids, made reproducible
    out: dict[str, str] = {}
    for viewer_name, viewer in (("admin", ADMIN), ("member", MEMBER)):
        for run, live, estimate in _runs():
            spec = parse_spec(run.spec(), stored=True)
            obj = views.run_object(run, spec, viewer, SHOWN, live, T0 + 100, estimate)
            out[f"run {run.name} {viewer_name}"] = json.dumps(obj)
            for w in live:
                out[f"worker {run.name}/{w.worker} {viewer_name}"] = json.dumps(
                    views.worker_object(w, viewer)
                )
        for e in _events():
            out[f"event {e.id} {viewer_name}"] = json.dumps(views.event_object(e, viewer))
    for g, runs in _groups():
        out[f"group {g.name}"] = json.dumps(views.group_object(g, runs))
    return out


def test_the_daemon_renders_byte_for_byte_as_before() -> None:
    expected: dict[str, str] = json.loads(FIXTURE.read_text())
    assert rendered() == expected


if __name__ == "__main__" and os.environ.get("WRITE_FIXTURE"):  # once, from the old views.py
    import importlib

    old = importlib.import_module(os.environ["WRITE_FIXTURE"])
    FIXTURE.write_text(json.dumps(rendered(old), indent=1, sort_keys=True) + "\n")


def test_the_client_decodes_and_re_encodes_the_same_bytes() -> None:
    """What a client decodes it can print again as the daemon sent it (`--json`)."""
    import msgspec

    from runner import schema

    types = {"run": schema.Run, "worker": schema.Worker, "event": schema.Event,
             "group": schema.Group}  # fmt: skip
    for key, text in json.loads(FIXTURE.read_text()).items():
        decoded = msgspec.json.decode(text, type=types[key.split()[0]])
        assert json.dumps(msgspec.to_builtins(decoded)) == text, key


def test_a_newer_daemons_fields_are_ignored_and_a_wrong_type_is_refused() -> None:
    import msgspec
    import pytest

    from runner import schema

    text = json.loads(FIXTURE.read_text())["run behind admin"]
    newer = json.loads(text) | {"some_new_field": [1, 2]}
    run = msgspec.json.decode(json.dumps(newer), type=schema.Run)
    assert (run.name, run.state, run.reason_code) == ("behind", "Queued", "QUEUED_BEHIND")
    with pytest.raises(msgspec.ValidationError, match="priority"):
        msgspec.json.decode(json.dumps(newer | {"priority": "high"}), type=schema.Run)


def test_a_run_details_usage_is_read_and_printed_as_sent() -> None:
    """``usage`` (its telemetry) is the one field ``astra show --json`` gained: absent for a
    run never sampled (the bytes as before), else read and printed back as sent."""
    import msgspec

    from runner import schema

    text = json.loads(FIXTURE.read_text())["run done admin"]
    detail = json.loads(text) | {
        "spec": {}, "workers_history": [], "events": [], "checkpoint": None,
    }  # fmt: skip
    plain = msgspec.json.decode(json.dumps(detail), type=schema.RunDetail)
    assert json.dumps(msgspec.to_builtins(plain)) == json.dumps(detail)
    figures = {"cpu_percent": 99.5, "memory_bytes": 1 << 30, "gpu_memory_bytes": 2 << 30,
               "gpu_util": 87.5}  # fmt: skip
    usage = {"samples": 12, "since": "2026-09-21T12:26:50Z", "until": "2026-09-21T12:27:45Z",
             "now": None, "mean": figures, "peak": figures | {"cpu_percent": 180.0}}  # fmt: skip
    sampled = msgspec.json.decode(json.dumps(detail | {"usage": usage}), type=schema.RunDetail)
    assert not isinstance(sampled.usage, msgspec.UnsetType) and sampled.usage.peak is not None
    assert sampled.usage.peak.cpu_percent == 180.0
    assert json.dumps(msgspec.to_builtins(sampled)) == json.dumps(detail | {"usage": usage})


def test_an_idle_run_carries_idle_since_after_begin_at_and_the_client_keeps_it() -> None:
    """The one field added for idle GPUs: there while the run is marked idle, and only then
    (every object above, none marked, is as before)."""
    import msgspec

    from runner import schema
    from runner.api import views

    run, live, estimate = next((r, w, e) for r, w, e in _runs() if w)
    spec = parse_spec(run.spec(), stored=True)
    plain = views.run_object(run, spec, ADMIN, SHOWN, live, T0 + 100, estimate)
    idle = views.run_object(run, spec, ADMIN, SHOWN, live, T0 + 100, estimate, T0 + 40)
    assert "idle_since" not in plain
    assert list(idle) == [*plain, "idle_since"] and idle["idle_since"] == views.iso(T0 + 40)
    assert {k: v for k, v in idle.items() if k != "idle_since"} == plain
    text = json.dumps(idle)
    decoded = msgspec.json.decode(text, type=schema.Run)
    assert decoded.idle_since == idle["idle_since"]
    assert json.dumps(msgspec.to_builtins(decoded)) == text
    ended = views.run_object(run, spec, ADMIN, SHOWN, (), T0 + 100, estimate, T0 + 40)
    assert "idle_since" not in ended  # no live worker: nothing is idle


def test_a_shared_run_carries_its_gpu_memory_and_a_whole_gpu_run_none() -> None:
    """``gpu_memory_bytes``: the one field a shared request adds, last; absent otherwise
    (so every other run's bytes above stay as they were)."""
    from runner.api import views
    from runner.schema import Run

    doc = row_spec("packed")
    doc["spec"]["task_template"]["requested_resources"]["gpu_requests"] = {
        "count": 1, "memory_bytes": 20 << 30, "shared": True}  # fmt: skip
    run = run_row("packed", "vision", "Queued", spec_text=json.dumps(doc))
    obj = json.loads(json.dumps(views.run_object(run, parse_spec(doc, stored=True), ADMIN,
                                                 SHOWN, (), T0, None)))  # fmt: skip
    assert list(obj)[-1] == "gpu_memory_bytes" and obj["gpu_memory_bytes"] == 20 << 30
    assert obj["gpus_requested"] == 1
    import msgspec

    assert msgspec.json.decode(json.dumps(obj), type=Run).gpu_memory_bytes == 20 << 30
    whole = run_row("whole", "vision", "Queued")
    plain = views.run_object(
        whole, parse_spec(whole.spec(), stored=True), ADMIN, SHOWN, (), T0, None
    )
    assert "gpu_memory_bytes" not in json.loads(json.dumps(plain))
