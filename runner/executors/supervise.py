"""The supervisor of one process worker: ``python -P -m runner.executors.supervise FOLDER``.

:class:`runner.executors.process.ProcessExecutor` writes ``FOLDER/launch.json`` and starts
this module in a session of its own, so the worker outlives a daemon killed with -9. Steps:

1. Read (and delete: it holds the worker's environment) ``launch.json``.
2. Fork. The first process only relays "started" or one error line back to the executor
   (its exit status and the last line of ``supervisor.log``), then exits; the second one,
   reparented away from the daemon, is the supervisor proper.
3. The supervisor ignores SIGTERM/SIGINT/SIGHUP, becomes a child subreaper (orphans of
   the command are reparented to it, see :mod:`runner.executors.tree`), takes the room for
   ``exit.json`` (``.exit.reserved``), opens the worker's log (appending, owned by the
   worker), and spawns the command in a session and process group of its own, as the
   worker's uid:gid when asked, with no-new-privileges, dying if the supervisor dies.
   Drives are placed, and the program looked up, by a child that has dropped to the
   worker's uid:gid first (:func:`as_member`), never as root; this happens before the
   supervisor starts any thread, so the fork is safe. The command's stdout and stderr
   are one pipe, which a thread of the supervisor copies into the log within
   ``log_limit`` and ``log_reserve`` (:mod:`runner.executors.logcap`): the command never
   waits on the disk. Under bubblewrap the command gets its own session again
   (``--new-session``), so a group signal reaches the command and its children, never
   bubblewrap itself.
4. It writes ``meta.json`` (atomically), then reports "started": the worker really runs.
   A command that cannot be executed is not an error of the start: it exits at once with
   127 (not found) or 126 (not executable) and says why in ``exit.json``.
5. It waits for the command, reaping meanwhile the orphans reparented to it.
6. When the command exits, whatever it leaves behind, in its process group or not (a
   child that called ``setsid()``, a double-forked daemon), gets SIGKILL at once, as a
   container's processes do when its first process exits; the supervisor reaps them
   all. Only then, once the output is in the log, does it write ``exit.json``:
   ``{"exit_code", "signal", "finished_at", "error"}``, with the command's status, where a
   command killed by signal N exits with 128 + N. It is written over the room taken in
   step 3 (in place, then renamed), so a full disk cannot lose an exit; a write the disk
   still refuses is retried, the worker meanwhile seen running. So a worker reported
   exited has no process left, and one with a process left (stuck in the kernel, say)
   still runs. A process it may not signal (one that took other credentials through a
   setuid program) is left running and named in ``supervisor.log``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.executors.logcap import CappedLog
from runner.executors.sandbox import PlacementError, program_exists, sandbox_args
from runner.executors.tree import descendants, kill_descendants, proc_stat

META = "meta.json"
PLACE_TIMEOUT = 5.0  # seconds the member's child may take to place the drives
EXIT = "exit.json"
LAUNCH = "launch.json"
SUPERVISOR_LOG = "supervisor.log"
EXIT_RESERVED = ".exit.reserved"  # the room for exit.json, taken when the worker starts
EXIT_ROOM = 4096
RELAY_CHUNK = 1 << 16
RELAY_WAIT = 10.0  # seconds the exit waits for the last output (a writer it may not kill)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)


# -- shared with the executor -------------------------------------------------------------


def write_json_atomic(path: Path, data: Mapping[str, object]) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The object in ``path``; None when it is absent or not a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- the supervisor -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """What ``launch.json`` asks for; built by the executor."""

    run: str
    attempt: int
    worker: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    uid: int | None  # None: run as the supervisor's own user
    gid: int | None
    log_path: str
    sandbox: list[str]  # bubblewrap (then its command line without "--info-fd", "--"); or []
    drives: list[tuple[str, str, bool]]  # (host source, mount path, read-only)
    log_limit: int = 0  # bytes; 0: none (see runner.executors.logcap)
    log_reserve: int = 0  # bytes kept free on the log's file system; 0: none

    @classmethod
    def load(cls, path: Path) -> Job:
        data = read_json(path)
        if data is None:
            raise ValueError(f"{path} is missing or unreadable")
        path.unlink()
        data["drives"] = [tuple(d) for d in data.get("drives", [])]
        return cls(**data)


@dataclass(frozen=True, slots=True)
class _Running:
    proc: subprocess.Popen[bytes]
    pid: int  # the command (under bubblewrap: bubblewrap's child)
    pgid: int


@dataclass(frozen=True, slots=True)
class _NotRunning:
    exit_code: int
    error: str


def main(argv: list[str]) -> int:
    folder = Path(argv[1])
    job = Job.load(folder / LAUNCH)
    read_end, write_end = os.pipe()
    if os.fork() != 0:
        os.close(write_end)
        os._exit(_relay(read_end))
    os.close(read_end)
    os.chdir("/")
    return _supervise(job, folder, write_end)


def _relay(read_end: int) -> int:
    """Wait for the supervisor's first word: "ok", or one line saying why not."""
    chunks = []
    while chunk := os.read(read_end, 4096):
        chunks.append(chunk)
    word = b"".join(chunks).decode(errors="replace").strip()
    if word == "ok":
        return 0
    print(word or "the worker's supervisor stopped before the worker started", file=sys.stderr)
    sys.stderr.flush()
    return 1


