"""The process executor with real processes: start, signal, adopt, lose, drives, uids."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.executors.base import (
    Executor,
    ExecutorError,
    Mount,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.executors.process import NO_BWRAP, SUPERVISOR_GONE, ProcessExecutor
from runner.executors.tree import proc_stat
from runner.executors.workerfiles import read_json

PY = sys.executable
TIMEOUT = 20.0
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching uid needs root")
NOBODY = 65534

# A program that says it is ready, then exits cleanly on SIGTERM.
POLITE = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: (print('got-term', flush=True), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


def wait_for(what: Callable[[], object], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def gone(pid: int) -> bool:
    seen = proc_stat(pid)
    return seen is None or seen[0] in "ZX"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "workers"
    yield folder
    leftover = ProcessExecutor(folder)
    for w in leftover.list_workers():
        leftover.signal(w.handle, signal.SIGKILL)


@pytest.fixture(params=[True, False], ids=["launched", "own-interpreter"])
def executor(state_dir: Path, request: pytest.FixtureRequest) -> ProcessExecutor:
    """Supervisors forked from the warm launcher, and each in an interpreter of its own."""
    return ProcessExecutor(state_dir, warm=request.param)


def launch(
    tmp_path: Path,
    argv: list[str],
    run: str = "train",
    *,
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] = (),
    mounts: tuple[Mount, ...] = (),
    uid: int | None = None,
    gid: int | None = None,
    cpu_milli: int = 0,
    memory: int = 0,
) -> WorkerLaunch:
    return WorkerLaunch(
        run=run,
        attempt=1,
        worker=0,
        image=None,
        argv=tuple(argv),
        env=env or {},
        gpus=gpus,
        cpu_milli=cpu_milli,
        memory=memory,
        mounts=mounts,
        uid=os.getuid() if uid is None else uid,
        gid=os.getgid() if gid is None else gid,
        log_path=tmp_path / "logs" / run / "1-0.log",
    )


def ended(ex: ProcessExecutor, handle: str) -> WorkerStatus:
    wait_for(lambda: ex.status(handle).state is not Observed.RUNNING)
    return ex.status(handle)


def log_of(lw: WorkerLaunch) -> str:
    return lw.log_path.read_text() if lw.log_path.exists() else ""


def test_is_an_executor(executor: ProcessExecutor) -> None:
    typed: Executor = executor
    assert typed.name == "process"


@pytest.mark.parametrize("code", [0, 3])
def test_output_lands_in_the_log_and_exit_code_is_reported(
    executor: ProcessExecutor, tmp_path: Path, code: int
) -> None:
    lw = launch(tmp_path, ["sh", "-c", f"echo to-out; echo to-err >&2; exit {code}"])
    handle = executor.start(lw)
    assert handle == lw.key
    status = ended(executor, handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, code)
    assert log_of(lw).splitlines() == ["to-out", "to-err"]


def test_environment_arrives(executor: ProcessExecutor, tmp_path: Path) -> None:
    env = {"ASTRAEUS_RUN_NAME": "train", "SLURM_JOB_NAME": "train"}
    script = 'echo "$ASTRAEUS_RUN_NAME $SLURM_JOB_NAME $CUDA_VISIBLE_DEVICES"; echo "$HOME"'
    lw = launch(tmp_path, ["sh", "-c", script], env=env, gpus=(1, 3))
    assert ended(executor, executor.start(lw)).exit_code == 0
    first, home = log_of(lw).splitlines()
    assert first == "train train 1,3"
    assert home.startswith("/")


def test_log_appends_across_starts(executor: ProcessExecutor, tmp_path: Path) -> None:
    for word in ("one", "two"):
        lw = launch(tmp_path, ["echo", word])
        assert ended(executor, executor.start(lw)).exit_code == 0
        executor.cleanup(lw.key)
    assert log_of(lw).splitlines() == ["one", "two"]


def test_sigterm_reaches_the_program(executor: ProcessExecutor, tmp_path: Path) -> None:
    lw = launch(tmp_path, [PY, "-c", POLITE])
    handle = executor.start(lw)
    assert executor.status(handle).state is Observed.RUNNING
    wait_for(lambda: "ready" in log_of(lw))
    executor.signal(handle, signal.SIGTERM)
    status = ended(executor, handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 0)
    assert "got-term" in log_of(lw)


def test_sigkill_ends_a_program_and_its_child_that_ignore_sigterm(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    script = "trap '' TERM; sleep 300 & echo child=$!; wait; wait"
    lw = launch(tmp_path, ["sh", "-c", script])
    handle = executor.start(lw)
    wait_for(lambda: "child=" in log_of(lw))
    child = int(log_of(lw).split("child=")[1].split()[0])
    executor.signal(handle, signal.SIGTERM)
    time.sleep(0.3)  # give SIGTERM a chance to (wrongly) work
    assert executor.status(handle).state is Observed.RUNNING
    assert not gone(child)
    executor.signal(handle, signal.SIGKILL)
    status = ended(executor, handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 128 + signal.SIGKILL)
    assert read_json(executor.state_dir / handle / "exit.json") is not None
    wait_for(lambda: gone(child))


def test_a_restarted_daemon_adopts_a_running_worker(state_dir: Path, tmp_path: Path) -> None:
    lw = launch(tmp_path, [PY, "-c", POLITE])
    handle = ProcessExecutor(state_dir).start(lw)
    wait_for(lambda: "ready" in log_of(lw))
    again = ProcessExecutor(state_dir)  # the daemon was restarted
    [listed] = again.list_workers()
    assert (listed.handle, listed.run, listed.attempt, listed.worker) == (handle, "train", 1, 0)
    assert again.status(handle).state is Observed.RUNNING
    again.signal(handle, signal.SIGTERM)
    assert ended(again, handle).exit_code == 0
    again.cleanup(handle)
    assert again.list_workers() == []
    assert not (state_dir / handle).exists()


def test_a_worker_that_ended_while_the_daemon_was_down_is_listed(
    state_dir: Path, tmp_path: Path
) -> None:
    lw = launch(tmp_path, ["sh", "-c", "exit 5"])
    handle = ProcessExecutor(state_dir).start(lw)
    wait_for(lambda: (state_dir / handle / "exit.json").exists())
    again = ProcessExecutor(state_dir)
    assert [w.handle for w in again.list_workers()] == [handle]
    status = again.status(handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 5)


def test_a_killed_supervisor_is_a_missing_worker(executor: ProcessExecutor, tmp_path: Path) -> None:
    lw = launch(tmp_path, [PY, "-c", POLITE])
    handle = executor.start(lw)
    meta = read_json(executor.state_dir / handle / "meta.json")
    assert meta is not None
    os.kill(meta["supervisor_pid"], signal.SIGKILL)
    status = ended(executor, handle)
    assert (status.state, status.error) == (Observed.MISSING, SUPERVISOR_GONE)
    wait_for(lambda: gone(meta["child_pid"]))  # the command does not outlive it
    executor.cleanup(handle)
    assert executor.list_workers() == []


def test_an_unknown_handle_is_missing(executor: ProcessExecutor) -> None:
    assert executor.status("astraeus-nothing-1-0").state is Observed.MISSING
    executor.signal("astraeus-nothing-1-0", signal.SIGTERM)  # fine: nothing to signal
    with pytest.raises(ExecutorError):
        executor.status("../escape")


def test_a_missing_command_exits_127_with_a_reason(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    lw = launch(tmp_path, ["astraeus-no-such-program", "--flag"])
    status = ended(executor, executor.start(lw))
    assert (status.state, status.exit_code) == (Observed.EXITED, 127)
    assert status.error == "command not found: astraeus-no-such-program"


def test_a_running_worker_cannot_be_cleaned_up(executor: ProcessExecutor, tmp_path: Path) -> None:
    lw = launch(tmp_path, [PY, "-c", POLITE])
    handle = executor.start(lw)
    with pytest.raises(ExecutorError, match="still running"):
        executor.cleanup(handle)
    with pytest.raises(ExecutorError, match="already running"):
        executor.start(lw)


def test_small_limits_hold_the_command_not_its_supervisor(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    """1 MiB is room for ``true``, not for the supervisor's interpreter: the command joins
    its cgroup, the supervisor never does (tests/hostile/test_enforced_asks.py: the limits
    themselves)."""
    lw = launch(tmp_path, ["true"], cpu_milli=500, memory=1 << 20)
    assert ended(executor, executor.start(lw)).exit_code == 0


# -- processes that leave the worker's process group ---------------------------------------

# A child in a session of its own and a double-forked daemon (orphaned, so reparented),
# each saying its pid; every one of them notes SIGTERM and goes on. The command itself
# waits for both, says its pid too, then stays ("stay") or exits with 3 ("exit").
ESCAPES = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: print(f"term {os.getpid()}", flush=True))
started, said = os.pipe()
def stay(word):
    print(f"{word} {os.getpid()}", flush=True)
    os.write(said, b".")
    for _ in range(300):
        time.sleep(1)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    stay("setsid")
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        os.setsid()
        stay("orphan")
    os._exit(0)
os.waitpid(middle, 0)  # gone before "main" is said: a signal can no longer reach it
os.read(started, 1), os.read(started, 1)
if sys.argv[1] == "exit":
    sys.exit(3)
stay("main")
"""
SANDBOXED = pytest.mark.parametrize(
    "sandboxed", [False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "bwrap"]
)


