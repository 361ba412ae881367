"""A preemption whose preemptor no longer needs the room is withdrawn: no SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.engine.loop import KILL_AGAIN
from runner.reasons import Viewer
from runner.store.db import WorkerRow
from tests.support.harness import PY, Harness, sleeper, spec, wait_for

Make = Callable[..., Harness]

WORKSPACES = """
[workspaces.vision]
members = ["root"]
max_priority = 10

[workspaces.nlp]
members = ["root"]
max_priority = 10
"""

# Keeps running on SIGTERM; worker 0 of a run with gang=false dies of it (TERM_ONE_ONLY).
TRAPS_TERM = (
    "import os, signal, time\n"
    "if os.environ.get('TERM_ONE_ONLY') != '1' or os.environ['ASTRAEUS_WORKER_INDEX'] != '0':\n"
    "    signal.signal(signal.SIGTERM, lambda *_: print('SIGTERM: saving', flush=True))\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.1)\n"
)


def checkpoints_then_exits(gate: Path) -> list[str]:
    """On SIGTERM: 'saves' until ``gate`` exists, then exits 0, as a checkpointing run does."""
    return [
        PY, "-c",
        "import os, signal, sys, time\n"
        "stop = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
        "print('ready', flush=True)\n"
        "while not (stop and os.path.exists(sys.argv[1])): time.sleep(0.05)\n"
        "sys.exit(0)\n",
        str(gate),
    ]  # fmt: skip


def workers(h: Harness, name: str) -> list[WorkerRow]:
    return h.daemon.store.workers.of(name)


def preempt(h: Harness, victim: dict[str, object], gpus: int = 1, live: int = 1) -> None:
    """Start ``victim`` (in nlp), then an urgent run (in vision) that preempts it."""
    h.submit(victim)
    h.wait_state("victim", "Running")
    wait_for(lambda: h.log("victim").count("ready") == live, message="the victim ready")
    h.submit(spec("urgent", sleeper(), gpus=gpus, priority=10, workspace="vision"))
    wait_for(
        lambda: any(w.state == "Stopping" for w in workers(h, "victim")), message="the preemption"
    )


def grace_over(h: Harness) -> None:
    """Wait past the grace the victim's SIGTERM started, and a few ticks more."""
    deadline = max(w.stop_deadline_mono or 0.0 for w in workers(h, "victim"))
    wait_for(lambda: time.monotonic() > deadline + KILL_AGAIN, message="the grace over")
    ticks = h.daemon.backend.status.ticks + 3
    wait_for(lambda: h.daemon.backend.status.ticks >= ticks, message="three more ticks")


def assert_kept_running(h: Harness, before: list[WorkerRow]) -> None:
    after = workers(h, "victim")
    assert [(w.id, w.attempt) for w in after] == [(w.id, w.attempt) for w in before]
    assert all(w.state == "Running" and not w.killed for w in after), after
    run = h.run("victim")
    assert (run.state, run.reason, run.attempts) == ("Running", None, 1)
    assert (run.preemptions, run.restarts) == (0, 0)
    events = h.events("victim")
    assert not [e for e in events if e.startswith("Sent SIGKILL") or "queued again" in e]


def test_withdrawn_when_the_preemptor_is_deleted(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=1, grace=5)
    preempt(h, spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp"))
    before = workers(h, "victim")
    h.daemon.service.delete("urgent", h.root)
    wait_for(lambda: h.state("victim") == "Running", message="the victim running again")
    grace_over(h)
    assert_kept_running(h, before)
    assert "SIGTERM: saving" in h.log("victim")  # it had the SIGTERM: that cannot be undone
    withdrawn = [e for e in h.daemon.store.events.all("victim") if e.kind == "PreemptionWithdrawn"]
    assert [e.message.render() for e in withdrawn] == [
        "Preemption withdrawn: urgent no longer needs the room; the run keeps running"
    ]
    assert withdrawn[0].message.render(Viewer(frozenset({"nlp"}))) == (
        "Preemption withdrawn: a job in another namespace no longer needs the room;"
        " the run keeps running"
    )


@pytest.mark.parametrize("who", ["preemptor lowered", "victim raised"])
def test_withdrawn_when_the_preemptor_no_longer_outranks_the_victim(
    make_daemon: Make, who: str
) -> None:
    h = make_daemon(WORKSPACES, gpus=1, grace=5)
    preempt(h, spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp"))
    before = workers(h, "victim")
    if who == "preemptor lowered":
        h.daemon.service.set_priority("urgent", -20, h.root)
    else:
        h.daemon.service.set_priority("victim", 10, h.root)  # equal never preempts
    wait_for(lambda: h.state("victim") == "Running", message="the victim running again")
    grace_over(h)
    assert_kept_running(h, before)
    assert "Preemption withdrawn: urgent no longer has a higher priority than this run; " in (
        "\n".join(h.events("victim"))
    )
    assert h.state("urgent") == "Queued"
    assert not h.reason("urgent").startswith(("Preempting", "Starting: waiting"))


def test_a_gang_is_withdrawn_whole(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=2, grace=5)
    victim = spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp",
                  workers=2)  # fmt: skip
    preempt(h, victim, gpus=2, live=2)
    wait_for(lambda: all(w.state == "Stopping" for w in workers(h, "victim")))
    before = workers(h, "victim")
    h.daemon.service.set_priority("urgent", -20, h.root)
    wait_for(lambda: h.state("victim") == "Running", message="the gang running again")
    grace_over(h)
    assert_kept_running(h, before)


def test_a_worker_that_already_exited_is_queued_again(make_daemon: Make) -> None:
    """Independent workers: the one that died of SIGTERM runs again, the other runs on."""
    h = make_daemon(WORKSPACES, gpus=2, grace=5)
    victim = spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp",
                  workers=2, gang=False, env={"TERM_ONE_ONLY": "1"})  # fmt: skip
    preempt(h, victim, gpus=2, live=2)
    wait_for(lambda: h.run("victim").preemptions == 1, message="worker 0 queued again")
    kept = next(w for w in workers(h, "victim") if w.worker == 1)
    assert kept.state == "Stopping"
    h.daemon.service.delete("urgent", h.root)
    wait_for(
        lambda: [w.state for w in workers(h, "victim")] == ["Cancelled", "Running", "Running"],
        message="worker 0 started again, worker 1 kept",
    )
    grace_over(h)
    rows = workers(h, "victim")
    again = rows[2]
    assert (again.worker, again.attempt) == (0, 2)
    assert (rows[1].id, rows[1].state, rows[1].killed) == (kept.id, "Running", False)
    events = h.events("victim")
    assert "Preempted by urgent; queued again" in events
    assert any(e.startswith("Preemption withdrawn: urgent") for e in events)
    assert not [e for e in events if e.startswith("Sent SIGKILL")]


