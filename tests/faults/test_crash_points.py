"""The daemon dies at the worst moments (test hooks, see runner/engine/crash.py's crash_point):
after it started a worker and before it wrote so, between Stopping and SIGTERM, between
the SIGKILL's record and the signal, and inside the process executor's start. Restarted,
it adopts what runs, never starts it twice, and sends the signals it owed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from astraeus_tui.client import ApiError
from runner.executors.workerfiles import LAUNCH, META
from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import DaemonProcess, document, pids_alive, wait_for
from tests.faults.storm import PROGRAM, marked, program_argv


def prepare(tmp_path: Path) -> tuple[Path, Path]:
    marks = tmp_path / "marks"
    marks.mkdir()
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    return marks, program


def live_rows(d: DaemonProcess, run: str) -> list[dict[str, object]]:
    with d.database() as db:
        rows = db.execute(
            "SELECT attempt, worker, state, handle FROM workers WHERE run = ?", (run,)
        ).fetchall()
    return [dict(r) for r in rows]


def test_a_worker_started_but_not_yet_recorded_is_adopted(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    marks, program = prepare(tmp_path)
    d = make_daemon(gpus=2).start(ASTRAEUS_TEST_CRASH_AT="after-executor-start")
    d.submit(document("cut", program_argv(program, marks, "ok", 3), gpus=1))
    assert d.proc is not None and d.proc.wait(30) == 137  # died right after the start
    assert live_rows(d, "cut") == [{"attempt": 1, "worker": 0, "state": "Starting", "handle": None}]
    wait_for(lambda: marked(marks, "start", "cut"), 10, "the worker to run")
    d.start()
    run = d.wait_state("cut", "Succeeded")
    assert [w["attempt"] for w in run["workers_history"]] == [1]
    assert run["restarts"] == 0
    assert len(marked(marks, "start", "cut")) == 1  # adopted, not started again
    assert not marked(marks, "CONFLICT")


def test_a_gang_cut_short_while_starting_restarts_whole_without_spending_budget(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    marks, program = prepare(tmp_path)
    d = make_daemon(gpus=2).start(ASTRAEUS_TEST_CRASH_AT="after-executor-start")
    d.submit(document("pair", program_argv(program, marks, "ok", 4), gpus=1, workers=2))
    assert d.proc is not None and d.proc.wait(30) == 137  # worker 0 runs, worker 1 never began
    wait_for(lambda: marked(marks, "start", "pair"), 10, "worker 0 to run")
    d.start()
    run = d.wait_state("pair", "Succeeded", timeout=40)
    history = {(w["attempt"], w["worker"]): w["state"] for w in run["workers_history"]}
    assert history == {(1, 0): "Cancelled", (1, 1): "Cancelled", (2, 0): "Done", (2, 1): "Done"}
    assert run["restarts"] == 0
    assert any(e["message"].startswith("Restarting: worker 1 never started") for e in run["events"])
    starts = sorted((w[3], w[2]) for w in marked(marks, "start", "pair"))
    assert starts == [("1", "0"), ("2", "0"), ("2", "1")]  # never the half gang to its end
    assert not marked(marks, "CONFLICT")


def delete_as_it_dies(d: DaemonProcess, name: str) -> None:
    """Delete ``name`` on a daemon that dies (its crash point) as it stops the run: the
    loop may die before the API has answered, so the answer may never come."""
    with contextlib.suppress(ApiError):
        d.client().request("DELETE", f"/v1/runs/{name}")


def test_a_sigterm_the_crash_swallowed_is_sent_after_the_restart(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    marks, program = prepare(tmp_path)
    d = make_daemon(gpus=1, grace=8).start(ASTRAEUS_TEST_CRASH_AT="after-stop-recorded")
    d.submit(document("saver", program_argv(program, marks, "ok", 60), gpus=1))
    wait_for(lambda: marked(marks, "start", "saver"), 15, "the worker to run")
    delete_as_it_dies(d, "saver")
    assert d.proc is not None and d.proc.wait(30) == 137  # Stopping written, SIGTERM not sent
    d.start()
    run = d.wait_state("saver", "Cancelled", timeout=30)
    assert marked(marks, "term", "saver")  # it could save its work
    assert not any(e["message"].startswith("Sent SIGKILL") for e in run["events"])


def test_a_sigkill_the_crash_swallowed_is_sent_after_the_restart(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    marks, program = prepare(tmp_path)
    d = make_daemon(gpus=1, grace=1).start(ASTRAEUS_TEST_CRASH_AT="after-kill-recorded")
    d.submit(document("mule", program_argv(program, marks, "stubborn", 300), gpus=1))
    start = wait_for(lambda: marked(marks, "start", "mule"), 15, "the worker to run")
    pid = int(start[0][4])
    delete_as_it_dies(d, "mule")
    assert d.proc is not None and d.proc.wait(30) == 137  # SIGKILL written, not sent
    assert pids_alive([pid]) == [pid]
    d.start()
    d.wait_state("mule", "Cancelled", timeout=30)
    assert pids_alive([pid]) == []


SLOW_SITE = """
import os, sys, time
if "runner.executors.supervise" in sys.orig_argv:
    time.sleep(float(os.environ.get("ASTRAEUS_TEST_SLOW_SUPERVISOR", "0")))
"""


def test_a_daemon_killed_inside_a_process_start_adopts_the_worker(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """Killed while the worker's supervisor starts (before meta.json): adopted, not redone."""
    marks, program = prepare(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_SITE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "ASTRAEUS_TEST_SLOW_SUPERVISOR": "3"}
    d = make_daemon(gpus=1, env=env).start()
    uid = d.submit(document("slow", program_argv(program, marks, "ok", 2), gpus=1))["uid"]
    folders = d.home / "workers"

    # its launch file is the last the daemon writes before it hands the start over (a kill
    # after the folder is made but before then leaves nothing started: a new attempt is right)
    def launched() -> Path | None:
        return next((f for f in folders.glob(f"*-{uid}-1-0") if (f / LAUNCH).exists()), None)

    folder = wait_for(launched, 15, "the worker's launch file")
    assert not (folder / META).exists()  # its supervisor's start sleeps: start() waits on it
    d.kill9()
    d.start()
    run = d.wait_state("slow", "Succeeded", timeout=40)
    assert [w["attempt"] for w in run["workers_history"]] == [1]
    assert len(marked(marks, "start", "slow")) == 1
    assert run["restarts"] == 0


def test_the_crash_hook_is_inert_without_its_variable(make_daemon: MakeDaemon) -> None:
    d = make_daemon(gpus=1).start()
    d.submit(document("plain", ["true"], gpus=1))
    d.wait_state("plain", "Succeeded")
    assert d.proc is not None and d.alive()
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(15) == 0
