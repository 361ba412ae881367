"""The API's streams: state changes (SSE), events and logs (NDJSON / text, followed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from runner.api.views import event_object, run_id, run_object
from runner.executors.logcap import read_cut
from runner.model import RunState
from runner.planner.estimates import Estimate
from runner.service.runs import Caller
from runner.store.db import RunRow

if TYPE_CHECKING:
    from runner.api.served import Daemon

POLL = 0.25
DIFF_GAP = 0.2  # seconds: changes within this are sent as one diff
ESTIMATE_LAG = 1.0  # seconds: a change is looked at again, for estimates computed after it


def run_objects(
    daemon: Daemon, runs: list[RunRow], caller: Caller, estimates: Mapping[str, Estimate]
) -> list[dict[str, Any]]:
    """The run objects of ``runs`` for ``caller``: live workers, the plan, estimates."""
    live = daemon.service.live_by_run()
    plan, now = daemon.backend.status.plan, daemon.backend.clock()
    return [
        run_object(
            r,
            daemon.backend.specs.get(r),
            caller.viewer,
            plan,
            live.get(r.name, ()),
            now,
            estimates.get(r.name),
        )
        for r in runs
    ]


class Changes:
    """Turns the loop's "something changed" into versioned diffs of run objects.

    Diffs are computed once (admin view), then each subscriber re-renders the
    changed runs for its own caller, so names stay anonymised per viewer.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.version = 0
        self.last: dict[str, dict[str, Any]] = {}  # admin view, by name
        self.subscribers: set[asyncio.Queue[tuple[int, list[str], list[str]] | None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self.estimates: Callable[[], Mapping[str, Estimate]] = dict  # set by build_app
        self._followed = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.daemon.backend.watch(self.notify_threadsafe)

    def close(self) -> None:
        """The daemon stops: every stream ends now, not at its next keep-alive."""
        for queue in list(self.subscribers):
            queue.put_nowait(None)

    def notify_threadsafe(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        if not self._pending:  # merge bursts of changes into one diff
            self._pending = True
            asyncio.get_running_loop().call_later(DIFF_GAP, self._compute)

    def _follow_up(self) -> None:
        if not self._pending:  # else a diff is on its way anyway
            self._pending = True
            self._compute(follow=False)
        self._followed = False

    def current(self, caller: Caller) -> dict[str, dict[str, Any]]:
        """Every active run's object for ``caller``, by the run's real name."""
        runs = self.daemon.service.list_runs(caller)
        objects = run_objects(self.daemon, runs, caller, self.estimates())
        return {r.name: o for r, o in zip(runs, objects, strict=True)}

    def _compute(self, follow: bool = True) -> None:
        self._pending = False
        if not self.subscribers:  # no one listens: nothing to diff (a subscriber starts
            return  # from a snapshot; upserts and removes of a stale diff are idempotent)
        if (
            follow and not self._followed
        ):  # estimates may lag the plan by their cache's gap: look again
            self._followed = True
            asyncio.get_running_loop().call_later(ESTIMATE_LAG, self._follow_up)
        admin = Caller(0, 0, "root", True, frozenset())
        now = self.current(admin)
        changed = [n for n, o in now.items() if self.last.get(n) != o]
        removed = [n for n in self.last if n not in now]
        self.last = now
        if not changed and not removed:
            return
        self.version += 1
        for queue in list(self.subscribers):
            queue.put_nowait((self.version, changed, removed))


async def sse(request: web.Request, changes: Changes, caller: Caller) -> web.StreamResponse:
    """``event: snapshot`` first (every active run), then ``event: change`` diffs."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})  # fmt: skip
    await response.prepare(request)
    queue: asyncio.Queue[tuple[int, list[str], list[str]] | None] = asyncio.Queue()
    changes.subscribers.add(queue)
    try:
        runs = list(changes.current(caller).values())
        await _send(response, "snapshot", {"version": changes.version, "runs": runs})
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), 15)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if item is None:
                break
            version, changed, removed = item
            objects = changes.current(caller)
            upsert = [objects[n] for n in changed if n in objects]
            gone = [_gone_id(changes, caller, n) for n in removed]
            await _send(response, "change", {"version": version, "upsert": upsert, "remove": gone})
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        changes.subscribers.discard(queue)
    return response


def _gone_id(changes: Changes, caller: Caller, name: str) -> str:
    workspace = changes.last.get(name, {}).get("workspace", "")
    return run_id(name, workspace, caller.viewer)


async def _send(response: web.StreamResponse, event: str, data: object) -> None:
    text = json.dumps(data, default=str)
    await response.write(f"event: {event}\ndata: {text}\n\n".encode())


async def follow_events(
    request: web.Request, daemon: Daemon, caller: Caller, run: str | None, after: int, follow: bool
) -> web.StreamResponse:
    """Events as NDJSON, one object a line; with ``follow`` it goes on until closed.

    Only those the caller may see (runner.service.reads.event_visible), followed or not."""
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    last = after
    try:
        while True:
            rows, last = await asyncio.to_thread(daemon.service.events_for, caller, run, last)
            for e in rows:
                line = json.dumps(event_object(e, caller.viewer)) + "\n"
                await response.write(line.encode())
            if not follow:
                break
            await asyncio.sleep(POLL)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response


def _log_files(daemon: Daemon, run: RunRow) -> list[Path]:
    return daemon.backend.log_files(run)  # by the run's id: never an earlier run's of that name


LOG_CHUNK = 1 << 20  # bytes read and sent at a time: a huge log never sits in memory


def _tail_start(paths: list[Path], lines: int) -> dict[Path, int]:
    """Positions (see :func:`_read_new`) from which the files, read in order, hold their
    last ``lines`` lines."""
    return {path: _position(path, at) for path, at in _tail_offsets(paths, lines).items()}


def _position(path: Path, offset: int) -> int:
    """The position in everything the worker wrote of byte ``offset`` of the file."""
    with path.open("rb") as f:
        cut, header = read_cut(f)
    return 0 if offset < header else cut + offset - header


def _tail_offsets(paths: list[Path], lines: int) -> dict[Path, int]:
    offsets = {p: p.stat().st_size for p in paths}
    wanted = lines + 1  # the newline before the first line shown
    for path in reversed(paths):
        with path.open("rb") as f:
            pos = offsets[path]
            while pos > 0 and wanted > 0:
                step = min(LOG_CHUNK, pos)
                f.seek(pos - step)
                block = f.read(step)
                count = block.count(b"\n")
                if count >= wanted:
                    cut = len(block)
                    for _ in range(wanted):
                        cut = block.rindex(b"\n", 0, cut)
                    offsets[path] = pos - step + cut + 1
                    return offsets
                wanted -= count
                pos -= step
            offsets[path] = 0
    return offsets


def _read_new(paths: list[Path], positions: dict[Path, int]) -> bytes:
    """At most LOG_CHUNK new bytes, oldest file first.

    ``positions`` count every byte the worker wrote, also those a ``log_limit`` cut
    since (runner.executors.logcap): so a follower goes on where it was across a cut,
    and one that fell behind the cut gets the file from its cut line on.
    """
    for path in paths:
        with path.open("rb") as f:
            cut, header = read_cut(f)
            seen = positions.get(path, 0)
            f.seek(header + seen - cut if seen >= cut and seen > 0 else 0)
            data = f.read(LOG_CHUNK)
            positions[path] = cut + max(0, f.tell() - header)
        if data:
            return data
    return b""


async def follow_log(
    request: web.Request, daemon: Daemon, run: RunRow, follow: bool
) -> web.StreamResponse:
    """Every attempt's log, oldest first; ``tail=N`` starts at the last N lines.

    Only this run's (by its id): following ends when it finishes or is forgotten."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    tail = int(request.query.get("tail", "0") or 0)
    paths = _log_files(daemon, run)
    offsets = await asyncio.to_thread(_tail_start, paths, tail) if tail else {}
    try:
        while True:
            paths = _log_files(daemon, run)
            chunk = await asyncio.to_thread(_read_new, paths, offsets)
            if chunk:
                await response.write(chunk)
                continue
            row = daemon.service.run_now(run.name)
            gone = row is None or row.run_uid != run.run_uid
            if not follow or gone or row is None or row.state in RunState.FINISHED:
                break
            await asyncio.sleep(POLL)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response
