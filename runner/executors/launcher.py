"""A supervisor's interpreter kept warm: workers start without an interpreter's start-up.

A process worker's supervisor is ``python -S -P -m runner.executors.supervise FOLDER``:
an interpreter and its imports, tens of milliseconds of every start before the command
runs. :class:`Launcher` keeps one such interpreter waiting (``--launcher STATE_DIR``, in a
session of its own): the executor writes a worker folder's path on its stdin, and a fork
of it, imports made, is that worker's supervisor, as the command line would have made it
(runner/executors/supervise.py ``launcher``). The answer is the fork's pid and then its
exit status, which is the relay's: 0 once the command runs, else the reason is the last
line of the folder's ``supervisor.log``, as before.

Nothing depends on it: a launcher that cannot start, or is gone before it took a folder,
leaves the start to a supervisor of its own; one that stops answering is ended and the
next start makes another. A daemon killed while a launcher holds a start leaves that
start to finish (the launcher exits once its stdin has ended and the start in hand is
answered); the next daemon sees such a launcher as a start under way
(:func:`foreign_launchers`) until it is gone.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from runner.executors.tree import cmdlines
from runner.executors.workerfiles import LAUNCH, META

MODULE = "runner.executors.supervise"  # the supervisor's module, and the launcher's
FLAG = "--launcher"


class LauncherGone(Exception):
    """The launcher ended, or never started, before it took the folder: nothing started."""


class LauncherTimeout(TimeoutError):
    """The start took longer than the caller waits; the fork was killed, the launcher ended."""


class Launcher:
    """One warm supervisor interpreter for the folders of ``state_dir``; one start at a time."""

    def __init__(self, state_dir: Path, env: dict[str, str]) -> None:
        self.state_dir = state_dir
        argv = [sys.executable, "-S", "-P", "-m", MODULE, FLAG, str(state_dir)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # each start's own words go to its supervisor.log
            env=env,
            cwd="/",
            start_new_session=True,
        )
        self._pending = b""
        self._lock = threading.Lock()
        assert self.proc.stdin is not None
        # once the executor is gone the launcher's stdin ends, and so does the launcher
        weakref.finalize(self, _close, self.proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def start(self, folder: Path, timeout: float) -> int:
        """Start ``folder``'s supervisor; its exit status (0: the command runs).

        LauncherGone when nothing was started (the caller starts it otherwise);
        LauncherTimeout after ``timeout`` s (the launcher is ended, the fork killed)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(os.fsencode(folder) + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):  # it ended before it could read the folder
                self.kill()
                raise LauncherGone from None
            first = self._line(deadline)
            if first == b"refused":
                raise LauncherGone
            if first is None:  # silent: ended, or hung; killed, it never takes the folder
                hung = self.alive()
                self.kill()
                if (folder / LAUNCH).exists():  # no supervisor read it: none was started
                    if hung:
                        raise LauncherTimeout
                    raise LauncherGone
                return _outcome(None, folder, deadline)  # a fork took it, then the pid was lost
            pid = int(first)
            status = self._line(deadline)
            if status is not None:
                return int(status)
            if self.alive():  # it took the folder but did not finish in time
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self.kill()
                raise LauncherTimeout
            return _outcome(pid, folder, deadline)  # it ended with the start in hand

    def _line(self, deadline: float) -> bytes | None:
        """The next line of the answer; None when the launcher ended or time ran out."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.strip()

    def close(self) -> None:
        """Its stdin ends: it exits once any start in hand is answered."""
        _close(self.proc)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        _close(self.proc)


def _close(proc: subprocess.Popen[bytes]) -> None:
    """End the launcher: its stdin ends, and it exits once any start in hand is answered."""
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(0.05)  # reaped when it has ended; else left to finish the start in hand


def _outcome(pid: int | None, folder: Path, deadline: float) -> int:
    """The launcher ended with a start in hand: once its fork (``pid``, when known) is gone
    or the supervisor has written ``meta.json`` (before it says "started"), the folder
    tells; 1 when it does not by ``deadline``."""
    meta = folder / META
    while not meta.exists() and time.monotonic() < deadline:
        if pid is not None and not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.01)
    return 0 if meta.exists() else 1


def launches_for(pid: int, argv: list[bytes], state_dir: Path) -> bool:
    """Whether ``pid``, whose command line is ``argv``, is a launcher of ``state_dir`` or
    its fork with a start in hand: a session leader. The supervisors it made keep its
    command line, in a session they did not start: they are no start under way."""
    if argv[-3:] != [MODULE.encode(), FLAG.encode(), os.fsencode(state_dir)]:
        return False
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def foreign_launchers(state_dir: Path, own: int | None) -> bool:
    """Whether a launcher of ``state_dir`` other than ``own`` runs (an earlier daemon's,
    maybe with a start in hand): read from ``/proc/*/cmdline``."""
    return any(pid != own and launches_for(pid, argv, state_dir) for pid, argv in cmdlines())
