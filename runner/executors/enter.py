"""``astra exec`` on the process executor: a command inside a live worker, as its user.

The worker's folder keeps ``enter.json``, the launch the supervisor was given (the
environment, working directory, uid:gid and whether it is sandboxed), written by
the executor at start, root's only. The command is forked by the daemon and, in the
child before it runs anything the member chose:

0. joins the worker's cgroup (runner/executors/cgroupfs.py), so what it runs counts
   against the worker's memory and CPU and ends with its stops (its keeper stays out);

1. joins the mount namespace of the worker's command when the worker is sandboxed
   (bubblewrap): it sees the drives at their mount paths as the worker does. The
   namespace is opened as ``/proc/<pid>/ns/mnt`` of the pid the supervisor recorded,
   checked against its start time, never a path a member named;
2. takes the terminal as its controlling one (``-it``);
3. drops to the worker's uid:gid and the member's supplementary groups, no-new-privileges,
   then enters the working directory and looks the program up on the worker's PATH
   as the member: a program the member cannot reach is "not found" (exit 127).

The command runs under a keeper of its own (:mod:`runner.executors.execwrap`), a child
subreaper: whatever the command starts stays below it, also what leaves its session,
and all of it is ended with the command, or when :meth:`ProcessSession.kill` asks the
keeper (the API does when the session closes or the run stops running). The keeper is
signalled only while it is not yet reaped: a reaped pid may be anyone's.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path

from runner.executors.base import ExecutorError
from runner.executors.cgroupfs import WorkerGroup
from runner.executors.tree import is_alive
from runner.executors.workerfiles import META, read_json, write_json_atomic
from runner.sessions import STDERR, STDOUT, EnterRequest

ENTER = "enter.json"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
CLONE_NEWNS = 0x00020000
PR_SET_NO_NEW_PRIVS = 38
READ = 65536


class ProcessSession:
    """The command's pipes (or its terminal's master end) and its process."""

    def __init__(
        self, proc: subprocess.Popen[bytes], outputs: dict[int, int], stdin: int, tty: bool
    ) -> None:
        self.proc, self._outputs, self._stdin, self._tty = proc, dict(outputs), stdin, tty
        self._reaped = False  # from then on the pid may be another process's: never signalled
        self._lock = threading.Lock()

    def read(self) -> tuple[int, bytes]:
        while self._outputs:
            ready, _, _ = select.select(list(self._outputs), [], [])
            fd = ready[0]
            try:
                data = os.read(fd, READ)
            except OSError:  # a terminal whose last holder closed it: EIO
                data = b""
            if data:
                return self._outputs[fd], data
            del self._outputs[fd]
            if not (self._tty and fd == self._stdin):
                os.close(fd)
        return STDOUT, b""

    def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the command closed its input or ended
            view = memoryview(data)
            while view:
                view = view[os.write(self._stdin, view) :]

    def close_stdin(self) -> None:
        if not self._tty:
            with contextlib.suppress(OSError):
                os.close(self._stdin)

    def resize(self, rows: int, cols: int) -> None:
        if self._tty:
            with contextlib.suppress(OSError):
                size = struct.pack("HHHH", max(rows, 1), max(cols, 1), 0, 0)
                fcntl.ioctl(self._stdin, termios.TIOCSWINSZ, size)

    def wait(self) -> int:
        # the keeper ends what the command left before it exits; it is reaped only once
        # it has (until then its pid is still ours to signal)
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        with self._lock:
            code = self.proc.wait()
            self._reaped = True
        if self._tty:
            with contextlib.suppress(OSError):
                os.close(self._stdin)
        return 128 - code if code < 0 else code

    def kill(self) -> None:
        """Ask the keeper to end the command and all below it (it does, then exits)."""
        with self._lock:
            if not self._reaped:
                with contextlib.suppress(OSError):
                    os.kill(self.proc.pid, signal.SIGTERM)


def write_enter(folder: Path, job: dict[str, object]) -> None:
    """Keep what ``astra exec`` needs of the launch (the supervisor deletes its copy)."""
    keep = ("env", "cwd", "folder", "uid", "gid", "groups", "sandbox", "cgroup")
    write_json_atomic(folder / ENTER, {k: job[k] for k in keep})


def enter(folder: Path, request: EnterRequest) -> ProcessSession:
    """Run ``request.argv`` inside the worker whose folder is ``folder``."""
    launch, meta = read_json(folder / ENTER), read_json(folder / META)
    if launch is None or meta is None:
        raise ExecutorError("the worker was started before exec was possible, or is starting")
    pid, start = meta.get("child_pid"), meta.get("child_start")
    if not isinstance(pid, int) or not is_alive(pid, start):
        raise ExecutorError("the worker's command is no longer running")
    namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY) if meta.get("sandboxed") else None
    try:
        return _spawn(request, launch, namespace)
    finally:
        if namespace is not None:
            os.close(namespace)


def _spawn(
    request: EnterRequest, launch: dict[str, object], namespace: int | None
) -> ProcessSession:
    listed = launch.get("env")
    env = {str(k): str(v) for k, v in listed.items()} if isinstance(listed, dict) else {}
    uid, gid = launch.get("uid"), launch.get("gid")
    # where the worker started: its folder (--chdir, or where it was submitted), else home
    cwd = launch.get("folder") or launch.get("cwd") or "/tmp"
    job = {"argv": list(request.argv), "env": env, "cwd": str(cwd),
           "uid": uid, "gid": gid, "groups": launch.get("groups") or [], "tty": request.tty,
           "namespace": namespace, "cgroup": launch.get("cgroup")}  # fmt: skip
    if request.tty:
        master, slave = os.openpty()
        size = struct.pack("HHHH", request.rows, request.cols, 0, 0)
        fcntl.ioctl(master, termios.TIOCSWINSZ, size)
        streams, ours = {"stdin": slave, "stdout": slave, "stderr": slave}, [master]
    else:
        (in_read, in_write), (out_read, out_write), (err_read, err_write) = (
            os.pipe(), os.pipe(), os.pipe()
        )  # fmt: skip
        streams = {"stdin": in_read, "stdout": out_write, "stderr": err_write}
        ours = [in_write, out_read, err_read]
    try:
        proc = _keeper(job, streams)
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in set(streams.values()):
            os.close(fd)
    if request.tty:
        return ProcessSession(proc, {master: STDOUT}, master, tty=True)
    return ProcessSession(proc, {out_read: STDOUT, err_read: STDERR}, in_write, tty=False)


def _keeper(job: dict[str, object], streams: dict[str, int]) -> subprocess.Popen[bytes]:
    """Start the command's keeper (runner.executors.execwrap) on the session's streams."""
    namespace = job["namespace"]
    env = {"PYTHONPATH": _PACKAGE_ROOT, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    # the job (the worker's environment: tokens, keys) in a memory file only this keeper
    # holds: a command line is anyone's to read in /proc
    held = os.memfd_create("astraeus-exec-job", os.MFD_CLOEXEC)
    try:
        os.write(held, json.dumps(job).encode())
        os.lseek(held, 0, os.SEEK_SET)
        argv = [sys.executable, "-S", "-P", "-m", "runner.executors.execwrap", str(held)]
        passed = (held,) if not isinstance(namespace, int) else (held, namespace)
        return subprocess.Popen(
            argv, env=env, cwd="/", start_new_session=True, close_fds=True, pass_fds=passed,
            stdin=streams["stdin"], stdout=streams["stdout"], stderr=streams["stderr"],
        )  # fmt: skip
    except OSError as e:
        raise ExecutorError(f"cannot start the exec's keeper: {e.strerror}") from e
    finally:
        os.close(held)


def child_setup(
    namespace: int | None,
    uid: object,
    gid: object,
    cwd: str,
    tty: bool,
    groups: object = (),
    group: WorkerGroup | None = None,
) -> Callable[[], None]:
    """What the forked child does before it runs the member's program (module doc); first
    of all, as root, it joins the worker's cgroup (``group``)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def setup() -> None:
        if group is not None:
            group.join()
        if namespace is not None and libc.setns(namespace, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "cannot join the worker's mount namespace")
        if tty:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if isinstance(uid, int) and isinstance(gid, int):
            os.setgroups(
                [g for g in groups if isinstance(g, int)] if isinstance(groups, list) else []
            )
            os.setgid(gid)
            os.setuid(uid)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot set no-new-privileges")
        try:
            os.chdir(cwd)
        except OSError:
            os.chdir("/tmp")

    return setup
