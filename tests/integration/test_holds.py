"""Hold, release, begin times and requeue, through `astra serve` and the `astra` CLI.

Who may hold, release and requeue is asked by two real Unix users (see
test_identity.py for how a request comes from another uid).
"""

from __future__ import annotations

import json
import pwd
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, spec, two_tenants, users_fixture

Start = Callable[..., Served]
GROUP, ANN, BEN = "astra-h", "astra-hold-ann", "astra-hold-ben"
TRAPS_TERM = "trap 'exit 0' TERM; while true; do sleep 0.1; done"


def _run(d: Served, name: str, *options: str, argv: tuple[str, ...] = ("sleep", "60")) -> None:
    done = d.astra("run", "--name", name, *options, "--", *argv)
    assert done.returncode == 0, done.stderr


def _state(d: Served, name: str) -> str:
    state: str = d.json("show", name)["state"]
    return state


def _events(d: Served, name: str) -> list[dict[str, Any]]:
    out = d.astra("events", name, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture
def d(served: Start) -> Served:
    return served(gpus=2)


def test_a_held_head_lets_the_next_run_start_and_release_returns_it_to_its_place(
    d: Served,
) -> None:
    _run(d, "busy", "--gpus", "1")
    wait_for(lambda: _state(d, "busy") == "Running", 20, "busy running")
    _run(d, "big", "--gpus", "2")
    _run(d, "small", "--gpus", "1")
    wait_for(lambda: d.json("show", "big")["reason_code"] == "HEAD_WAITS", 20, "big is the head")
    assert _state(d, "small") == "Queued"  # the free GPU is held for the head
    submitted = d.json("show", "big")["submitted_at"]

    out = d.astra("hold", "big")
    assert (out.returncode, out.stdout) == (0, "big: held\n"), out.stderr
    wait_for(lambda: _state(d, "small") == "Running", 20, "small starts once big is held")
    big = d.json("show", "big")
    assert (big["held"], big["reason"], big["reason_code"]) == (True, "Held by root", "HELD")
    assert big["position"] is None and big["head"] is False  # out of the order
    assert d.astra("hold", "big").stdout == "big: already held\n"
    why = d.json("why", "big")
    assert why["reason"] == "Held by root" and why["chain"][0].startswith("Out of the queue's")

    assert d.astra("delete", "busy").returncode == 0
    _run(d, "later", "--gpus", "2")
    out = d.astra("release", "big")
    assert (out.returncode, out.stdout) == (0, "big: released\n"), out.stderr
    wait_for(lambda: d.json("show", "big")["head"], 20, "big is the head again")
    big, later = d.json("show", "big"), d.json("show", "later")
    assert big["held"] is False and big["submitted_at"] == submitted
    assert big["position"] < later["position"]  # back in its place: before a later run
    assert d.astra("release", "big").stdout == "big: not held\n"
    kinds = [(e["kind"], e["code"]) for e in _events(d, "big")]
    assert ("Held", "HELD") in kinds and ("Released", "RELEASED") in kinds


def test_hold_refuses_a_started_or_finished_run_and_names_what_it_cannot_find(d: Served) -> None:
    _run(d, "quick", argv=("true",))
    assert d.astra("wait", "quick").returncode == 0
    _run(d, "busy", "--gpus", "1")
    wait_for(lambda: _state(d, "busy") == "Running", 20, "busy running")
    out = d.astra("hold", "busy", "nope", "quick")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "409 WRONG_STATE: run busy is Running: only a queued run can be held (it has started)",
        "404 NOT_FOUND: no run nope",
        "409 WRONG_STATE: run quick is Succeeded: only a queued run can be held (it has finished)",
    ]
    assert d.json("show", "busy")["held"] is False


