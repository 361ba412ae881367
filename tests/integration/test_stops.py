"""Every stop shows Stopping while its grace lasts, and each worker shows its own state."""

from __future__ import annotations

import json
from collections.abc import Callable

from runner.reasons import Viewer
from tests.support.harness import PY, Harness, sleeper, spec, wait_for
from tests.support.served import Served

Make = Callable[..., Harness]
Start = Callable[..., Served]

WORKSPACES = """
[workspaces.vision]
members = ["root"]
max_priority = 10

[workspaces.nlp]
members = ["root"]
max_priority = 10
"""

# Keeps running on SIGTERM, so the stop lasts its whole grace.
TRAPS_TERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: print('SIGTERM', flush=True))\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.1)\n"
)


def test_a_time_limit_stop_is_stopping_then_failed(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=1, grace=2)
    h.submit(spec("job", [PY, "-c", TRAPS_TERM], limit=1, workspace="nlp"))
    h.wait_state("job", "Stopping")
    assert h.reason("job") == "Time limit reached: stopping"
    h.wait_state("job", "Failed")
    assert h.reason("job") == "Time limit reached"
    assert h.events("job")[-1] == "Time limit reached: stopped"


def test_a_delete_is_stopping_then_cancelled(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=1, grace=2)
    h.submit(spec("job", [PY, "-c", TRAPS_TERM], workspace="nlp"))
    h.wait_state("job", "Running")
    wait_for(lambda: "ready" in h.log("job"), message="the job ready")
    h.daemon.service.delete("job", h.root)
    h.wait_state("job", "Stopping")
    assert h.reason("job") == "Deleted: stopping"
    h.wait_state("job", "Cancelled")
    assert h.events("job")[-1] == "Deleted: stopped and cancelled"


def test_the_preempted_attempt_is_cancelled(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=1, grace=2)
    h.submit(spec("victim", sleeper(), gpus=1, priority=-10, workspace="nlp"))
    h.wait_state("victim", "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision"))
    wait_for(lambda: h.run("victim").preemptions == 1, message="the victim queued again")
    first = [w for w in h.daemon.store.workers.of("victim") if w.attempt == 1]
    assert [(w.state, w.stop_reason) for w in first] == [("Cancelled", "preempt")]


def test_one_of_two_independent_workers_preempted(make_daemon: Make) -> None:
    h = make_daemon(WORKSPACES, gpus=2, grace=2)
    victim = spec("victim", [PY, "-c", TRAPS_TERM], gpus=1, priority=-10, workspace="nlp",
                  workers=2, gang=False)  # fmt: skip
    h.submit(victim)
    h.wait_state("victim", "Running")
    wait_for(lambda: h.log("victim").count("ready") == 2, message="both workers ready")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision"))
    wait_for(
        lambda: any(w.state == "Stopping" for w in h.daemon.store.workers.of("victim")),
        message="the preemption",
    )
    run = h.run("victim")
    assert run.state == "Running"
    assert run.reason is not None
    assert run.reason.render() == "1 of 2 workers stopping (preempted by urgent)"
    assert run.reason.render(Viewer(frozenset({"nlp"}))) == (
        "1 of 2 workers stopping (preempted by a job in another namespace)"
    )
    states = sorted(w.state for w in h.daemon.store.workers.of("victim"))
    assert states == ["Running", "Stopping"]


def test_a_run_whose_preempted_worker_waits_is_never_marked_the_head(served: Start) -> None:
    """One of victim's two independent workers was preempted and waits for its GPU:
    the planner counts it first for that GPU, but the run runs, and `astra ls` marks
    no running run as the queue's head."""
    d = served(WORKSPACES, gpus=2, grace=1)
    victim = spec("victim", [PY, "-c", "import time; time.sleep(600)"], gpus=1, priority=-10,
                  workspace="nlp", workers=2, gang=False)  # fmt: skip
    assert d.astra("submit", "-", input=json.dumps(victim)).returncode == 0
    wait_for(lambda: d.json("show", "victim")["workers_live"] == 2, 20, "both workers")
    urgent = spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision")
    assert d.astra("submit", "-", input=json.dumps(urgent)).returncode == 0
    wait_for(lambda: d.json("show", "urgent")["state"] == "Running", 30, "urgent to run")
    wait_for(lambda: d.json("show", "victim")["workers_live"] == 1, 20, "the preemption")
    listed = {r["name"]: r for r in d.json("ls")}
    assert listed["victim"]["state"] == "Running"
    assert listed["victim"]["head"] is False
    assert d.json("show", "victim")["head"] is False