def _supervise(job: Job, folder: Path, ready: int) -> int:
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop, _ignore)  # a handler, not SIG_IGN: exec resets it
    try:
        _become_subreaper()
        _reserve_exit(folder)
        log = _open_log(job)
        job, missing = _placed(job)  # forks: before any thread of the supervisor starts
        output, into = os.pipe()
        try:
            outcome = missing or _spawn(job, into)
        finally:
            os.close(into)
        relay = _relay_output(output, log)
        _write_meta(folder, job, outcome)
    except Exception as exc:
        traceback.print_exc()
        _tell(ready, " ".join(str(exc).split()) or type(exc).__name__)
        return 1
    if isinstance(outcome, _NotRunning):
        relay.join(RELAY_WAIT)
        _write_exit(folder, outcome.exit_code, None, outcome.error)
        _tell(ready, "ok")
        return 0
    abandoned = not _tell(ready, "ok")
    if abandoned:  # the executor stopped waiting: it will not track this worker
        kill_descendants(os.getpid())
    code, signum = _wait_reaping(outcome.proc)
    _end_leftovers()
    relay.join(RELAY_WAIT)  # the last output is in the log before the exit is told
    _write_exit(folder, code, signum, "the start was abandoned" if abandoned else None)
    return 0


def _become_subreaper() -> None:
    """Orphans of the command are reparented to the supervisor, so none escapes it."""
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot become a child subreaper: {os.strerror(err)}")


def _ignore(signum: int, frame: object) -> None:
    """The supervisor outlives stop signals; only its worker should get them."""


def _tell(ready: int, word: str) -> bool:
    try:
        os.write(ready, word.encode() + b"\n")
    except OSError:
        return False
    finally:
        os.close(ready)
    return True


def _open_log(job: Job) -> CappedLog | None:
    """The worker's log, bounded; None for /dev/null (output is read and dropped)."""
    path = Path(job.log_path)
    if str(path) == os.devnull:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    owner = None if job.uid is None else (job.uid, job.gid if job.gid is not None else -1)
    return CappedLog(path, job.log_limit, job.log_reserve, owner)


def _placed(job: Job) -> tuple[Job, _NotRunning | None]:
    """The job with its drives' bubblewrap command line, worked out as the member.

    Also whether the program exists in the sandbox (bubblewrap's own exit would not say):
    as the member too, so a path only root can look into answers the same either way.
    """
    if not job.sandbox:
        return job, None
    placed = as_member(job, lambda: _place(job))
    sandbox, found = placed["sandbox"], placed["found"]
    job = dataclasses.replace(job, sandbox=[str(a) for a in sandbox])
    return job, None if found else _NotRunning(127, f"command not found: {job.argv[0]}")


def _place(job: Job) -> dict[str, object]:
    args, mapping = sandbox_args(job.sandbox[0], job.drives)
    path = job.env.get("PATH", "")
    return {"sandbox": args, "found": program_exists(job.argv[0], job.cwd, path, mapping)}