def test_release_refuses_a_started_or_finished_run_as_hold_does(d: Served) -> None:
    _run(d, "quick", argv=("true",))
    assert d.astra("wait", "quick").returncode == 0
    _run(d, "dropped", "--hold")
    assert d.astra("delete", "dropped").returncode == 0
    wait_for(lambda: _state(d, "dropped") == "Cancelled", 20, "dropped cancelled")
    _run(d, "busy", "--gpus", "1")
    wait_for(lambda: _state(d, "busy") == "Running", 20, "busy running")
    _run(d, "waiting", "--gpus", "2")
    events = {name: len(_events(d, name)) for name in ("quick", "dropped", "busy")}

    out = d.astra("release", "quick", "busy", "dropped", "waiting")
    assert (out.returncode, out.stdout) == (1, "waiting: not held\n")  # harmless, as in Slurm
    only = "only a held run can be released"
    assert out.stderr.splitlines() == [
        f"409 WRONG_STATE: run quick is Succeeded: {only} (it has finished)",
        f"409 WRONG_STATE: run busy is Running: {only} (it has started)",
        f"409 WRONG_STATE: run dropped is Cancelled: {only} (it has finished)",
    ]
    out = d.astra("hold", "dropped")  # held when it was cancelled: not 'already held'
    assert (out.returncode, out.stderr) == (
        1,
        "409 WRONG_STATE: run dropped is Cancelled: only a queued run can be held"
        " (it has finished)\n",
    )
    # a finished run keeps its priority too (a running one may still change it)
    out = d.astra("priority", "quick", "-5")
    assert (out.returncode, out.stderr) == (
        1,
        "409 WRONG_STATE: run quick is Succeeded: a finished run keeps its priority\n",
    )
    assert {name: len(_events(d, name)) for name in events} == events  # nothing changed
    assert [d.json("show", n)["held"] for n in ("quick", "busy", "waiting")] == [False] * 3
    assert d.json("show", "quick")["priority"] == 0
    assert d.astra("priority", "busy", "-5").returncode == 0


def test_run_hold_submits_it_held_and_the_state_survives_a_restart(d: Served) -> None:
    _run(d, "parked", "--hold", "--begin", "2036-12-02T03:00")
    run = d.json("show", "parked")
    assert (run["held"], run["reason"], run["begin_at"]) == (
        True,
        "Held by root",
        "2036-12-02T03:00:00Z",
    )
    assert run["spec"]["spec"]["begin_at"] == "2036-12-02T03:00:00Z"
    d.stop()
    d.restart()
    time.sleep(1)  # a plan or two
    run = d.json("show", "parked")
    assert (run["state"], run["held"], run["reason"]) == ("Queued", True, "Held by root")
    assert d.astra("release", "parked").returncode == 0
    wait = "Waits until 2036-12-02 03:00 UTC (its begin time)"
    wait_for(lambda: d.json("show", "parked")["reason"] == wait, 20, "the begin time's reason")
    assert d.json("show", "parked")["reason_code"] == "BEGIN_WAIT"
    d.stop()
    d.restart()
    wait_for(lambda: d.json("show", "parked")["reason"] == wait, 20, "still after a restart")


def test_a_begin_time_keeps_a_run_out_of_the_order_until_it_passes(d: Served) -> None:
    _run(d, "soon", "--begin", "+8s", argv=("true",))  # past the checks below, loaded or not
    run = d.json("show", "soon")
    begin = datetime.fromisoformat(run["begin_at"].replace("Z", "+00:00"))
    shown = begin.strftime("%Y-%m-%d %H:%M" if begin.second == 0 else "%Y-%m-%d %H:%M:%S")
    assert run["reason"] == f"Waits until {shown} UTC (its begin time)"
    assert run["state"] == "Queued" and run["position"] is None
    time.sleep(1)
    assert _state(d, "soon") == "Queued"
    wait_for(lambda: _state(d, "soon") == "Succeeded", 30, "soon runs once its begin has passed")
    run = d.json("show", "soon")
    started = datetime.fromisoformat(run["started_at"].replace("Z", "+00:00"))
    assert started >= begin
    assert run["submitted_at"] < run["started_at"]


def test_sbatch_begin(d: Served, tmp_path: Path) -> None:
    script = tmp_path / "later.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=later\n#SBATCH --begin=now+1hour\ntrue\n")
    before = time.time()
    out = d.astra("submit", str(script))
    assert out.returncode == 0, out.stderr
    run = d.json("show", "later")
    begin = datetime.fromisoformat(run["begin_at"].replace("Z", "+00:00")).timestamp()
    assert before + 3600 - 2 <= begin <= time.time() + 3600 + 2
    assert run["reason_code"] == "BEGIN_WAIT" and run["state"] == "Queued"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=noon\n#SBATCH --begin=teatime\ntrue\n")
    out = d.astra("submit", str(script))
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("422 INVALID_SPEC: #SBATCH --begin: 'teatime' is not understood")


