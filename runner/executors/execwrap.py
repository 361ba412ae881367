"""The keeper of one ``astra exec`` command: ``python -S -P -m runner.executors.execwrap``.

The daemon starts it (as root) with the session's streams as its standard ones, the
worker's mount namespace (when sandboxed) as an inherited descriptor, and the job as
JSON in a memory file whose descriptor is its one argument (never on its command line,
which every local user can read): ``{"argv", "env", "cwd", "uid", "gid", "tty",
"namespace"}``. It

1. becomes a child subreaper, so whatever the command starts stays below it, also a
   process that calls ``setsid()`` or double-forks to leave (a member's ``sleep &`` that
   would keep a GPU outside the scheduler);
2. starts the command as :mod:`runner.executors.enter` says (the namespace, the
   terminal, the member's uid:gid, no-new-privileges, the working directory), then
   lets go of the session's streams itself, so the command's end of them is the last;
3. waits for it; once it has exited, or on SIGTERM/SIGHUP (the session closed, the run
   stopped), every process below it gets SIGKILL, and it exits with the command's code
   (128 + N when a signal N ended it; 127 or 126 when it could not be executed, the
   reason on stderr).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from runner.executors.cgroupfs import WorkerGroup
from runner.executors.enter import child_setup
from runner.executors.tree import kill_descendants

_PR_SET_CHILD_SUBREAPER = 36
_ENDING = False
_REAPED: dict[int, int] = {}  # pid -> wait status, of the children reaped while ending all


def main(argv: list[str]) -> int:
    job = _read_job(int(argv[1]))
    for stop in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(stop, _end)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cannot keep the command's processes together", file=sys.stderr)
        return 126
    setup = child_setup(
        job["namespace"],
        job["uid"],
        job["gid"],
        job["cwd"],
        job["tty"],
        job.get("groups", []),
        WorkerGroup.from_json(job.get("cgroup")),
    )
    try:
        proc = subprocess.Popen(
            job["argv"], env=job["env"], cwd="/", start_new_session=True, preexec_fn=setup,
            close_fds=True,  # the namespace's descriptor too: used before, never passed on
        )  # fmt: skip
    except FileNotFoundError:
        print(f"command not found: {job['argv'][0]}", file=sys.stderr)
        return 127
    except OSError as e:
        print(f"cannot execute {job['argv'][0]}: {e.strerror}", file=sys.stderr)
        return 126
    except subprocess.SubprocessError as e:
        print(f"cannot enter the worker: {e}", file=sys.stderr)
        return 126
    _let_go_of_streams()
    code = _wait(proc)
    _end_all()
    return code


def _read_job(fd: int) -> dict[str, Any]:
    """The job from the memory file the daemon passed (then closed: the command never
    inherits it)."""
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    job: dict[str, Any] = json.loads(b"".join(chunks))
    return job


def _let_go_of_streams() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """The command's exit code, whichever of its processes is reaped first, and where."""
    while True:
        if proc.pid in _REAPED:  # reaped while ending everything (the signal's handler)
            return _exit_code(_REAPED[proc.pid])
        try:
            pid, status = os.waitpid(-1, 0)  # the command, and orphans reparented to us
        except ChildProcessError:  # nothing left, the command's status taken elsewhere
            if proc.pid in _REAPED:
                continue
            return 128 + signal.SIGKILL if _ENDING else 1
        except InterruptedError:
            continue
        if pid == proc.pid:
            return _exit_code(status)
        # an orphan: the command is still to be reaped (SIGKILLed already once ending)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _end(signum: int, frame: object) -> None:
    global _ENDING
    _ENDING = True
    _end_all()


def _end_all() -> None:
    """SIGKILL to everything below; reap it."""
    for _ in range(50):
        alive, _refused = kill_descendants(os.getpid())
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _REAPED[pid] = status
        if not alive:
            return
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