def as_member(job: Job, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()`` in a child that is the job's uid:gid with no supplementary groups.

    Its answer comes back as JSON; a PlacementError's (or any error's) one line is raised
    here as a PlacementError. The supervisor is single-threaded, so fork is safe.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _answer_as_member(job, work, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    data = _read_within(read_end, pid, PLACE_TIMEOUT)
    try:
        answer = json.loads(data)
    except ValueError:
        raise PlacementError("the drives could not be placed (no answer)") from None
    if "ok" not in answer:
        raise PlacementError(str(answer.get("error")))
    ok: dict[str, Any] = answer["ok"]
    return ok


def _read_within(read_end: int, pid: int, timeout: float) -> bytes:
    """The child's whole answer, or PlacementError once ``timeout`` s pass (a mount path on
    a file system that does not answer, a member's own FUSE mount): the child is killed,
    and the start fails instead of hanging."""
    deadline, chunks = time.monotonic() + timeout, list[bytes]()
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 65536)
            if not chunk:
                os.waitpid(pid, 0)
                return b"".join(chunks)
            chunks.append(chunk)
        os.kill(pid, signal.SIGKILL)
        _reap_within(pid, 1.0)
        raise PlacementError(
            f"the drives could not be placed within {timeout:g} s: a mount path's file"
            " system does not answer"
        )
    finally:
        os.close(read_end)


def _reap_within(pid: int, timeout: float) -> None:
    """Reap a killed child, waiting at most ``timeout`` s (one stuck in the kernel stays a
    zombie until the supervisor exits, rather than hold up the start)."""
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)


def _answer_as_member(job: Job, work: Callable[[], dict[str, Any]], write_end: int) -> None:
    try:
        if job.uid is not None:
            os.setgroups([])
            os.setgid(job.gid if job.gid is not None else job.uid)
            os.setuid(job.uid)
        answer: dict[str, Any] = {"ok": work()}
    except Exception as exc:
        answer = {"error": " ".join(str(exc).split()) or type(exc).__name__}
    with os.fdopen(write_end, "wb") as out:
        out.write(json.dumps(answer).encode())


def _relay_output(output: int, log: CappedLog | None) -> threading.Thread:
    """Copy the command's output (a pipe) into its log, until every writer has closed it.

    The command never waits on the disk: what the log refuses is dropped, and the pipe
    is read to its end whatever happens.
    """

    def relay() -> None:
        try:
            while chunk := os.read(output, RELAY_CHUNK):
                if log is not None:
                    log.write(chunk)
        finally:
            os.close(output)
            if log is not None:
                log.close()

    thread = threading.Thread(target=relay, name="output", daemon=True)
    thread.start()
    return thread


def _spawn(job: Job, output: int) -> _Running | _NotRunning:
    info_read, info_write = os.pipe() if job.sandbox else (-1, -1)
    argv = job.argv
    if job.sandbox:
        argv = [job.sandbox[0], "--info-fd", str(info_write), *job.sandbox[1:], "--", *argv]
    try:
        proc = _popen(job, argv, output, () if info_write < 0 else (info_write,))
    except OSError as exc:
        return _not_started(job, exc)
    finally:
        if info_write >= 0:
            os.close(info_write)
    if not job.sandbox:
        return _Running(proc, proc.pid, proc.pid)
    pid = _sandboxed_pid(info_read)
    if pid is None:
        code, _ = _wait(proc)
        return _NotRunning(code, "bubblewrap could not place the run's drives (see the log)")
    return _Running(proc, pid, _own_group(pid))


def _popen(
    job: Job, argv: list[str], output: int, pass_fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    identity: dict[str, Any] = {}
    if job.uid is not None:
        identity = {"user": job.uid, "group": job.gid, "extra_groups": []}
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        env=job.env,
        cwd=job.cwd,
        start_new_session=True,
        pass_fds=pass_fds,
        preexec_fn=_child_setup(os.getpid(), no_new_privs=not job.sandbox),
        **identity,
    )


def _child_setup(parent: int, *, no_new_privs: bool) -> Callable[[], None]:
    """Runs in the child after the uid switch: die with the supervisor; gain no privileges.

    Under bubblewrap no-new-privileges is left to bubblewrap (a setuid bwrap needs it off).
    """

    def setup() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the line above
            os._exit(1)
        if no_new_privs:
            _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)

    return setup


def _not_started(job: Job, exc: OSError) -> _NotRunning:
    if exc.filename == job.cwd:
        return _NotRunning(126, f"cannot enter the working directory {job.cwd}: {exc.strerror}")
    if isinstance(exc, FileNotFoundError):
        return _NotRunning(127, f"command not found: {job.argv[0]}")
    return _NotRunning(126, f"cannot execute {job.argv[0]}: {exc.strerror}")