def test_requeue_stops_with_the_grace_and_queues_again_keeping_its_place_and_restarts(
    d: Served,
) -> None:
    _run(d, "job", "--gpus", "1", argv=("bash", "-c", TRAPS_TERM))
    wait_for(lambda: _state(d, "job") == "Running", 20, "job running")
    first = d.json("show", "job")
    out = d.astra("requeue", "job")
    assert (out.returncode, out.stdout) == (0, "job: requeuing\n"), out.stderr
    stopping = d.json("show", "job")
    assert (stopping["state"], stopping["reason_code"]) == ("Stopping", "REQUEUING")
    assert stopping["reason"] == "Requeued: stopping"  # who asked: in its events

    def attempts() -> int:
        return len({w["attempt"] for w in d.json("show", "job")["workers_history"]})

    wait_for(lambda: attempts() == 2 and _state(d, "job") == "Running", 30, "job running again")
    again = d.json("show", "job")
    assert again["submitted_at"] == first["submitted_at"]
    assert (again["restarts"], again["preemptions"]) == (0, 0)  # no restart spent
    ended = [w for w in again["workers_history"] if w["attempt"] == 1]
    assert [(w["state"], w["stop_reason"]) for w in ended] == [("Cancelled", "requeue")]
    codes = [e["code"] for e in _events(d, "job")]
    assert "REQUEUING" in codes and "REQUEUED" in codes

    _run(d, "waiting", "--gpus", "2")
    assert d.astra("requeue", "waiting").stdout == "waiting: already queued\n"
    _run(d, "quick", argv=("true",))
    assert d.astra("wait", "quick").returncode == 0
    out = d.astra("requeue", "quick")
    assert (out.returncode, out.stderr) == (
        1,
        "409 WRONG_STATE: run quick is Succeeded: only a running run can be requeued"
        " (submit it again to run it once more)\n",
    )


# ------------------------------------------------------------------ who may

CONFIG = two_tenants(GROUP, ANN, BEN)


users = users_fixture(GROUP, ANN, BEN)


def test_members_hold_their_workspaces_runs_and_others_read_only_held(
    served: Start, users: dict[str, pwd.struct_passwd]
) -> None:
    d = served(CONFIG, gpus=1)
    ann, ben = users[ANN], users[BEN]
    assert "ok" in as_user(ann, d.socket, lambda c: c.submit(spec("ann-run", "vision")))
    assert "ok" in as_user(ann, d.socket, lambda c: c.submit(spec("ann-next", "vision")))
    wait_for(lambda: _state(d, "ann-run") == "Running", 20, "ann's run running")

    refused = as_user(ben, d.socket, lambda c: c.control("ann-next", "hold"))
    assert refused == {
        "error": "403 FORBIDDEN: run ann-next belongs to a namespace you are not a member of"
    }
    for action in ("release", "requeue"):
        refused = as_user(ben, d.socket, lambda c, a=action: c.control("ann-run", a))
        assert refused["error"].startswith("403 FORBIDDEN: "), refused
    assert _state(d, "ann-run") == "Running" and not d.json("show", "ann-next")["held"]
    assert as_user(ben, d.socket, lambda c: c.control("nope", "hold")) == {
        "error": "404 NOT_FOUND: no run nope"
    }

    held = as_user(ann, d.socket, lambda c: c.control("ann-next", "hold"))
    assert held == {"ok": {"name": "ann-next", "outcome": "held"}}
    mine = as_user(ann, d.socket, lambda c: c.show("ann-next"))["ok"]
    assert (mine["reason"], mine["held"]) == (f"Held by {ANN}", True)
    listed = as_user(ben, d.socket, lambda c: c.runs())["ok"]
    seen = [r for r in listed if r["state"] == "Queued"]
    assert [(r["name"], r["reason"], r["held"]) for r in seen] == [
        ("a job in another namespace", "Held", True)
    ]
    assert ANN not in json.dumps(listed)

    # an admin (root) may act anywhere; a member in its workspace
    assert d.astra("release", "ann-next").stdout == "ann-next: released\n"
    by_ann = as_user(ann, d.socket, lambda c: c.control("ann-run", "requeue"))
    assert by_ann == {"ok": {"name": "ann-run", "outcome": "requeuing"}}
    messages = [e["message"] for e in _events(d, "ann-run")]
    assert f"Requeued by {ANN}: stopping" in messages


def test_a_requeue_asked_before_a_crash_is_carried_out_after_it(d: Served) -> None:
    _run(d, "stubborn", argv=("bash", "-c", "trap '' TERM; while true; do sleep 0.1; done"))
    wait_for(lambda: _state(d, "stubborn") == "Running", 20, "stubborn running")
    submitted = d.json("show", "stubborn")["submitted_at"]
    assert d.astra("requeue", "stubborn").returncode == 0
    d.kill9()  # in its grace: the worker ignores SIGTERM and goes on
    d.restart()

    def attempts() -> int:
        return len({w["attempt"] for w in d.json("show", "stubborn")["workers_history"]})

    wait_for(lambda: attempts() == 2, 30, "a second attempt after the SIGKILL")
    run = d.json("show", "stubborn")
    first = [w for w in run["workers_history"] if w["attempt"] == 1]
    assert [(w["stop_reason"], w["killed"]) for w in first] == [("requeue", True)]
    assert (run["submitted_at"], run["restarts"]) == (submitted, 0)
