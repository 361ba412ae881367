"""The supervisor of one process worker: ``python -S -P -m runner.executors.supervise FOLDER``.

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
   worker's uid:gid first (:mod:`runner.executors.member`), never as root; this happens before the
   supervisor starts any thread, so the fork is safe. The command's stdout and stderr
   are one pipe, which a thread of the supervisor copies into the log within
   ``log_limit`` and ``log_reserve`` (:mod:`runner.executors.logcap`): the command never
   waits on the disk. Under bubblewrap the command gets its own session again
   (``--new-session``), so a group signal reaches the command and its children, never
   bubblewrap itself. An interactive worker's command (``astra run -it``) gets a
   pseudo-terminal instead of the pipe, as its input too, and keeps it as its
   controlling terminal (no ``--new-session``): :mod:`runner.executors.terminal`.
4. It writes ``meta.json`` (atomically), then reports "started": the worker really runs.
   A command that cannot be executed is not an error of the start: it exits at once with
   127 (not found) or 126 (not executable) and says why in ``exit.json``.
5. It waits for the command, reaping meanwhile the orphans reparented to it.
6. When the command exits, whatever it leaves behind, in its process group or not (a
   child that called ``setsid()``, a double-forked daemon), gets SIGKILL at once, as a
   container's processes do when its first process exits; the supervisor reaps them
   all. Except during a stop (the executor sends the supervisor SIGTERM with its
   worker's): every process then has the whole grace, also when the first one (a shell
   that does not ``exec``) ended at once; the supervisor waits for the others to end,
   and the executor's SIGKILL at the grace's end ends any left. Only then, once the
   output is in the log, does it write ``exit.json``: ``{"exit_code", "signal",
   "finished_at", "error"}``, with the command's status, where a command killed by
   signal N exits with 128 + N. It is written over the room taken in
   step 3 (in place, then renamed), so a full disk cannot lose an exit; a write the disk
   still refuses is retried, the worker meanwhile seen running. So a worker reported
   exited has no process left, and one with a process left (stuck in the kernel, say)
   still runs. A process it may not signal (one that took other credentials through a
   setuid program) is left running and named in ``supervisor.log``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import os
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from runner import plainjson
from runner.executors.cgroupfs import OUT_OF_MEMORY, WorkerGroup
from runner.executors.logcap import CappedLog
from runner.executors.tree import descendants, kill_descendants, proc_stat
from runner.executors.workerfiles import (
    LAUNCH,
    META,
    SUPERVISOR_LOG,
    Job,
    reserve_exit,
    write_exit,
    write_json_atomic,
)
from runner.oneline import one_line

RELAY_CHUNK = 1 << 16
RELAY_WAIT = 10.0  # seconds the exit waits for the last output (a writer it may not kill)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)


# -- the supervisor -----------------------------------------------------------------------


class _Running(NamedTuple):
    proc: subprocess.Popen[bytes]
    pid: int  # the command (under bubblewrap: bubblewrap's child)
    pgid: int


class _NotRunning(NamedTuple):
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
        reserve_exit(folder)
        log = _open_log(job)
        job, refused, missing = _prepared(job, log)  # forks: before any thread starts
        if refused is not None:  # a --chdir folder it cannot enter: the start fails
            _tell(ready, refused.error or "cannot enter the working directory")
            return 1
        output, into = os.openpty() if job.interactive else os.pipe()
        try:
            outcome = missing or _spawn(job, into)
        finally:
            os.close(into)
        if job.interactive:  # a terminal: its output to the log and to whoever attaches
            from runner.executors.terminal import TerminalRelay  # only then: off the start's path

            relay = TerminalRelay(output, log, folder).start()
        else:
            relay = _relay_output(output, log)
        _write_meta(folder, job, outcome)
    except Exception as exc:
        import traceback  # only here: off the start's path

        traceback.print_exc()
        _tell(ready, one_line(exc))
        return 1
    if isinstance(outcome, _NotRunning):
        relay.join(RELAY_WAIT)
        write_exit(folder, outcome.exit_code, None, outcome.error)
        _tell(ready, "ok")
        return 0
    abandoned = not _tell(ready, "ok")
    if abandoned:  # the executor stopped waiting: it will not track this worker
        kill_descendants(os.getpid())
    code, signum = _wait_reaping(outcome.proc)
    if _STOPPING:
        _outlast_leftovers()
    _end_leftovers()
    why = _out_of_memory(job, code)
    relay.join(RELAY_WAIT)  # the last output is in the log before the exit is told
    write_exit(folder, code, signum, "the start was abandoned" if abandoned else why)
    return 0


def _become_subreaper() -> None:
    """Orphans of the command are reparented to the supervisor, so none escapes it."""
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot become a child subreaper: {os.strerror(err)}")


_STOPPING: list[bool] = []  # set once the executor said a stop began (its SIGTERM)


def _ignore(signum: int, frame: object) -> None:
    """The supervisor outlives stop signals; only its worker should get them. A SIGTERM
    says a stop began: the command's leftovers get their grace (step 6)."""
    if signum == signal.SIGTERM and not _STOPPING:
        _STOPPING.append(True)


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


