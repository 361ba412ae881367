"""Telemetry through a real daemon on simulated GPUs: ``GET /v1/telemetry`` and
``astra top --once`` show each running run's simulated GPU load and its real memory,
another workspace's run anonymous; the sampler ends with the daemon."""

from __future__ import annotations

import http.client  # noqa: F401 (loaded before as_user's child drops root's rights)
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from astraeus_tui.cli.top import render
from astraeus_tui.client import Client
from runner.schema import Telemetry
from tests.integration.telemetry_runs import ANON, WORK, spec
from tests.support.harness import Harness, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

GROUP, ALICE, BOB = "astra-tel", "astra-tel-alice", "astra-tel-bob"

CONFIG = two_tenants(GROUP, ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


def _measured(telemetry: Telemetry, count: int) -> bool:
    runs = telemetry.runs
    return (
        len(runs) == count
        and all(
            r.memory_bytes and r.memory_bytes > 32 << 20 and r.gpu_util is not None for r in runs
        )
        and any(r.gpu_util for r in runs)
    )


def test_running_runs_show_their_gpus_and_memory_anonymous_outside_their_workspace(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CONFIG, gpus=3, machine="telemetry_seconds = 0.3")
    alice, bob = users[ALICE], users[BOB]
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(spec("tel-alice", "vision", WORK)))
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(spec("tel-bob", "nlp")))
    wait_for(lambda: {r["state"] for r in lab.json("ls")} == {"Running"}, 30, "both running")
    admin = Client(lab.socket)

    def settled() -> Telemetry | None:
        """Both measured, past their start-up: a sample may still count bob's interpreter
        start and allocation as work (up to 30 s; a bob busy for good never settles)."""
        got = admin.telemetry(history=True)
        utils = {r.name: r.gpu_util for r in got.runs}
        calm = (utils.get("tel-alice") or 0) >= 80 and utils.get("tel-bob") == 0
        return got if _measured(got, 2) and calm else None

    seen = wait_for(settled, 30, "both runs measured, bob idle, alice busy")
    assert seen.simulated and len(seen.gpus) == 3
    runs = {r.name: r for r in seen.runs}
    assert set(runs) == {"tel-alice", "tel-bob"}
    (working,) = runs["tel-alice"].gpus
    (sleeping,) = runs["tel-bob"].gpus
    for g in seen.gpus:  # the simulation follows the runs: a sleeping run's GPU does nothing
        assert g.simulated and g.memory_total == 80 << 30
        assert g.utilization is not None
        if g.index == working:
            assert 80 <= g.utilization <= 100 and g.memory_used
        elif g.index == sleeping:
            assert g.utilization == 0 and g.memory_used  # held, its memory in use
        else:
            assert (g.utilization, g.memory_used) == (0, 0)
        assert isinstance(g.history, list) and g.history
    assert runs["tel-alice"].gpu_util is not None and runs["tel-alice"].gpu_util >= 80
    assert runs["tel-bob"].gpu_util == 0
    for r in seen.runs:
        assert r.visible and r.uid and r.gpu_util is not None
        assert r.memory_bytes is not None and r.memory_bytes > 48 << 20  # the bytearray
        assert r.gpu_memory_bytes is not None and r.gpu_memory_bytes >= 0.6 * (80 << 30)
        assert r.cpu_percent is not None and r.cpu_percent >= 0
        assert isinstance(r.history, list) and r.history

    mine = as_user(alice, lab.socket, lambda c: c.telemetry())["ok"]["runs"]
    by_workspace = {r["workspace"]: r for r in mine}
    assert by_workspace["vision"]["name"] == "tel-alice" and by_workspace["vision"]["uid"]
    other = by_workspace["nlp"]
    assert (other["name"], other["uid"], other["visible"]) == (ANON, None, False)
    assert other["memory_bytes"] > 0  # the machine's load is no secret; whose it is, is
    assert "history" not in other

    screen = lab.astra("top", "--once")
    assert screen.returncode == 0, screen.stderr
    assert "tel-alice" in screen.stdout and "tel-bob" in screen.stdout
    assert "\x1b[" not in screen.stdout and "(simulated)" in screen.stdout
    assert "GiB" in screen.stdout and "%" in screen.stdout
    theirs = as_user(alice, lab.socket, lambda c: render(c.telemetry()))["ok"]  # top's screen
    assert "tel-alice" in theirs and ANON in theirs and "tel-bob" not in theirs


