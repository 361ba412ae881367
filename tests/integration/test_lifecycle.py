"""Preemption, stop grace, checkpoints, restarts, time limits and delete, end to end."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import NO_BACKOFF, PY, TRAIN, Harness, sleeper, spec, wait_for

Make = Callable[..., Harness]

IGNORES_TERM = [
    PY,
    "-c",
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "while True: time.sleep(0.1)",
]


def test_preempts_the_most_recently_started_lower_priority_run(make_daemon: Make) -> None:
    h = make_daemon('[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n', gpus=2)
    h.submit(spec("older", sleeper(), gpus=1, priority=-10))
    h.wait_state("older", "Running")
    h.submit(spec("newer", sleeper(), gpus=1, priority=-10))
    h.wait_state("newer", "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10))
    h.wait_state("urgent", "Running")
    newer = h.wait_state("newer", "Queued")
    assert h.state("older") == "Running"
    assert newer.preemptions == 1 and newer.restarts == 0
    assert h.reason("newer").startswith(
        "Preempted by higher-priority work (urgent); waiting to run again."
    )
    events = h.events("newer")
    assert "Preempted by urgent; queued again" in events
    assert any(e.startswith("Preempted by higher-priority work (urgent)") for e in events)
    assert any(
        e.startswith("Preempting 1 lower-priority worker(s) of newer") for e in h.events("urgent")
    )


def test_sigkill_when_the_program_ignores_sigterm(make_daemon: Make) -> None:
    h = make_daemon(gpus=1, grace=1)
    h.submit(spec("stubborn", IGNORES_TERM, gpus=1))
    h.wait_state("stubborn", "Running")
    wait_for(lambda: "ignoring SIGTERM" in h.log("stubborn"))
    h.daemon.service.delete("stubborn", h.root)
    h.wait_state("stubborn", "Cancelled")
    killed = [e for e in h.events("stubborn") if e.startswith("Sent SIGKILL")]
    assert killed == [
        f"Sent SIGKILL to worker 0: {Path(PY).name[:15]} did not exit within the 1 s stop "
        "grace after SIGTERM."
    ]  # the program itself was started: no word of exec


# a checkpoint that takes 2 s once SIGTERM comes, started by a shell that does not exec
CHECKPOINTS = (
    "import signal, sys, time\n"
    "def save(*_):\n"
    "    time.sleep(2)\n"
    "    print('saved', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, save)\n"
    "print('training', flush=True)\n"
    "while True: time.sleep(0.1)"
)


def test_a_shell_that_does_not_exec_leaves_its_program_the_grace(make_daemon: Make) -> None:
    """bash dies of the SIGTERM at once; its program still has the whole grace to save
    (it was SIGKILLed as its shell ended)."""
    h = make_daemon(gpus=1, grace=10)
    script = f"{shlex.quote(PY)} -c {shlex.quote(CHECKPOINTS)}; echo after"
    h.submit(spec("shelled", ["bash", "-c", script], gpus=1))
    h.wait_state("shelled", "Running")
    wait_for(lambda: "training" in h.log("shelled"))
    h.daemon.service.delete("shelled", h.root)
    h.wait_state("shelled", "Cancelled", timeout=20)
    assert "saved" in h.log("shelled")
    assert not [e for e in h.events("shelled") if e.startswith("Sent SIGKILL")]


def test_sigkill_names_what_a_shell_left_running_and_says_exec(make_daemon: Make) -> None:
    h = make_daemon(gpus=1, grace=1)
    script = f"{shlex.quote(PY)} -c {shlex.quote(IGNORES_TERM[2])}; echo after"
    h.submit(spec("shelled", ["bash", "-c", script], gpus=1))
    h.wait_state("shelled", "Running")
    wait_for(lambda: "ignoring SIGTERM" in h.log("shelled"))
    h.daemon.service.delete("shelled", h.root)
    h.wait_state("shelled", "Cancelled")
    killed = [e for e in h.events("shelled") if e.startswith("Sent SIGKILL")]
    assert killed == [
        f"Sent SIGKILL to worker 0: {Path(PY).name[:15]} did not exit within the 1 s stop "
        "grace after SIGTERM. Its command is a shell (bash): start the program with exec so "
        "SIGTERM reaches it."
    ]


def test_requeue_resumes_from_the_checkpoint_on_a_drive(make_daemon: Make, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    h = make_daemon(
        f'[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'
        f'[drives.checkpoints]\npath = "{drive}"\n',
        gpus=1,
    )
    train = [
        PY,
        str(TRAIN),
        "--steps",
        "100000",
        "--step-seconds",
        "0.05",
        "--save-every",
        "1000000",
    ]
    ckpt = {"name": "checkpoints", "mount_path": "/ckpt", "mode": "ReadWrite"}
    try:
        h.submit(spec("ft", train, gpus=1, priority=-100, drives=[ckpt]))
    except Exception as e:  # pragma: no cover - bwrap missing is a clear start failure
        pytest.fail(str(e))
    h.wait_state("ft", "Running")
    wait_for(lambda: "step 20" in h.log("ft"))
    h.submit(spec("urgent", [PY, "-c", "print('urgent done')"], gpus=1, priority=5))
    h.wait_state("urgent", "Succeeded")
    saved = json.loads((drive / "ft" / "latest.json").read_text())["step"]
    assert saved >= 20
    ft = h.wait_state("ft", "Running")
    assert ft.preemptions == 1 and ft.restarts == 0
    wait_for(lambda: f"resuming from step {saved + 1}" in h.log("ft"))


def test_restart_budget_then_failed(make_daemon: Make) -> None:
    h = make_daemon(gpus=1, machine=NO_BACKOFF)
    h.submit(spec("flaky", [PY, "-c", "import sys; sys.exit(3)"], gpus=1, restart_limit=2))
    run = h.wait_state("flaky", "Failed")
    assert run.restarts == 2
    assert run.exit_code == 3
    assert h.reason("flaky") == (
        "Failed: worker 0 exited with code 3; the restart budget (2) is spent; it exits at once:"
        " check its command, folder and environment"  # its 3 attempts each failed at once
    )
    assert (
        sum(
            e.startswith("Restarting (restart ") and e.endswith("worker 0 exited with code 3")
            for e in h.events("flaky")
        )
        == 2
    )


def test_time_limit_stops_the_run(make_daemon: Make) -> None:
    h = make_daemon(gpus=1, grace=1)
    h.submit(spec("slow", sleeper(), gpus=1, limit=1))
    run = h.wait_state("slow", "Failed", timeout=20)
    assert h.reason("slow") == "Time limit reached"
    assert run.restarts == 0


def test_delete_a_queued_and_a_running_run(make_daemon: Make) -> None:
    h = make_daemon(gpus=1)
    h.submit(spec("running", sleeper(), gpus=1))
    h.wait_state("running", "Running")
    h.submit(spec("waiting", sleeper(), gpus=1))
    assert h.daemon.service.delete("waiting", h.root) == "cancelled"
    assert h.state("waiting") == "Cancelled"
    assert h.daemon.service.delete("running", h.root) == "stopping"
    h.wait_state("running", "Cancelled")
    assert h.daemon.service.delete("running", h.root) == "forgotten"
    assert h.daemon.store.runs.get("running") is None


def test_success_and_environment(make_daemon: Make) -> None:
    h = make_daemon(gpus=4)
    keys = (
        "ASTRAEUS_RUN_NAME SLURM_JOB_NAME ASTRAEUS_GPU_COUNT CUDA_VISIBLE_DEVICES "
        "ASTRAEUS_WORKER_INDEX ASTRAEUS_RESTART_COUNT"
    )
    show = f"import os; print(*[os.environ[k] for k in {keys.split()!r}])"
    h.submit(spec("env-check", [PY, "-c", show], gpus=2))
    run = h.wait_state("env-check", "Succeeded")
    assert run.exit_code == 0
    assert "env-check env-check 2 0,1 0 0" in h.log("env-check")