def _prepared(
    job: Job, log: CappedLog | None
) -> tuple[Job, _NotRunning | None, _NotRunning | None]:
    """What is done as the member before the command starts, in one child that dropped to
    it (never as root): enter the folder it starts in, then place its drives and look its
    program up from there under bubblewrap. Returns the job with its folder and its
    bubblewrap command line; a --chdir folder it cannot enter (the start fails); and a
    program that is not there (it exits 127, as bubblewrap's own exit would not say).

    ``job.folder`` if the member can enter it, else its home (``job.cwd``), its log's
    first line saying so; a folder named by --chdir that cannot be entered fails the start.
    """
    if not job.folder and not job.sandbox:
        return job, None, None
    from runner.executors.member import as_member

    if job.sandbox:
        # imported only for drives and hidden GPUs, and here, as root: the child that
        # drops to the member reads no file of this package
        from runner.executors.sandbox import load_rules

        load_rules()
    if job.uid is None:  # the supervisor is the member already
        answer = _as_the_member(job)
    else:
        try:
            answer = as_member(job, lambda: _as_the_member(job))
        except Exception as exc:  # a placement refused: one line, the start fails
            if not job.sandbox:
                answer = {"entered": one_line(exc)}
            else:
                raise
    why = answer.get("entered")
    if isinstance(why, str):
        if job.folder_asked:
            error = f"cannot enter the working directory {job.folder}: {why}"
            return job, _NotRunning(126, error), None
        if log is not None:
            log.write(f"[astraeus: cannot enter the submit folder {job.folder} ({why}):"
                      f" started in {job.cwd}]\n".encode())  # fmt: skip
    elif job.folder:
        job = job._replace(cwd=job.folder)
    if not job.sandbox:
        return job, None, None
    sandbox = answer["sandbox"]
    job = job._replace(sandbox=[str(a) for a in sandbox] if isinstance(sandbox, list) else [])
    found = answer["found"]
    return job, None, None if found else _NotRunning(127, f"command not found: {job.argv[0]}")


def _as_the_member(job: Job) -> dict[str, object]:
    """As the member: enter its folder (``entered``: True, or why not), then, from the
    folder it will start in, place its drives and look its program up."""
    entered: bool | str = True
    if job.folder:
        try:
            os.chdir(job.folder)
        except OSError as exc:
            entered = exc.strerror or type(exc).__name__  # "Permission denied"
        finally:
            with contextlib.suppress(OSError):
                os.chdir("/")
    if entered is True and job.folder:
        job = job._replace(cwd=job.folder)
    if entered is not True and job.folder_asked:
        return {"entered": entered}
    return {"entered": entered, **(_place(job) if job.sandbox else {})}


def _place(job: Job) -> dict[str, object]:
    from runner.executors.sandbox import program_exists, sandbox_args  # imported: _prepared

    args, mapping = sandbox_args(job.sandbox[0], job.drives, job.hidden)
    path = job.env.get("PATH", "")
    return {"sandbox": args, "found": program_exists(job.argv[0], job.cwd, path, mapping)}


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
        # an interactive command keeps the terminal as its controlling one: no new session
        placing = [a for a in job.sandbox[1:] if not (job.interactive and a == "--new-session")]
        argv = [job.sandbox[0], "--info-fd", str(info_write), *placing, "--", *argv]
    try:
        proc = _popen(job, argv, output, () if info_write < 0 else (info_write,))
    except OSError as exc:
        return _not_started(job, exc)
    except subprocess.SubprocessError:  # the child could not enter its folder (it moved)
        return _NotRunning(126, f"cannot enter the working directory {job.cwd}")
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


def _out_of_memory(job: Job, code: int) -> str | None:
    """``ran out of memory (asked 100MiB; its peak 100MiB)`` when the kernel's OOM killer
    ended a process of the worker's cgroup; and what the command left there is ended."""
    group = WorkerGroup.from_json(job.cgroup)
    if group is None:
        return None
    if group.pids():
        group.kill()
    if code == 0 or not group.oom_kills():
        return None
    from runner.model import format_size

    peak = group.memory_peak()
    shown = f"; its peak {format_size(peak)}" if peak else ""
    return f"{OUT_OF_MEMORY} (asked {format_size(job.memory)}{shown})"