def escapes(tmp_path: Path, how: str, sandboxed: bool) -> WorkerLaunch:
    drive = tmp_path / "drive"
    drive.mkdir(exist_ok=True)
    mounts = (Mount(str(drive), "/astraeus-test-escapes"),) if sandboxed else ()
    return launch(tmp_path, [PY, "-c", ESCAPES, how], mounts=mounts)


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test saw leave the group: killed afterwards, should the test fail to end them."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def said(lw: WorkerLaunch, word: str) -> list[int]:
    """The pids that said ``word`` in the log."""
    return [int(line.split()[1]) for line in log_of(lw).splitlines() if line.startswith(word)]


@SANDBOXED
def test_a_stop_reaches_processes_that_left_the_group(
    state_dir: Path, tmp_path: Path, strays: list[int], sandboxed: bool
) -> None:
    lw = escapes(tmp_path, "stay", sandboxed)
    handle = ProcessExecutor(state_dir).start(lw)
    wait_for(lambda: said(lw, "main"))
    family = said(lw, "main") + said(lw, "setsid") + said(lw, "orphan")
    strays += family
    assert len({os.getsid(pid) for pid in family}) == 3  # three sessions, three groups
    again = ProcessExecutor(state_dir)  # a restarted daemon stops it
    again.signal(handle, signal.SIGTERM)
    wait_for(lambda: sorted(said(lw, "term")) == sorted(family))  # each once
    time.sleep(0.3)  # give SIGTERM a chance to (wrongly) end bubblewrap
    assert again.status(handle).state is Observed.RUNNING
    meta = read_json(state_dir / handle / "meta.json")
    assert meta is not None
    os.kill(meta["supervisor_pid"], signal.SIGSTOP)  # the SIGKILL needs no help from it
    try:
        again.signal(handle, signal.SIGKILL)
        wait_for(lambda: all(gone(pid) for pid in family))
    finally:
        os.kill(meta["supervisor_pid"], signal.SIGCONT)
    status = ended(again, handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 128 + signal.SIGKILL)