def test_an_exit_on_the_sigterm_after_a_withdrawal_still_counts_as_preempted(
    make_daemon: Make, tmp_path: Path
) -> None:
    """Withdrawn, it ran on; then it ends on the SIGTERM it had, within that grace (exit 0):
    queued again as preempted, not Succeeded."""
    gate = tmp_path / "saved"
    h = make_daemon(WORKSPACES, gpus=1, grace=30)
    preempt(h, spec("victim", checkpoints_then_exits(gate), gpus=1, priority=-10,
                    workspace="nlp"))  # fmt: skip
    h.daemon.service.delete("urgent", h.root)
    wait_for(lambda: "PreemptionWithdrawn" in [e.kind for e in h.daemon.store.events.all("victim")])
    assert [w.state for w in workers(h, "victim")] == ["Running"]
    gate.touch()
    wait_for(lambda: h.run("victim").preemptions == 1, message="queued again as preempted")
    assert "Preempted by urgent; queued again" in h.events("victim")
    assert h.wait_state("victim", "Running").attempts == 2  # the room is free: it runs again
    assert h.run("victim").restarts == 0


def test_a_delete_during_the_preemption_is_not_withdrawn(make_daemon: Make) -> None:
    """The victim's own stop (a delete) stands when its preemptor goes away."""
    h = make_daemon(WORKSPACES, gpus=1, grace=2)
    preempt(h, spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp"))
    h.daemon.service.delete("victim", h.root)
    h.daemon.service.delete("urgent", h.root)
    h.wait_state("victim", "Cancelled")
    kinds = [e.kind for e in h.daemon.store.events.all("victim")]
    assert "PreemptionWithdrawn" not in kinds and "Killed" in kinds


GANG_MEMBER = (
    "import os, signal, sys, time\n"
    "terms = []\n"
    "signal.signal(signal.SIGTERM, lambda *_: terms.append(1))\n"
    "print('ready', flush=True)\n"
    "first = os.environ['ASTRAEUS_WORKER_INDEX'] == '0'\n"
    "while not (first and terms and os.path.exists(sys.argv[1])) and len(terms) < 2:\n"
    "    time.sleep(0.05)\n"
    "sys.exit(0)\n"
)


def test_a_gang_worker_ending_after_a_withdrawal_takes_the_gang_with_it(
    make_daemon: Make, tmp_path: Path
) -> None:
    """Worker 0 ends on its first SIGTERM once saved; worker 1 on a second one: the gang
    never runs in part, it is queued again whole, as preempted."""
    gate = tmp_path / "saved"
    h = make_daemon(WORKSPACES, gpus=2, grace=30)
    victim = spec("victim", [PY, "-c", GANG_MEMBER, str(gate)], gpus=1, priority=-10,
                  workspace="nlp", workers=2)  # fmt: skip
    preempt(h, victim, gpus=2, live=2)
    wait_for(lambda: all(w.state == "Stopping" for w in workers(h, "victim")))
    h.daemon.service.delete("urgent", h.root)
    wait_for(lambda: [w.state for w in workers(h, "victim")] == ["Running", "Running"])
    gate.touch()
    wait_for(lambda: h.run("victim").preemptions == 1, message="the gang queued again")
    assert [w.state for w in workers(h, "victim")][:2] == ["Cancelled", "Cancelled"]
    assert h.wait_state("victim", "Running").attempts == 2
    assert h.run("victim").restarts == 0
    assert not [e for e in h.events("victim") if e.startswith("Sent SIGKILL")]
