"""Begin times as people and #SBATCH files write them (runner/runspec/begin.py), in specs,
and the runs they keep out of the order (runner/engine/holds.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from runner.clock import Now
from runner.engine.holds import kept_out
from runner.model import RunState, StopReason
from runner.reasons import Reason, ReasonCode
from runner.runspec.begin import begin_from_slurm, begin_from_text, iso_begin, shown_begin
from runner.runspec.build import FieldError, begin_time, run_document
from runner.runspec.parse import SpecError, parse_spec, spec_to_dict
from runner.runspec.sbatch import parse_sbatch
from runner.store.db import RunRow

NOW = datetime(2026, 12, 1, 16, 30, 15, tzinfo=UTC).timestamp()
MONO, BOOT = 5000.0, "boot-1"
# the reason its failure wrote, 10 s after NOW (runner/engine/backoff.py)
RESTARTING = "Restarting at 16:30:25 UTC (restart 1 of 10): worker 0 exited with code 2"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("typed", "moment"),
    [
        ("2026-12-02T03:00", "2026-12-02T03:00:00"),  # UTC: no offset given
        ("2026-12-02T03:00:00Z", "2026-12-02T03:00:00"),
        ("2026-12-02T05:00+02:00", "2026-12-02T03:00:00"),
        ("2026-12-02 03:00", "2026-12-02T03:00:00"),
        ("+2h", "2026-12-01T18:30:15"),
        ("+90m", "2026-12-01T18:00:15"),
    ],
)
def test_astra_run_begin_forms(typed: str, moment: str) -> None:
    assert begin_from_text(typed, NOW) == at(moment)


@pytest.mark.parametrize(
    ("typed", "moment"),
    [
        ("now", "2026-12-01T16:30:15"),
        ("now+60", "2026-12-01T16:31:15"),
        ("now+2hours", "2026-12-01T18:30:15"),
        ("now+1hour", "2026-12-01T17:30:15"),
        ("now+3days", "2026-12-04T16:30:15"),
        ("18:00", "2026-12-01T18:00:00"),  # later today
        ("16:00", "2026-12-02T16:00:00"),  # passed today: tomorrow, as Slurm reads it
        ("03:15:30", "2026-12-02T03:15:30"),
        ("2026-12-24", "2026-12-24T00:00:00"),
        ("2026-12-24T08:00", "2026-12-24T08:00:00"),
    ],
)
def test_sbatch_begin_forms(typed: str, moment: str) -> None:
    assert begin_from_slurm(typed, NOW) == at(moment)


@pytest.mark.parametrize("typed", ["midnight", "teatime", "12/24/26", "now-1hour", "25:00", ""])
def test_unclear_slurm_forms_are_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="not"):
        begin_from_slurm(typed, NOW)


def test_refusals_name_the_field() -> None:
    with pytest.raises(FieldError) as error:
        begin_time("tomorrow", NOW)
    assert error.value.field == "begin"
    assert "ISO 8601" in error.value.message
    for far in ("1999-01-01T00:00", "9999-12-31T23:59:59.5", "+99999999w"):
        with pytest.raises(FieldError, match="between 2000-01-01 and 2100-01-01"):
            begin_time(far, NOW)
    with pytest.raises(ValueError, match="between"):
        begin_from_slurm("now+999999999weeks", NOW)
    early = {"begin_at": "0001-01-01T00:00+01:00", "task_template": {}}
    with pytest.raises(SpecError, match=r"^spec\.begin_at: must be between"):
        parse_spec({"metadata": {"name": "r"}, "spec": early})


def test_shown_as_messages_say_it() -> None:
    assert shown_begin(at("2026-12-02T03:00:00")) == "2026-12-02 03:00 UTC"
    assert shown_begin(at("2026-12-02T03:00:07")) == "2026-12-02 03:00:07 UTC"
    assert iso_begin(at("2026-12-02T03:00:00")) == "2026-12-02T03:00:00Z"


def test_the_spec_fields_round_trip() -> None:
    doc = run_document("r", ["true"], hold=True, begin_at=begin_time("2026-12-02T05:00+02:00"))
    assert doc["spec"]["hold"] is True and doc["spec"]["begin_at"] == "2026-12-02T03:00:00Z"
    spec = parse_spec(doc)
    assert spec.hold and spec.begin_at == at("2026-12-02T03:00:00")
    again = spec_to_dict(spec)
    assert parse_spec(json.loads(json.dumps(again))) == spec
    assert "hold" not in spec_to_dict(parse_spec(run_document("r", ["true"])))["spec"]  # type: ignore[operator]
    with pytest.raises(SpecError, match=r"^spec.begin_at: 'soon' is not an ISO 8601"):
        parse_spec({"metadata": {"name": "r"}, "spec": {"begin_at": "soon", "task_template": {}}})
    with pytest.raises(SpecError, match=r"spec\.hold"):
        parse_spec({"metadata": {"name": "r"}, "spec": {"hold": "yes", "task_template": {}}})


def test_sbatch_begin_and_hold() -> None:
    spec = parse_sbatch("#!/bin/bash\n#SBATCH -J x --begin=now+2hours\n#SBATCH -H\ntrue\n", now=NOW)
    assert spec.begin_at == NOW + 7200 and spec.hold
    with pytest.raises(SpecError) as error:
        parse_sbatch("#SBATCH -J x\n#SBATCH --begin=noon\ntrue\n", now=NOW)
    assert str(error.value).startswith("#SBATCH --begin: 'noon' is not understood")
    with pytest.raises(SpecError, match="takes no value"):
        parse_sbatch("#SBATCH -J x\n#SBATCH --hold=1\ntrue\n", now=NOW)


def _row(name: str, *, held_by: str | None = None, begin: str | None = None,
         state: RunState = RunState.QUEUED, stop: StopReason | None = None,
         rest: float | None = None) -> RunRow:  # fmt: skip
    """``rest``: a back-off that ends this many seconds after NOW on the monotonic clock
    of BOOT (which reads MONO at NOW); its wall reading is an hour later, so a test sees
    which clock decides."""
    doc = run_document(name, ["true"], begin_at=begin)
    reason = None if rest is None else Reason(RESTARTING, code=ReasonCode.RESTARTING)
    return RunRow(
        name=name,
        workspace="vision",
        owner="alice",
        uid=1000,
        gid=1000,
        spec_text=json.dumps(doc),
        priority=0,
        state=state,
        reason=reason,
        submitted_at=NOW,
        started_at=None,
        finished_at=None,
        exit_code=None,
        restarts=0,
        preemptions=0,
        attempts=0,
        preempted_by=None,
        stop_request=stop,
        quota_noted=False,
        held_by=held_by,
        restart_at=None if rest is None else NOW + rest + 3600,  # not what decides
        restart_mono=None if rest is None else MONO + rest,
        restart_boot=BOOT,
    )


def _now(wall: float, mono: float = 0.0) -> Now:
    return Now(wall, MONO + mono, BOOT)


def test_held_and_not_yet_begun_runs_are_kept_out_until_their_time() -> None:
    rows = [
        _row("held", held_by="bob"),
        _row("later", begin="2026-12-02T03:00:00Z"),
        _row("past", begin="2026-12-01T00:00:00Z"),
        _row("plain"),
        _row("running", held_by="bob", state=RunState.RUNNING),
        _row("deleting", begin="2026-12-02T03:00:00Z", stop=StopReason.DELETE),
    ]
    kept = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True), _now(NOW))
    assert {n: (r.render(), r.code) for n, r in kept.reasons.items()} == {
        "held": ("Held by bob", ReasonCode.HELD),
        "later": ("Waits until 2026-12-02 03:00 UTC (its begin time)", ReasonCode.BEGIN_WAIT),
    }
    assert kept.next_begin == at("2026-12-02T03:00:00")
    after = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True),
                     _now(at("2026-12-02T03:00:00")))  # fmt: skip
    assert set(after.reasons) == {"held"} and after.next_begin is None


def test_a_run_backing_off_is_kept_out_until_its_wait_ends_on_the_monotonic_clock() -> None:
    rows = [
        _row("resting", rest=10),
        _row("held", rest=10, held_by="bob"),  # held: its hold says why
        _row("worker", rest=10, state=RunState.RUNNING),  # a failed worker of a running run
        _row("deleted", rest=10, stop=StopReason.DELETE),
        _row("passed", rest=-1),
    ]
    kept = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True), _now(NOW))
    assert {n: (r.render(), r.code) for n, r in kept.reasons.items()} == {
        "resting": (RESTARTING, ReasonCode.RESTARTING),
        "held": ("Held by bob", ReasonCode.HELD),
    }  # fmt: skip
    assert kept.resting == {"worker"} and kept.wake_in == 10
    # the wall clock stepped an hour ahead changes nothing: the wait is an interval
    later = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True), _now(NOW + 7200, 4))
    assert set(later.reasons) == {"resting", "held"} and later.wake_in == 6
    done = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True), _now(NOW, 10))
    assert set(done.reasons) == {"held"} and not done.resting and done.wake_in is None
    # after a reboot the monotonic reading means nothing: the wall clock decides
    rebooted = kept_out(rows, lambda r: parse_spec(r.spec(), stored=True),
                        Now(NOW + 3600, 5.0, "another"))  # fmt: skip
    assert set(rebooted.reasons) == {"resting", "held"} and rebooted.wake_in == 10
