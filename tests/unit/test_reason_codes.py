"""Every reason the planner gives carries a code, and each code says what its text says."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given

from runner.planner.plan import Plan, Snapshot, plan
from runner.reasons import Reason, ReasonCode, RunRef, event_kind
from runner.store.db import MIGRATIONS, SCHEMA_APPLICATION_ID, Store
from tests.unit.planner_builders import HOUR, NOW, running, snap, waiting, workspace
from tests.unit.planner_strategies import PROPERTY, snapshots

C = ReasonCode
# each code of a waiting run's reason, and how its text (for people) begins
WAIT_TEXT = {
    C.HEAD_WAITS: "Next to run (priority ",
    C.QUEUED_BEHIND: "Queued behind ",
    C.QUOTA_WAIT: "Waits for namespace quota: ",
    C.QUOTA_OVER: "Waits for more than the namespace's quota allows at all",
    C.TOO_LARGE: "Cannot run on this machine: ",
    C.PREEMPTING: "Preempting ",
    C.STARTING: "Starting: waiting for ",
    C.PREEMPTED_WAITING: "Preempted by higher-priority work (",
    C.FITS: "first in the order that fits now",
}
QUOTA = (workspace("w", gpus=2),)


def _codes(p: Plan) -> dict[str, ReasonCode]:
    return {name: reason.code for name, reason in p.reasons.items()}


def _check(p: Plan, snapshot: Snapshot) -> None:
    preempted = {w.name for w in snapshot.waiting if w.preempted_by is not None}
    for name, reason in p.reasons.items():
        assert reason.code in WAIT_TEXT, (name, reason)
        text = reason.render()
        if name in preempted:  # the prefix; the code says what follows it, if anything
            prefix = WAIT_TEXT[C.PREEMPTED_WAITING]
            assert text.startswith(prefix), (name, reason)
            if reason.code is not C.PREEMPTED_WAITING:
                text = text.split("; waiting to run again. ", 1)[1]
        assert text.startswith(WAIT_TEXT[reason.code]), (name, reason)
    for start in p.starts:
        assert start.why.code is (C.BACKFILLED if start.backfill else C.FITS), start
    for name, reached in p.quota_reached.items():
        assert reached.code is C.QUOTA_REACHED and reached.render().startswith("Quota reached: ")
        assert p.reasons[name].code in (C.QUOTA_WAIT, C.QUOTA_OVER, C.PREEMPTED_WAITING)


CASES: list[tuple[str, Snapshot, dict[str, ReasonCode]]] = [
    (
        "head, backfill and behind",
        snap(
            running("a", gpus=(0, 1, 2, 3, 4, 5), limit=2 * HOUR),
            waiting("big", gpus=8, at=1),
            waiting("short", gpus=2, limit=1800, at=2),
            waiting("long", gpus=2, at=3),
        ),
        {"big": C.HEAD_WAITS, "long": C.QUEUED_BEHIND},
    ),
    (
        "quota",
        snap(
            running("r", gpus=(0, 1), ws="w"),
            waiting("more", gpus=1, ws="w"),
            waiting("never", gpus=4, ws="w"),
            workspaces=QUOTA,
        ),
        {"more": C.QUOTA_WAIT, "never": C.QUOTA_OVER},
    ),
    ("too large", snap(waiting("huge", gpus=16)), {"huge": C.TOO_LARGE}),
    (
        "preempting",
        snap(running("low", gpus=tuple(range(8))), waiting("high", gpus=8, priority=5)),
        {"high": C.PREEMPTING},
    ),
    (
        "starting as victims stop",
        snap(
            running("low", gpus=tuple(range(8)), stop_deadline=10, stopping_for="high"),
            waiting("high", gpus=8, priority=5),
        ),
        {"high": C.STARTING},
    ),
    (
        "preempted, waiting again",
        snap(
            running("hog", gpus=tuple(range(8)), priority=9),
            waiting("back", gpus=8, preempted_by="hog"),
        ),
        {"back": C.HEAD_WAITS},
    ),
    (
        "preempted, behind the head",
        snap(
            running("hog", gpus=tuple(range(8)), priority=9),
            waiting("head", gpus=8, at=1),
            waiting("back", gpus=8, at=2, preempted_by="hog"),
        ),
        {"head": C.HEAD_WAITS, "back": C.PREEMPTED_WAITING},
    ),
]


@pytest.mark.parametrize(
    ("snapshot", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_planner_message_has_its_code(
    snapshot: Snapshot, expected: dict[str, ReasonCode]
) -> None:
    p = plan(snapshot, NOW)
    assert _codes(p) == expected
    _check(p, snapshot)


def test_a_backfill_start_says_so_in_its_code() -> None:
    p = plan(CASES[0][1], NOW)
    assert [(s.run, s.why.code) for s in p.starts] == [("short", C.BACKFILLED)]


@PROPERTY
@given(snapshots())
def test_no_planner_reason_lacks_a_code(snapshot: Snapshot) -> None:
    _check(plan(snapshot, NOW), snapshot)


def test_a_joined_reason_has_the_code_of_what_follows_and_it_survives_json() -> None:
    prefix = Reason.of("Preempted ({0})", RunRef("a", "w"), code=C.PREEMPTED_WAITING)
    joined = prefix.then(Reason("Next to run", code=C.HEAD_WAITS))
    assert joined.code is C.HEAD_WAITS  # what follows the prefix; ``paused`` tells the prefix
    assert prefix.then(Reason("plain", code=ReasonCode.MESSAGE)).code is C.PREEMPTED_WAITING
    assert (
        Reason("Started:", code=ReasonCode.MESSAGE).then(Reason("x", code=C.BACKFILLED)).code
        is C.BACKFILLED
    )
    assert Reason.from_json(joined.to_json()) == joined
    assert Reason.from_json(Reason("plain", code=ReasonCode.MESSAGE).to_json()).code is C.MESSAGE


def test_old_events_get_a_code_from_their_kind_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:7]:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 7")
    conn.execute(f"PRAGMA application_id = {SCHEMA_APPLICATION_ID}")
    rows = [
        ("Started", '{"template": "Backfilled: attempt 1 it fits", "refs": []}'),
        ("Started", '{"template": "Started: attempt 1", "refs": []}'),
        ("QuotaReached", '{"template": "Quota reached: gpus", "refs": []}'),
        ("Oddity", '{"template": "from a version we never knew", "refs": []}'),
    ]
    for kind, message in rows:
        conn.execute(
            "INSERT INTO events (run, workspace, time, kind, message) VALUES ('r', 'w', 1, ?, ?)",
            (kind, message),
        )
    conn.close()
    store = Store(path)
    assert [e.code for e in store.events.all("r")] == [
        C.BACKFILLED, C.STARTED, C.QUOTA_REACHED, C.LEGACY,
    ]  # fmt: skip
    with store.transaction() as tx:
        store.events.add(
            tx,
            "r",
            "w",
            ReasonCode.TIME_LIMIT,
            Reason("Time limit reached", code=ReasonCode.MESSAGE),
            2.0,
        )
        store.events.add(tx, "r", "w", C.REQUEUED, Reason("x", code=ReasonCode.MESSAGE), 3.0)
        store.events.add(
            tx, "r", "w", C.BACKFILLED, Reason("Backfilled", code=ReasonCode.MESSAGE), 4.0
        )
        store.events.add(
            tx, "r", "w", C.PRIORITY_CHANGED, Reason("Priority 5", code=ReasonCode.MESSAGE), 5.0
        )
    new = store.events.all("r")[4:]
    assert [(e.kind, e.code) for e in new] == [
        ("TimeLimit", C.TIME_LIMIT), ("Requeued", C.REQUEUED), ("Started", C.BACKFILLED),
        ("Priority", C.PRIORITY_CHANGED),
    ]  # fmt: skip


def test_an_events_kind_is_its_codes_as_stored_before() -> None:
    """The kind people read is made from the code: every kind that older events were
    stored with (migration 8 gives each its code) comes back from that code."""
    script = MIGRATIONS[7]
    pairs = re.findall(r"WHEN '(\w+)' THEN '([A-Z_]+)'", script)
    assert len(pairs) >= 20
    for kind, code in pairs:
        assert event_kind(C(code)) == kind
    assert event_kind(C.BACKFILLED) == "Started"
    assert event_kind(C.GPU_IDLE) == "GpuIdle" and event_kind(C.NOTIFY_FAILED) == "NotifyFailed"