def test_the_sampler_stops_with_the_daemon(make_daemon: Callable[..., Harness]) -> None:
    harness = make_daemon(gpus=2, machine="telemetry_seconds = 0.2")
    sampler = harness.daemon.sampler
    assert sampler is not None and sampler.running
    wait_for(lambda: sampler.latest() is not None, 10, "a first sample")
    harness.daemon.stop()
    assert not sampler.running
    last = sampler.latest()
    time.sleep(0.6)  # three intervals
    assert sampler.latest() is last  # nothing sampled after the stop


def _tmux(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", name, *args], capture_output=True, text=True, timeout=10)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="the live view is driven through tmux")
def test_the_live_view_refreshes_and_q_quits(served: Callable[..., Served]) -> None:
    lab = served(gpus=2, machine="telemetry_seconds = 0.2")
    started = lab.astra("run", "--name", "live-one", "--gpus", "1", "--", "sleep", "300")
    assert started.returncode == 0, started.stderr
    wait_for(lambda: Client(lab.socket).telemetry().runs, 30, "the run measured")
    name = f"astra-top-{os.getpid()}"
    env = " ".join(f"{k}={shlex.quote(lab.env[k])}" for k in ("ASTRAEUS_HOME", "ASTRAEUS_SOCKET"))
    command = f"env {env} {shlex.quote(sys.executable)} -m astraeus_tui.cli.main top"
    assert _tmux(name, "new-session", "-d", "-x", "120", "-y", "30", command).returncode == 0
    try:

        def shown() -> str:
            text = _tmux(name, "capture-pane", "-p").stdout
            return text if "live-one" in text else ""

        screen = wait_for(shown, 20, "the live view")
        assert "UTIL" in screen and "q quits" in screen and "(simulated)" in screen
        first = screen.splitlines()[0]
        wait_for(lambda: _tmux(name, "capture-pane", "-p").stdout.splitlines()[0] != first,
                 10, "a refresh")  # fmt: skip
        _tmux(name, "send-keys", "q")
        wait_for(lambda: _tmux(name, "has-session").returncode != 0, 10, "top to quit")
    finally:
        _tmux(name, "kill-server")


def test_top_lists_a_run_from_its_start_before_any_sample(served: Callable[..., Served]) -> None:
    """Sampled once a minute: a run started since the last sample is listed at once, its
    figures ``-`` until a sample measures it."""
    lab = served(gpus=2, machine="telemetry_seconds = 60")
    client = Client(lab.socket)
    wait_for(lambda: client.telemetry().time is not None, 10, "the first sample")
    ran = lab.astra("run", "--name", "fresh", "--gpus", "1", "--image", "local", "--", "sleep",
                    "300")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    wait_for(lambda: lab.json("show", "fresh")["state"] == "Running", 15, "fresh to run")
    [run] = client.telemetry().runs
    assert (run.name, run.gpus, run.cpu_percent, run.memory_bytes) == ("fresh", [0], None, None)
    screen = lab.astra("top", "--once").stdout
    row = next(line for line in screen.splitlines() if line.startswith("fresh"))
    assert row.split()[2:] == ["0", "-", "-", "-", "-"], screen
    lab.astra("delete", "fresh")


def test_top_lists_no_run_that_ended_since_the_last_sample(served: Callable[..., Served]) -> None:
    """Sampled every 10 s: a run measured and then ended is not listed as running until
    the next sample (it was, after `astra wait` said it succeeded)."""
    lab = served(gpus=1, machine="telemetry_seconds = 10")
    client = Client(lab.socket)
    ran = lab.astra("run", "--name", "brief", "--gpus", "1", "--image", "local", "--", "sleep",
                    "300")  # fmt: skip
    assert ran.returncode == 0, ran.stderr

    def measured() -> str | None:  # the time of a sample that measured it
        t = client.telemetry()
        return t.time if [r.memory_bytes is not None for r in t.runs] == [True] else None

    at = wait_for(measured, 30, "brief measured")
    lab.astra("delete", "brief")
    wait_for(lambda: lab.json("show", "brief")["state"] == "Cancelled", 20, "brief ended")
    telemetry = client.telemetry()
    assert telemetry.time == at, "sampled again meanwhile: nothing shown"  # still that sample
    assert telemetry.runs == [], telemetry.runs
    assert "brief" not in lab.astra("top", "--once").stdout
