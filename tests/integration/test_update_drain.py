"""`astra update` and `astra admin drain/resume` through a real daemon, two real users.

Who may: a member edits its own workspace's waiting runs (checked as a submit is, and
nothing changes on a refusal), may only shorten a running run's time limit (an admin may
lengthen it), and may not drain. A drain starts nothing new while running work
finishes, keeps drained GPUs free, outlives a restart, and resume starts the queue again.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from astraeus_tui.client import ApiError, Client
from tests.support.harness import spec as run_spec
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating two Unix users needs root")
GROUP, ALICE, BOB = "astra-tf", "astra-fa", "astra-fb"

CONFIG = two_tenants(GROUP, ALICE, BOB, vision="max_priority = 10", nlp="quota = { gpus = 1 }")


users = users_fixture(GROUP, ALICE, BOB)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(CONFIG, gpus=4)


def sleeper(name: str, workspace: str, seconds: int = 120, **kw: Any) -> dict[str, Any]:
    return run_spec(name, ["sleep", str(seconds)], workspace=workspace, **kw)


def state(d: Served, name: str) -> str:
    return str(d.json("show", name)["state"])


def frozen(d: Served, name: str) -> tuple[Any, ...]:
    """What an edit would change: the spec, the asks, the priority, the events."""
    run = d.json("show", name)
    events = [(e["kind"], e["code"]) for e in run["events"]]
    asks = (run["gpus_requested"], run["cpu_cores_requested"], run["memory_requested"])
    return run["spec"], asks, run["priority"], run["time_limit_seconds"], events


def test_refused_edits_change_nothing_and_an_edit_moves_the_plan(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(sleeper("b", "nlp", gpus=1)))
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(sleeper("hog", "vision", gpus=2)))
    wait_for(lambda: state(lab, "hog") == "Running", message="hog running")
    wait_for(lambda: state(lab, "b") == "Running", message="b running")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(sleeper("w", "vision", gpus=2)))
    before = frozen(lab, "w")
    refusals = [
        (alice, {"priority": 11}, "403 PRIORITY_NOT_ALLOWED: priority 11 is above namespace"
         " vision's maximum of 10"),
        (alice, {"gpus": 5}, "422 INVALID_SPEC: gpus: asks for 5, the machine has 4 in all"),
        (alice, {"gpus": -1}, "422 INVALID_SPEC: spec.task_template.requested_resources."
         "gpu_requests.count:"),
        (alice, {"memory": "lots"}, "422 INVALID_SPEC: spec.task_template.requested_resources."
         "memory_bytes:"),
        (alice, {"time_limit_seconds": 0}, "422 INVALID_SPEC: spec.task_template."
         "time_limit_seconds:"),
        (alice, {"gpus": None}, "422 INVALID_SPEC: gpus: must not be null"),
        (alice, {"colour": "red"}, "422 INVALID_SPEC: expected some of"),
        (bob, {"gpus": 1}, "403 FORBIDDEN: run w belongs to a namespace you are not a member"),
    ]  # fmt: skip
    for who, change, error in refusals:
        answer = as_user(who, lab.socket, lambda c, ch=change: c.update("w", ch))  # type: ignore[misc]
        assert answer.get("error", "").startswith(error), (change, answer)
        assert frozen(lab, "w") == before, change
    b_before = frozen(lab, "b")
    answer = as_user(bob, lab.socket, lambda c: c.update("b", {"gpus": 2}))
    assert answer["error"] == (
        "409 NOT_EDITABLE: run b is Running: only its time limit may change while it runs"
        " (not gpus)"
    )
    assert frozen(lab, "b") == b_before
    assert state(lab, "w") == "Queued"
    # fewer GPUs: it fits beside hog now, and starts in the next plan
    answer = as_user(alice, lab.socket, lambda c: c.update("w", {"gpus": 1, "priority": 5}))
    assert answer["ok"]["gpus_requested"] == 1 and answer["ok"]["priority"] == 5
    wait_for(lambda: state(lab, "w") == "Running", message="w started after its edit")
    shown = lab.json("show", "w")
    updated = [e for e in shown["events"] if e["code"] == "UPDATED"]
    assert [e["message"] for e in updated] == [f"Changed by {ALICE}: GPUs 2 -> 1, priority 0 -> 5"]
    assert len(shown["workers_history"][0]["gpus"]) == 1
    # bob reads no event of vision's runs, nor their names
    seen = as_user(bob, lab.socket, lambda c: [e.run for e in c.events()])["ok"]
    assert "w" not in seen and "hog" not in seen


def test_the_quota_refuses_an_edit_the_namespace_could_never_run(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    bob = users[BOB]
    lab.astra("admin", "drain", "--reason", "hold the queue")
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(sleeper("q", "nlp", gpus=1)))
    before = frozen(lab, "q")
    answer = as_user(bob, lab.socket, lambda c: c.update("q", {"gpus": 2}))
    assert answer["error"] == (
        "422 INVALID_SPEC: gpus: asks for 2, more than namespace nlp's quota of 1 allows"
    )
    assert frozen(lab, "q") == before
    out = lab.astra("update", "q", "--time-limit", "90m", "--cpus", "2", "--memory", "1GiB")
    assert out.returncode == 0, out.stderr
    shown = lab.json("show", "q")
    assert shown["time_limit_seconds"] == 5400 and shown["cpu_cores_requested"] == 2
    assert shown["memory_requested"] == 1 << 30


def test_a_running_run_s_time_limit_members_shorten_admins_lengthen(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice = users[ALICE]
    run = sleeper("r", "vision", limit=600)
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(run))
    wait_for(lambda: state(lab, "r") == "Running", message="r running")
    before = frozen(lab, "r")
    for change in ({"time_limit_seconds": 1200}, {"time_limit_seconds": None}):
        answer = as_user(alice, lab.socket, lambda c, ch=change: c.update("r", ch))  # type: ignore[misc]
        assert answer["error"] == (
            "403 FORBIDDEN: only an admin may lengthen the time limit of run r, which is"
            " running: a member may shorten it"
        )
        assert frozen(lab, "r") == before
    answer = as_user(alice, lab.socket, lambda c: c.update("r", {"time_limit_seconds": 300}))
    assert answer["ok"]["time_limit_seconds"] == 300
    out = lab.astra("update", "r", "--time-limit", "15m")  # root is an admin
    assert out.returncode == 0, out.stderr
    assert lab.json("show", "r")["time_limit_seconds"] == 900
    assert state(lab, "r") == "Running"
    # shortened below what it has run: the limit, counted from its start, stops it now
    answer = as_user(alice, lab.socket, lambda c: c.update("r", {"time_limit_seconds": 1}))
    assert "ok" in answer
    wait_for(lambda: state(lab, "r") not in ("Running", "Stopping"), 30, "r stopped")
    codes = [e["code"] for e in lab.json("show", "r")["events"]]
    assert "TIME_LIMIT" in codes and codes.count("UPDATED") == 3


def test_drain_starts_nothing_new_running_work_finishes_and_it_outlives_a_restart(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice = users[ALICE]
    root = Client(lab.socket, timeout=30)
    answer = as_user(alice, lab.socket, lambda c: c.drain("mine now"))
    assert answer["error"] == "403 FORBIDDEN: only admins may drain the machine"
    assert as_user(alice, lab.socket, lambda c: c.resume())["error"] == (
        "403 FORBIDDEN: only admins may resume the machine"
    )
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(sleeper("short", "vision", 3)))
    wait_for(lambda: state(lab, "short") == "Running", message="short running")
    out = lab.astra("admin", "drain", "--reason", "kernel upgrade")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Machine draining (kernel upgrade): drained by root at ")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(sleeper("next", "vision", 5)))
    waits = "Waits: the machine is draining (kernel upgrade)"
    wait_for(lambda: lab.json("show", "next")["reason"] == waits, message="the drain's reason")
    assert lab.json("show", "next")["reason_code"] == "DRAINING"
    assert root.why("next")["reason"] == waits
    would = root.preview(sleeper("maybe", "vision", 5))
    assert would["starts_now"] is False and would["reason"] == waits
    wait_for(lambda: state(lab, "short") == "Succeeded", 30, "running work finishes")
    assert state(lab, "next") == "Queued"
    status = as_user(alice, lab.socket, lambda c: c.status())["ok"]
    assert status["drain"]["machine"]["reason"] == "kernel upgrade"
    assert status["drain"]["machine"]["by"] == "root"
    lab.stop()
    lab.restart()
    root = Client(lab.socket, timeout=30)
    assert root.status()["drain"]["machine"]["reason"] == "kernel upgrade"
    wait_for(lambda: lab.json("show", "next")["reason"] == waits, message="still draining")
    assert state(lab, "next") == "Queued"
    codes = [e.code for e in root.events()]
    assert "DRAINED" in codes
    assert as_user(alice, lab.socket, lambda c: [e.code for e in c.events()
                                                 if e.code == "DRAINED"])["ok"] == []  # fmt: skip
    out = lab.astra("admin", "resume")
    assert out.returncode == 0 and out.stdout.strip() == "Not draining", out
    wait_for(lambda: state(lab, "next") in ("Running", "Succeeded"), message="resumed")
    assert [e.code for e in root.events()].count("UNDRAINED") == 1


def test_drained_gpus_stay_free_while_their_work_finishes(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd], tmp_path: Path
) -> None:
    lab = served(CONFIG, gpus=2)
    root = Client(lab.socket, timeout=30)
    root.submit(sleeper("a", "vision", 120, gpus=1))
    wait_for(lambda: state(lab, "a") == "Running", message="a running")
    gate = tmp_path / "b-may-end"  # b holds its GPU until the checks below are made
    wait_gate = ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"]
    root.submit(run_spec("b", wait_gate, workspace="vision", gpus=1))
    wait_for(lambda: state(lab, "b") == "Running", message="b running")
    on = lab.json("show", "b")["workers_history"][0]["gpus"]
    out = lab.astra("admin", "drain", "--gpus", str(on[0]), "--reason", "fan failing")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"GPU {on[0]} drained (fan failing) by root at ")
    with pytest.raises(ApiError) as refused:
        root.drain("typo", [7])
    assert str(refused.value) == "422 INVALID_SPEC: gpus: no GPU 7 on this machine (it has 0, 1)"
    gpus = {g["index"]: g for g in lab.json("gpus")["gpus"]}
    assert gpus[on[0]]["drained"] == "fan failing" and gpus[on[0]]["holder"]["run"] == "b"
    assert gpus[1 - on[0]]["drained"] is None
    assert "drained (fan failing)" in lab.astra("gpus").stdout
    gate.touch()
    root.submit(sleeper("both", "vision", 1, gpus=2))  # needs the drained GPU too
    root.submit(sleeper("c", "vision", 1, gpus=1))
    wait_for(lambda: state(lab, "b") == "Succeeded", 30, "b finishes on its drained GPU")
    wait_for(lambda: lab.json("show", "both")["reason_code"] == "DRAINING", message="reason")
    assert lab.json("show", "both")["reason"] == (
        f"Waits: the machine is draining (fan failing): GPU {on[0]} kept out of every plan"
    )
    assert state(lab, "c") == "Queued"  # the one GPU left is a's; the drained one stays free
    assert root.why("both")["reason"] == lab.json("show", "both")["reason"]
    would = root.preview(sleeper("pair", "vision", 1, gpus=2))
    assert would["starts_now"] is False and would["reason"].startswith("Waits: the machine is dr")
    assert lab.json("gpus")["gpus"][on[0]]["holder"] is None
    root.delete("both")  # else the head, which waits for a to end
    assert lab.astra("admin", "resume", "--gpus", str(on[0])).returncode == 0
    wait_for(lambda: state(lab, "c") in ("Running", "Succeeded"), message="c on the GPU again")
    assert lab.json("show", "c")["workers_history"][0]["gpus"] == on
