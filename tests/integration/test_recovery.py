"""Kill -9 the daemon and start it again: running work is adopted, not restarted."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served

Start = Callable[..., Served]


def counting_program(marker: Path, gate: Path) -> list[str]:
    """Appends a line each time it starts, then runs until ``gate`` exists and exits 0."""
    code = (
        f"import os, time; open({str(marker)!r}, 'a').write('start\\n')\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
        "print('finished')"
    )
    return [sys.executable, "-c", code]


def test_running_work_is_adopted_after_kill_9(served: Start, tmp_path: Path) -> None:
    d = served(gpus=2)
    marker, gate = tmp_path / "starts.txt", tmp_path / "gate"
    d.astra("run", "--name", "survivor", "--gpus", "1", "--", *counting_program(marker, gate))
    d.astra("run", "--name", "waiting", "--gpus", "2", "--", "sleep", "1")
    wait_for(lambda: d.json("show", "survivor")["state"] == "Running")
    wait_for(marker.exists)
    d.kill9()
    d.restart()
    run = d.json("show", "survivor")
    assert run["state"] == "Running"
    assert [w["attempt"] for w in run["workers_history"]] == [1]
    gate.touch()
    finished = wait_for(lambda: (r := d.json("show", "survivor"))["state"] == "Succeeded" and r)
    assert finished["restarts"] == 0
    assert marker.read_text() == "start\n"  # started once, never twice
    assert "finished" in d.astra("logs", "survivor").stdout
    wait_for(lambda: d.json("show", "waiting")["state"] == "Succeeded")


def test_a_worker_that_ended_while_the_daemon_was_down_is_learned(
    served: Start, tmp_path: Path
) -> None:
    d = served(gpus=1)
    d.astra("run", "--name", "quick-fail", "--gpus", "1", "--", sys.executable, "-c",
            "import time, sys; time.sleep(1.5); sys.exit(4)")  # fmt: skip
    wait_for(lambda: d.json("show", "quick-fail")["state"] == "Running")
    d.kill9()
    wait_for(lambda: list((d.home / "workers").glob("*/exit.json")), message="the exit")
    d.restart()
    run = wait_for(lambda: (r := d.json("show", "quick-fail"))["restarts"] >= 1 and r)
    assert run["workers_history"][0]["exit_code"] == 4
    events = [e["message"] for e in run["events"]]
    said = r"Restarting at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(restart 1 of 10\)"
    assert any(re.fullmatch(said + ": worker 0 exited with code 4", e) for e in events), events


def test_auto_does_not_fall_back_to_processes_under_live_containers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.daemon.daemon import Daemon, DaemonError
    from runner.store.db import RunRow, Store

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[machine]\nexecutor = "auto"\ngpus = 1\n')
    store = Store(home / "state.db")
    spec = {"metadata": {"name": "boxed"}, "spec": {"task_template": {"image": "busybox"}}}
    row = RunRow(
        name="boxed",
        workspace="default",
        owner="root",
        uid=0,
        gid=0,
        spec_text=json.dumps(spec),
        priority=0,
        state="Queued",
        reason=None,
        submitted_at=1.0,
        started_at=None,
        finished_at=None,
        exit_code=None,
        restarts=0,
        preemptions=0,
        attempts=0,
        preempted_by=None,
        stop_request=None,
        quota_noted=False,
    )
    store.runs.insert(row)
    with store.transaction() as tx:
        store.runs.set_state(tx, "boxed", "Running")
    store.close()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(DaemonError) as refused:
        Daemon(home)
    assert "1 run(s) live in containers (boxed): start Docker and try again" in str(refused.value)
    with store.transaction() as tx:  # once nothing lives in a container, processes are fine
        store.runs.set_state(tx, "boxed", "Failed")
    assert Daemon(home).executor.name == "process"