def _sandboxed_pid(info_read: int) -> int | None:
    """The command's pid, from bubblewrap's ``--info-fd``; None when bubblewrap failed."""
    chunks = []
    with os.fdopen(info_read, "rb") as info:
        while chunk := info.read(4096):
            chunks.append(chunk)
    try:
        pid = json.loads(b"".join(chunks))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


def _own_group(pid: int, timeout: float = 5.0) -> int:
    """Wait until bubblewrap's child has made its own session (``--new-session``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.getpgid(pid) == pid:
                break
        except ProcessLookupError:
            break
        time.sleep(0.005)
    return pid


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, int | None]:
    """(exit code, signal): a command killed by signal N exits with 128 + N."""
    return _code(proc.wait())


def _wait_reaping(proc: subprocess.Popen[bytes]) -> tuple[int, int | None]:
    """Wait for the command as :func:`_wait` does, reaping reparented orphans meanwhile."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return _code(proc.returncode)


def _code(returncode: int) -> tuple[int, int | None]:
    return (128 - returncode, -returncode) if returncode < 0 else (returncode, None)


def _end_leftovers() -> None:
    """SIGKILL every process the command left behind and reap them all (step 6)."""
    if left := descendants(os.getpid()):
        print(f"ending {len(left)} process(es) the command left behind", file=sys.stderr)
    delay = 0.01
    while (ending := kill_descendants(os.getpid()))[0]:  # killed, but not ended yet
        _reap()
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    for why in ending[1]:
        print(f"left running, not allowed to signal it: {why}", file=sys.stderr)
    _reap()


def _reap() -> None:
    """Reap the children that have ended (orphans are reparented as their parents end)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _write_meta(folder: Path, job: Job, outcome: _Running | _NotRunning) -> None:
    me = proc_stat(os.getpid())
    running = isinstance(outcome, _Running)
    child = proc_stat(outcome.pid) if isinstance(outcome, _Running) else None
    meta = {
        "run": job.run,
        "attempt": job.attempt,
        "worker": job.worker,
        "supervisor_pid": os.getpid(),
        "supervisor_start": me[1] if me else None,
        "child_pid": outcome.pid if isinstance(outcome, _Running) else None,
        "child_pgid": outcome.pgid if isinstance(outcome, _Running) else None,
        "child_start": child[1] if child else None,
        "sandboxed": bool(job.sandbox) and running,
        "sandbox_pid": outcome.proc.pid if isinstance(outcome, _Running) and job.sandbox else None,
        "subreaper": True,  # every process of the worker descends from the supervisor
        "log_path": job.log_path,
        "started_at": time.time(),
    }
    write_json_atomic(folder / META, meta)


def _reserve_exit(folder: Path) -> None:
    """Take the room for ``exit.json`` now: a full disk later cannot lose the exit."""
    fd = os.open(folder / EXIT_RESERVED, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o600)  # fmt: skip
    try:
        os.write(fd, b" " * EXIT_ROOM)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_exit(folder: Path, code: int, signum: int | None, error: str | None) -> None:
    """Write ``exit.json``, into the room taken at the start; retried until it is written.

    The daemon sees the worker running while this supervisor lives and ``exit.json`` is
    not there, so an exit is never lost, only learned late, if the disk refuses it.
    """
    error = error[:1000] if error else error
    result = {"exit_code": code, "signal": signum, "finished_at": time.time(), "error": error}
    delay = 0.1
    while True:
        try:
            _fill_reserved(folder, json.dumps(result).encode())
            return
        except OSError as exc:
            print(f"cannot write {EXIT} into its reserved room: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError):
            write_json_atomic(folder / EXIT, result)
            return
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _fill_reserved(folder: Path, data: bytes) -> None:
    """Overwrite the reserved file in place (no new blocks, no new inode), then rename it."""
    if len(data) > EXIT_ROOM:
        raise OSError(f"{len(data)} bytes do not fit in {EXIT_ROOM}")
    fd = os.open(folder / EXIT_RESERVED, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.pwrite(fd, data + b" " * (EXIT_ROOM - len(data)), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(folder / EXIT_RESERVED, folder / EXIT)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