@SANDBOXED
def test_what_a_command_leaves_behind_ends_before_its_exit_is_reported(
    executor: ProcessExecutor, tmp_path: Path, strays: list[int], sandboxed: bool
) -> None:
    lw = escapes(tmp_path, "exit", sandboxed)
    handle = executor.start(lw)
    status = ended(executor, handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 3)  # the command's own
    left = said(lw, "setsid") + said(lw, "orphan")
    strays += left
    assert len(left) == 2
    assert [pid for pid in left if not gone(pid)] == []  # already when the exit is reported
    supervisor_log = (executor.state_dir / handle / "supervisor.log").read_text()
    assert "ending 2 process(es) the command left behind" in supervisor_log


# -- drives -------------------------------------------------------------------------------


def test_drives_without_bubblewrap_fail_clearly(
    executor: ProcessExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    lw = launch(tmp_path, ["true"], mounts=(Mount(str(tmp_path), "/data"),))
    with pytest.raises(ExecutorError) as caught:
        executor.start(lw)
    assert str(caught.value) == NO_BWRAP
    assert "\n" not in NO_BWRAP


@needs_bwrap
def test_a_drive_at_a_path_missing_on_the_host(executor: ProcessExecutor, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "input.txt").write_text("hello\n")
    top = f"/astraeus-test-{uuid.uuid4().hex[:8]}"
    target = f"{top}/data"
    script = f"cat {target}/input.txt; echo written > {target}/out.txt; ls /usr >/dev/null"
    lw = launch(tmp_path, ["sh", "-c", script], mounts=(Mount(str(drive), target),))
    status = ended(executor, executor.start(lw))
    assert (status.exit_code, log_of(lw)) == (0, "hello\n")
    assert (drive / "out.txt").read_text() == "written\n"
    assert not os.path.lexists(top)  # nothing was created in the host's root


@needs_bwrap
def test_a_read_only_drive_refuses_writes(executor: ProcessExecutor, tmp_path: Path) -> None:
    drive, target = tmp_path / "drive", tmp_path / "existing-target"
    drive.mkdir()
    target.mkdir()
    script = f"echo no > {target}/out.txt"
    lw = launch(tmp_path, ["sh", "-c", script], mounts=(Mount(str(drive), str(target), True),))
    status = ended(executor, executor.start(lw))
    assert status.exit_code not in (0, None)
    assert "Read-only file system" in log_of(lw)
    assert list(drive.iterdir()) == []


@needs_bwrap
def test_a_program_on_a_drive_runs_and_a_missing_one_is_127(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    drive = tmp_path / "tools"
    drive.mkdir()
    (drive / "hello").write_text("#!/bin/sh\necho hello from the drive\n")
    (drive / "hello").chmod(0o755)
    mounts = (Mount(str(drive), "/opt/astraeus-test-tools"),)
    ok = launch(tmp_path, ["/opt/astraeus-test-tools/hello"], run="ok", mounts=mounts)
    assert ended(executor, executor.start(ok)).exit_code == 0
    assert log_of(ok) == "hello from the drive\n"
    bad = launch(tmp_path, ["/opt/astraeus-test-tools/nope"], run="bad", mounts=mounts)
    assert ended(executor, executor.start(bad)).exit_code == 127


@needs_bwrap
def test_sigterm_reaches_a_program_under_bubblewrap(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    lw = launch(tmp_path, [PY, "-c", POLITE], mounts=(Mount(str(drive), "/astraeus-test-x"),))
    handle = executor.start(lw)
    wait_for(lambda: "ready" in log_of(lw))
    executor.signal(handle, signal.SIGTERM)
    assert ended(executor, handle).exit_code == 0
    assert "got-term" in log_of(lw)


@needs_bwrap
@pytest.mark.parametrize(
    ("mounts", "message"),
    [
        ((Mount("/nonexistent-astraeus-src", "/data"),), "does not exist"),
        ((Mount("/tmp", "data"),), "must be an absolute folder"),
        ((Mount("/tmp", "/data"), Mount("/tmp", "/data/x")), "overlap"),
        ((Mount("/tmp", f"{__file__}/x"),), "lies under the file"),
        ((Mount("/tmp", "/etc/astraeus-test"),), "must not be / or under /proc"),
    ],
)
def test_drives_that_cannot_be_placed_are_refused(
    executor: ProcessExecutor, tmp_path: Path, mounts: tuple[Mount, ...], message: str
) -> None:
    with pytest.raises(ExecutorError, match=message):
        executor.start(launch(tmp_path, ["true"], mounts=mounts))


# -- another uid --------------------------------------------------------------------------


@needs_root
def test_a_member_command_runs_as_the_member(executor: ProcessExecutor, tmp_path: Path) -> None:
    lw = launch(tmp_path, ["sh", "-c", "id -u; id -g; id -G"], uid=NOBODY, gid=NOBODY)
    assert ended(executor, executor.start(lw)).exit_code == 0
    assert log_of(lw).split() == [str(NOBODY)] * 3
    assert lw.log_path.stat().st_uid == NOBODY


@needs_root
@needs_bwrap
def test_a_member_writes_to_a_drive_as_the_member(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    drive = Path(tempfile.mkdtemp(prefix="astraeus-drive-"))  # reachable by nobody
    try:
        os.chown(drive, NOBODY, NOBODY)
        script = "id -u > /astraeus-test-drive/who"
        mounts = (Mount(str(drive), "/astraeus-test-drive"),)
        lw = launch(tmp_path, ["sh", "-c", script], uid=NOBODY, gid=NOBODY, mounts=mounts)
        status = ended(executor, executor.start(lw))
        assert status.exit_code == 0, log_of(lw)
        assert (drive / "who").read_text() == f"{NOBODY}\n"
        assert (drive / "who").stat().st_uid == NOBODY
    finally:
        shutil.rmtree(drive)


def test_the_supervisor_runs_standalone() -> None:
    """``-m runner.executors.supervise`` without a folder fails, not hangs."""
    out = subprocess.run(
        [PY, "-P", "-m", "runner.executors.supervise", "/nonexistent-astraeus"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode != 0
    assert "missing or unreadable" in out.stderr
