"""`astra` against a daemon that is a front for the real Slurm, and the same scenes on the
built-in planner: where they agree, and where Slurm's semantics differ (each asserted).

- Backfill: both start a short run whose limit ends before the head's start; a run
  that fits in GPUs the head will not need starts at once on the built-in planner
  and waits on Slurm, which holds the whole node for its top job.
- Preemption: both stop the low-priority run for the high one and queue it again;
  Slurm counts that requeue as a restart, the built-in daemon as a preemption.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.slurm import SlurmClient
from tests.integration.conftest import served  # noqa: F401 (the fixture)
from tests.slurm.helpers import job_named, require_slurm, unique
from tests.support.harness import PY, sleeper, wait_for
from tests.support.served import Served

require_slurm()

WORKSPACE = """
[workspaces.vision]
members = ["root"]
max_priority = 100
"""


def front_config(log_dir: Path) -> str:
    return (
        WORKSPACE
        + f"""
[slurm]
privileged = true
partition = "low"
priority_partitions = {{ high = 100 }}
log_dir = "{log_dir}"
workdir = "{log_dir}"
"""
    )


@pytest.fixture
def front(served: Callable[..., Served], log_dir: Path, client: SlurmClient) -> Served:  # noqa: F811
    return served(front_config(log_dir), gpus=8, grace=5, executor="slurm")


@pytest.fixture
def builtin(tmp_path: Path) -> Any:
    """A second, built-in daemon (process executor, 8 simulated GPUs) for comparison."""
    sock = tmp_path / "builtin.sock"
    daemon = Served(tmp_path / "builtin-home", sock).start(WORKSPACE, gpus=8, grace=1)
    yield daemon
    daemon.stop()


def run(d: Served, name: str, gpus: int, limit: str | None, *command: str, prio: int = 0) -> None:
    extra = ["--time-limit", limit] if limit else []
    done = d.astra("run", "--name", name, "--workspace", "vision", "--gpus", str(gpus),
                   "--priority", str(prio), *extra, "--", *command)  # fmt: skip
    assert done.returncode == 0, done.stderr


def show(d: Served, name: str) -> dict[str, Any]:
    result: dict[str, Any] = d.json("show", name)
    return result


def test_a_run_goes_through_slurm_and_comes_back(front: Served, client: SlurmClient) -> None:
    name = unique("hello")
    run(front, name, 1, "2m", "sh", "-c", "echo hello $ASTRAEUS_RUN_NAME")
    job = wait_for(lambda: job_named(client, name), 20, "the job in squeue")
    wait_for(lambda: show(front, name)["state"] == "Succeeded", 60, "Succeeded")
    assert front.astra("logs", name).stdout.strip() == f"hello {name}"
    events = [e["message"] for e in show(front, name)["events"]]
    assert f"Submitted to Slurm as job {job.job_id}" in events
    status = json.loads(front.astra("ls", "--json").stdout or "[]")
    assert status == [] or all(r["name"] != name for r in status)

    capped = unique("capped")
    refused = front.astra("run", "--name", capped, "--workspace", "vision", "--priority", "101",
                          "--", "true")  # fmt: skip
    assert refused.stderr.strip() == (
        "403 PRIORITY_NOT_ALLOWED: priority 101 is above namespace vision's maximum of 100"
    )
    assert job_named(client, capped) is None  # refused before Slurm saw anything
    loose = unique("loose")
    document = {"metadata": {"name": loose, "workspace": "vision"},
                "spec": {"workers": 2, "gang": False,
                         "task_template": {"image": "local", "command": "true"}}}  # fmt: skip
    refused = front.astra("submit", "-", input=json.dumps(document))
    assert refused.returncode == 1
    assert refused.stderr.startswith("422 INVALID_SPEC: Slurm cannot run it: ")
    assert front.astra("show", loose).returncode == 1  # nothing written


def test_delete_and_priority_reach_slurm(front: Served, client: SlurmClient) -> None:
    blocker, waiting = unique("blocker"), unique("waiting")
    run(front, blocker, 8, "5m", *sleeper())
    wait_for(lambda: show(front, blocker)["state"] == "Running", 30, "the blocker runs")
    run(front, waiting, 8, "1m", "true")
    wait_for(lambda: (j := job_named(client, waiting)) and j.pending, 20, "pending in Slurm")
    assert front.astra("priority", waiting, "7").returncode == 0
    wait_for(lambda: job_named(client, waiting).nice == -7, 20, "nice -7 in Slurm")  # type: ignore[union-attr]
    assert front.astra("delete", waiting).returncode == 0
    assert front.astra("delete", waiting).stdout.strip() == f"{waiting}: stopping"  # twice
    wait_for(lambda: job_named(client, waiting).state == "CANCELLED", 20, "scancel")  # type: ignore[union-attr]
    wait_for(lambda: show(front, waiting)["state"] == "Cancelled", 20, "cancelled")
    assert front.astra("delete", blocker).returncode == 0
    wait_for(lambda: show(front, blocker)["state"] == "Cancelled", 30, "the blocker cancelled")


def test_backfill_agrees_on_short_runs_and_differs_on_room_the_head_leaves(
    front: Served, builtin: Served
) -> None:
    names = {k: unique(k) for k in ("blocker", "head", "short", "long")}
    for d in (front, builtin):
        run(d, names["blocker"], 4, "3m", *sleeper())
        wait_for(lambda d=d: show(d, names["blocker"])["state"] == "Running", 30, "blocker")  # type: ignore[misc]
        run(d, names["head"], 6, "2m", *sleeper())
        run(d, names["short"], 2, "1m", *sleeper())
        run(d, names["long"], 2, "10m", *sleeper())
    for d in (front, builtin):  # both: the short run backfills, the head waits for the blocker
        wait_for(lambda d=d: show(d, names["short"])["state"] == "Running", 60, "backfill")  # type: ignore[misc]
        head = wait_for(lambda d=d: (h := show(d, names["head"]))["head"] and h, 60, "the head")  # type: ignore[misc]
        assert head["reason"].startswith("Next to run (priority 0): starts by ")
        assert head["starts_by"] is not None
    # the difference: the built-in planner gives the long run the 2 GPUs the head leaves
    wait_for(lambda: show(builtin, names["long"])["state"] == "Running", 30, "built-in")
    behind = f"Queued behind {names['head']}, which starts by "
    # the front reads Slurm's estimate each tick; one read may come before Slurm set it
    long = wait_for(
        lambda: (r := show(front, names["long"]))["reason"].startswith(behind) and r, 30, "estimate"
    )
    assert long["state"] == "Queued"


def test_preemption_requeues_and_slurm_counts_a_restart(
    front: Served, builtin: Served, client: SlurmClient
) -> None:
    victim, urgent = unique("victim"), unique("urgent")
    program = [PY, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM,"
               " lambda *a: sys.exit(0)); time.sleep(600)"]  # fmt: skip
    for d in (front, builtin):
        run(d, victim, 8, "10m", *program)
        wait_for(lambda d=d: show(d, victim)["state"] == "Running", 30, "the victim")  # type: ignore[misc]
        run(d, urgent, 8, "10m", *sleeper(), prio=100)
    # the front shows Slurm's grace as the preemption panel shows the built-in one
    stopping = wait_for(lambda: (v := show(front, victim))["state"] == "Stopping" and v, 60,
                        "the victim in Slurm's grace")  # fmt: skip
    assert stopping["reason"].startswith("Preempted by higher-priority work (Slurm: job ")
    assert stopping["stop_deadline"] is not None
    for d in (front, builtin):
        wait_for(lambda d=d: show(d, urgent)["state"] == "Running", 90, "the urgent run")  # type: ignore[misc]
        wait_for(lambda d=d: show(d, victim)["state"] == "Queued", 30, "the victim queued")  # type: ignore[misc]
    slurm_victim, own_victim = show(front, victim), show(builtin, victim)
    assert own_victim["preemptions"] == 1 and own_victim["restarts"] == 0
    assert slurm_victim["restarts"] >= 1  # Slurm's count: a preemption requeue is a restart
    assert slurm_victim["preemptions"] == 1  # seen in its grace, so counted as one too
    assert job_named(client, urgent).partition == "high"  # type: ignore[union-attr]


def test_a_priority_that_reaches_the_high_tier_moves_a_pending_job_there(
    front: Served, client: SlurmClient
) -> None:
    blocker, mover = unique("blocker"), unique("mover")
    run(front, blocker, 8, "10m", *sleeper())
    wait_for(lambda: show(front, blocker)["state"] == "Running", 30, "the blocker runs")
    run(front, mover, 8, "2m", *sleeper())
    wait_for(lambda: (j := job_named(client, mover)) and j.pending, 20, "pending in low")
    assert job_named(client, mover).partition == "low"  # type: ignore[union-attr]
    assert front.astra("priority", mover, "100").returncode == 0
    wait_for(lambda: job_named(client, mover).partition == "high", 20, "moved to high")  # type: ignore[union-attr]
    wait_for(lambda: show(front, mover)["state"] == "Running", 90, "it preempts its way in")
    assert show(front, blocker)["state"] in ("Stopping", "Queued")