def _popen(
    job: Job, argv: list[str], output: int, pass_fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    group = WorkerGroup.from_json(job.cgroup)
    identity: dict[str, Any] = {}
    if job.uid is not None and group is None:
        identity = {"user": job.uid, "group": job.gid, "extra_groups": job.groups}
    drop = None if job.uid is None or group is None else (job.uid, job.gid, list(job.groups))
    return subprocess.Popen(
        argv,
        stdin=output if job.interactive else subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        env=job.env,
        start_new_session=True,
        pass_fds=pass_fds,
        preexec_fn=_child_setup(
            os.getpid(),
            no_new_privs=not job.sandbox,
            tty=job.interactive,
            cwd=job.cwd,
            group=group,
            drop=drop,
        ),
        **identity,
    )


def _child_setup(
    parent: int,
    *,
    no_new_privs: bool,
    tty: bool = False,
    cwd: str = "/",
    group: WorkerGroup | None = None,
    drop: tuple[int, int | None, list[int]] | None = None,
) -> Callable[[], None]:
    """Runs in the child before it runs the command: die with the supervisor; join the
    worker's cgroup and only then drop to the member (``drop``: uid, gid, groups; without
    a cgroup subprocess switched before this runs), so the command is in its cgroup from
    its first instruction and the supervisor never is; gain no privileges; an interactive
    command's terminal (its standard input) becomes its controlling one; enter ``cwd``,
    as the member (subprocess's own ``cwd`` is entered before the switch).

    Under bubblewrap no-new-privileges is left to bubblewrap (a setuid bwrap needs it off).
    """

    def setup() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the line above
            os._exit(1)
        if group is not None:
            group.join()
        if drop is not None:
            uid, gid, groups = drop
            os.setgroups(groups)
            if gid is not None:
                os.setgid(gid)
            os.setuid(uid)
        if no_new_privs:
            _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if tty:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        os.chdir(cwd)

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
        pid = plainjson.loads(b"".join(chunks))["child-pid"]
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


def _outlast_leftovers() -> None:
    """During a stop: wait, reaping, until every process the command left has ended (in
    the grace, or by the executor's SIGKILL at its end)."""
    delay = 0.01
    while descendants(os.getpid()):
        _reap()
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


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
        "cgroup": job.cgroup,  # the executor's stops reach every process in it
        "started_at": time.time(),
    }
    write_json_atomic(folder / META, meta)


# -- the launcher: this interpreter kept warm for the next start ---------------------------


def launcher(state_dir: str) -> int:
    """``--launcher STATE_DIR``: start a supervisor for each worker folder named on stdin.

    Each line is a folder of ``state_dir`` (runner/executors/launcher.py writes them). For
    each, a fork of this interpreter, its imports made already, becomes what ``python -S
    -P -m runner.executors.supervise FOLDER`` would be: a session of its own, stdin from
    /dev/null, stdout and stderr appended to the folder's ``supervisor.log``; the answer,
    on stdout, is its pid and then its exit status (the relay's: 0 once the command runs).
    One start at a time, each answered whole before the next line is read; at the end of
    stdin (the daemon is gone) it exits, after the start in hand."""
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(0, 4096)
            if not chunk:
                return 0
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        folder = os.fsdecode(line)
        if os.path.dirname(folder) != state_dir:  # only a worker folder of its own
            _answer(b"refused\n")
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            raise SystemExit(_launched(folder))  # as the interpreter of one supervisor
        _answer(b"%d\n" % pid)
        _, status = os.waitpid(pid, 0)
        _answer(b"%d\n" % os.waitstatus_to_exitcode(status))


def _launched(folder: str) -> int:
    """In the launcher's fork: the supervisor of ``folder``, as if started on its own."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(os.path.join(folder, SUPERVISOR_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                  0o666)  # fmt: skip
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    return main(["", folder])


def _answer(word: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):  # the daemon is gone: the start goes on
        os.write(1, word)


if __name__ == "__main__":
    with contextlib.suppress(ImportError):  # started with -S (process.py): site's hook stays
        importlib.import_module("sitecustomize")
    if sys.argv[1:2] == ["--launcher"]:
        sys.exit(launcher(sys.argv[2]))
    sys.exit(main(sys.argv))
