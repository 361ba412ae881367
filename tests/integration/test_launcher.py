"""The warm launcher (runner/executors/launcher.py): process workers start without an
interpreter's start-up, and a launcher that is gone, hung or from an earlier daemon never
loses a start nor makes one twice. Real processes, real pipes."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.executors.base import ExecutorError, Observed, WorkerLaunch
from runner.executors.launcher import MODULE, Launcher, LauncherGone, foreign_launchers
from runner.executors.process import ProcessExecutor
from runner.executors.tree import cmdlines, proc_stat
from runner.executors.workerfiles import read_json
from tests.support.harness import Harness, wait_for

ROOT = str(Path(__file__).resolve().parents[2])


def gone(pid: int) -> bool:
    seen = proc_stat(pid)
    return seen is None or seen[0] in "ZX"


def cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "workers"
    yield folder
    leftover = ProcessExecutor(folder, warm=False)
    for w in leftover.list_workers():
        leftover.signal(w.handle, signal.SIGKILL)


def start(ex: ProcessExecutor, tmp_path: Path, run: str, script: str) -> tuple[str, Path]:
    log = tmp_path / f"{run}.log"
    handle = ex.start(WorkerLaunch(run, 1, 0, None, ("sh", "-c", script), log_path=log))
    return handle, log


def supervisor(state_dir: Path, handle: str) -> int:
    meta = read_json(state_dir / handle / "meta.json")
    assert meta is not None
    pid = meta["supervisor_pid"]
    assert isinstance(pid, int)
    return pid


def test_a_worker_s_supervisor_is_a_fork_of_the_warm_launcher_in_a_session_of_its_own(
    state_dir: Path, tmp_path: Path
) -> None:
    ex = ProcessExecutor(state_dir)
    ex.warm_up()
    launcher = ex._launcher
    assert launcher is not None and launcher.alive()
    handles = [start(ex, tmp_path, f"r{i}", "echo hi; sleep 30")[0] for i in range(2)]
    for handle in handles:
        pid = supervisor(state_dir, handle)
        assert cmdline(pid)[-3:] == [b"runner.executors.supervise", b"--launcher",
                                     os.fsencode(state_dir)]  # fmt: skip
        assert os.getsid(pid) not in (os.getsid(launcher.pid), os.getsid(0))
        assert ex.status(handle).state is Observed.RUNNING
    assert ex._launcher is launcher  # one launcher for every start
    for handle in handles:
        ex.signal(handle, signal.SIGKILL)
        wait_for(lambda h=handle: ex.status(h).state is Observed.EXITED)
    assert (tmp_path / "r0.log").read_text() == "hi\n"
    launcher.kill()
    assert gone(launcher.pid)


def test_a_launcher_killed_between_starts_is_replaced(state_dir: Path, tmp_path: Path) -> None:
    ex = ProcessExecutor(state_dir)
    first, _ = start(ex, tmp_path, "a", "exit 3")
    old = ex._launcher
    assert old is not None
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: gone(old.pid))
    handle, log = start(ex, tmp_path, "b", "echo second")
    wait_for(lambda: ex.status(handle).state is Observed.EXITED)
    assert ex.status(handle).exit_code == 0 and log.read_text() == "second\n"
    assert ex._launcher is not None and ex._launcher is not old
    assert ex.status(first).exit_code == 3


def test_a_launcher_gone_before_it_read_the_folder_started_nothing(
    state_dir: Path, tmp_path: Path
) -> None:
    """LauncherGone: the caller may start the folder otherwise, as it was never taken."""
    state_dir.mkdir()
    launcher = Launcher(state_dir, dict(os.environ, PYTHONPATH=ROOT))
    os.kill(launcher.pid, signal.SIGKILL)
    wait_for(lambda: not launcher.alive())
    folder = state_dir / "astraeus-c-1-0"
    folder.mkdir()
    (folder / "launch.json").write_text("{}")
    with pytest.raises(LauncherGone):
        launcher.start(folder, 5)
    assert (folder / "launch.json").exists() and not (folder / "supervisor.log").exists()


def test_a_launcher_starts_only_folders_of_its_own(state_dir: Path, tmp_path: Path) -> None:
    state_dir.mkdir()
    launcher = Launcher(state_dir, dict(os.environ, PYTHONPATH=ROOT))
    elsewhere = tmp_path / "elsewhere" / "astraeus-x-1-0"
    elsewhere.mkdir(parents=True)
    with pytest.raises(LauncherGone):
        launcher.start(elsewhere, 5)
    assert launcher.alive() and list(elsewhere.iterdir()) == []
    launcher.kill()


def test_a_hung_launcher_times_out_and_the_next_start_has_a_new_one(
    state_dir: Path, tmp_path: Path
) -> None:
    ex = ProcessExecutor(state_dir, start_timeout=1.0)
    ex.warm_up()
    hung = ex._launcher
    assert hung is not None
    os.kill(hung.pid, signal.SIGSTOP)
    with pytest.raises(ExecutorError, match="its supervisor did not answer within 1 s"):
        start(ex, tmp_path, "d", "echo never")
    wait_for(lambda: gone(hung.pid))  # killed: it never takes that folder later
    assert not (tmp_path / "d.log").exists()
    ex.start_timeout = 20.0  # a new launcher's start-up, on a loaded machine
    handle, log = start(ex, tmp_path, "e", "echo after")
    wait_for(lambda: ex.status(handle).state is Observed.EXITED)
    assert log.read_text() == "after\n" and ex._launcher is not hung


def test_a_start_that_cannot_run_says_why_through_the_launcher(
    state_dir: Path, tmp_path: Path
) -> None:
    ex = ProcessExecutor(state_dir)
    log = tmp_path / "a-file"
    log.write_text("")
    with pytest.raises(ExecutorError, match="could not start worker astraeus-f-1-0: "):
        ex.start(WorkerLaunch("f", 1, 0, None, ("true",), log_path=log / "w.log"))
    assert ex._launcher is not None and ex._launcher.alive()  # a failed start keeps it


def test_an_earlier_daemons_launcher_counts_as_a_start_under_way(
    state_dir: Path, tmp_path: Path
) -> None:
    earlier = ProcessExecutor(state_dir)
    earlier.warm_up()
    assert earlier._launcher is not None
    later = ProcessExecutor(state_dir)
    later.warm_up()
    assert later._launcher is not None
    assert foreign_launchers(state_dir, later._launcher.pid), _launchers(earlier, later)
    assert not foreign_launchers(tmp_path / "elsewhere", None)
    # a folder whose supervisor has not written meta.json yet runs while one may come
    folder = state_dir / "astraeus-g-1-0"
    folder.mkdir()
    assert later.status("astraeus-g-1-0").state is Observed.RUNNING
    earlier._launcher.kill()
    wait_for(lambda: not foreign_launchers(state_dir, later._launcher.pid))  # type: ignore[union-attr]
    assert later.status("astraeus-g-1-0").state is Observed.MISSING
    later._launcher.kill()


def _launchers(*executors: ProcessExecutor) -> str:
    """What a failed look for launchers saw: each executor's launcher (pid, alive, its
    process's state and session) and every process running the supervisor's module."""
    said = []
    for ex in executors:
        launcher = ex._launcher
        if launcher is None:
            said.append("no launcher")
            continue
        try:
            sid: int | str = os.getsid(launcher.pid)
        except OSError as exc:
            sid = str(exc)
        seen = proc_stat(launcher.pid)
        code = launcher.proc.returncode
        said.append(
            f"pid {launcher.pid} alive {launcher.alive()} stat {seen} sid {sid} exit {code}"
        )
    said += [f"{pid}: {argv}" for pid, argv in cmdlines() if MODULE.encode() in argv]
    return "; ".join(said)


def test_a_daemon_starts_its_launcher_with_itself_and_ends_it_as_it_stops(
    make_daemon: Callable[..., Harness],
) -> None:
    h = make_daemon(gpus=1)
    executor = h.daemon.executor
    assert isinstance(executor, ProcessExecutor)
    launcher = executor._launcher
    assert launcher is not None and launcher.alive()  # before any run: the first starts warm
    h.daemon.stop()
    wait_for(lambda: gone(launcher.pid))
    assert executor._launcher is None


def test_a_running_workers_supervisor_is_no_start_under_way(
    state_dir: Path, tmp_path: Path
) -> None:
    """A supervisor keeps its launcher's command line: a folder whose start never happened
    is still seen as never started while other workers run (not adopted, then lost)."""
    ex = ProcessExecutor(state_dir)
    handle, _ = start(ex, tmp_path, "busy", "sleep 30")
    assert ex._launcher is not None
    assert cmdline(supervisor(state_dir, handle))[-2] == b"--launcher"
    assert not foreign_launchers(state_dir, ex._launcher.pid)
    never = state_dir / "astraeus-never-1-0"
    never.mkdir()
    assert ex.status("astraeus-never-1-0").state is Observed.MISSING
    ex.signal(handle, signal.SIGKILL)
    ex.close()
