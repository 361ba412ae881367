"""``astra exec``: who may run a command inside a run's worker, and the open sessions.

Only the run's owner and admins may (as Slurm lets only a job's owner and root
attach a step): a member of the same workspace may read the run's logs but not act
as its owner inside it. The run must be Running, the worker live. One user holds at
most :data:`MAX_SESSIONS` sessions at once; a session ends when its command ends,
when the caller goes away, or when the run stops running (the API watches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from runner.executors.base import ExecutorError
from runner.model import RunSpec, RunState, WorkerState
from runner.service.caller import Caller, ServiceError
from runner.service.reads import Reads
from runner.sessions import MAX_ARGV, MAX_ARGV_CHARS, EnterRequest, Session
from runner.store.db import RunRow, WorkerRow

MAX_SESSIONS = 8  # exec sessions one user may hold at once
NOT_OWNER = "only the run's owner or an admin may run commands inside it"


@dataclass(frozen=True)
class Entry:
    """An open session: in which run's worker (by the run's id), for whom."""

    run: str
    run_uid: str
    worker: int
    handle: str
    uid: int
    session: Session


class Entries:
    """The exec sessions open now, bounded per user."""

    def __init__(
        self,
        reads: Reads,
        enter: Callable[[str, EnterRequest], Session],
        terminal: Callable[[str], Session],
        specs: Callable[[RunRow], RunSpec],
    ) -> None:
        self.reads, self._enter, self._terminal, self.specs = reads, enter, terminal, specs
        self._open: dict[int, int] = {}  # uid: sessions held
        self._entries: dict[int, Entry] = {}  # the sessions open, by id
        self._lock = threading.Lock()

    def open(self, caller: Caller, name: str, worker: int | None, request: EnterRequest) -> Entry:
        """Start ``request`` in the run's worker (its first live one by default)."""
        _check_argv(request.argv)
        run = self.reads.get_run(caller, name)
        if not (caller.admin or run.uid == caller.uid):
            raise ServiceError(403, "FORBIDDEN", NOT_OWNER)
        if run.state is not RunState.RUNNING:
            raise ServiceError(409, "NOT_RUNNING", f"run {name} is {run.state}, not Running")
        live = [
            w
            for w in self.reads.workers_of(run.name)
            if w.state is WorkerState.RUNNING and w.handle and w.run_uid == run.run_uid
        ]
        chosen = [w for w in live if worker is None or w.worker == worker]
        if not chosen:
            which = f"worker {worker}" if worker is not None else "a worker"
            raise ServiceError(409, "NOT_RUNNING", f"run {name} has no running {which}")
        target = min(chosen, key=lambda w: w.worker)
        return self._opened(caller, run, target, lambda h: self._enter(h, request))

    def interactive_run(self, caller: Caller, name: str) -> RunRow:
        """The interactive run ``caller`` may take the terminal of (as exec's rule)."""
        run = self.reads.get_run(caller, name)
        if not (caller.admin or run.uid == caller.uid):
            raise ServiceError(403, "FORBIDDEN", NOT_OWNER)
        if not self.specs(run).interactive:
            raise ServiceError(409, "NOT_INTERACTIVE", f"run {name} is not interactive")
        if run.state in RunState.FINISHED:
            raise ServiceError(409, "NOT_RUNNING", f"run {name} is {run.state}")
        return run

    def attach(self, caller: Caller, run: RunRow) -> Entry:
        """Attach to the started interactive run's terminal."""
        live = [
            w
            for w in self.reads.workers_of(run.name)
            if w.state is WorkerState.RUNNING and w.handle and w.run_uid == run.run_uid
        ]
        if not live:
            raise ServiceError(409, "NOT_RUNNING", f"run {run.name} has no running worker")
        return self._opened(caller, run, live[0], self._terminal)

    def _opened(
        self, caller: Caller, run: RunRow, worker: WorkerRow, start: Callable[[str], Session]
    ) -> Entry:
        """A session of ``caller``'s in ``worker``, counted against its bound."""
        self._take(caller.uid)
        try:
            session = start(worker.handle or "")
        except ExecutorError as e:
            self._give_back(caller.uid)
            raise ServiceError(409, "CANNOT_ENTER", str(e)) from e
        entry = Entry(
            run.name, run.run_uid, worker.worker, worker.handle or "", caller.uid, session
        )
        with self._lock:
            self._entries[id(entry)] = entry
        return entry

    def still_running(self, entry: Entry) -> bool:
        """Whether the session's run still runs that worker (else the session is ended)."""
        run = self.reads.run_now(entry.run)
        if run is None or run.run_uid != entry.run_uid or run.state is not RunState.RUNNING:
            return False
        return any(
            w.handle == entry.handle and w.state is WorkerState.RUNNING
            for w in self.reads.workers_of(entry.run)
        )

    def close(self, entry: Entry) -> None:
        entry.session.kill()
        with self._lock:
            known = self._entries.pop(id(entry), None) is not None
        if known:
            self._give_back(entry.uid)

    def close_all(self) -> None:
        """The daemon stops: every command it runs inside a worker ends with it."""
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            self.close(entry)

    def _take(self, uid: int) -> None:
        with self._lock:
            held = self._open.get(uid, 0)
            if held >= MAX_SESSIONS:
                raise ServiceError(
                    429, "TOO_MANY_SESSIONS", f"at most {MAX_SESSIONS} exec sessions at once"
                )
            self._open[uid] = held + 1

    def _give_back(self, uid: int) -> None:
        with self._lock:
            self._open[uid] = max(self._open.get(uid, 1) - 1, 0)


def _check_argv(argv: tuple[str, ...]) -> None:
    if not argv:
        raise ServiceError(422, "INVALID_REQUEST", "exec: a command is needed")
    if len(argv) > MAX_ARGV or sum(len(a) for a in argv) > MAX_ARGV_CHARS:
        raise ServiceError(
            422,
            "INVALID_REQUEST",
            f"exec: at most {MAX_ARGV} arguments and {MAX_ARGV_CHARS} characters together",
        )
    if any("\0" in a for a in argv):
        raise ServiceError(422, "INVALID_REQUEST", "exec: an argument must not contain NUL")
