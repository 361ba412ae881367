"""The API's streams: state changes (SSE), events and logs (NDJSON / text, followed)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from runner.api.stopping import pause
from runner.api.views import event_object, run_id, run_object
from runner.model import Estimate, RunState, WorkerState
from runner.reasons import ADMIN, RunRef, Viewer
from runner.rows import RunRow, WorkerRow
from runner.service.logs import not_kept, read_new, tail_start
from runner.service.runs import Caller
from runner.shown import Shown

if TYPE_CHECKING:
    from runner.api.served import Daemon

POLL = 0.25
DIFF_GAP = 0.2  # seconds: diffs are this far apart at least (the first of a burst at once)
QUEUE_MAX = 32  # diffs a stream may be behind; past it a fresh snapshot replaces them
# a diff to send (its version, the runs changed, removed, and moved: only their place in
# the queue changed); None: the stream ends
Item = tuple[int, list[str], list[RunRef], list[str]] | None
RESYNC: Item = (0, [], [], [])  # instead of the diffs a stream fell behind on: a new snapshot


def run_objects(
    daemon: Daemon, runs: list[RunRow], caller: Caller, estimates: Mapping[str, Estimate]
) -> list[dict[str, Any]]:
    """The run objects of ``runs`` for ``caller``: live workers, the plan, estimates."""
    live = daemon.service.live_by_run()
    shown, now = daemon.loop.shown, daemon.loop.clock()
    idle = daemon.loop.idle
    return [
        run_object(
            r,
            daemon.loop.spec_shown(r),
            caller.viewer,
            shown,
            live.get(r.name, ()),
            now,
            estimates.get(r.name),
            idle.get(r.run_uid),
        )
        for r in runs
    ]


@dataclass(frozen=True)
class Frame:
    """The active runs as one diff saw them: their rows and everything their objects
    are rendered from, so each viewer's objects come from the same moment."""

    version: int
    rows: dict[str, RunRow]  # by name
    # the admin view, by name; a run's "position" is the one in ``positions`` (an object
    # whose place alone changed is kept as it was, its place given when it is rendered)
    objects: dict[str, dict[str, Any]]
    live: dict[str, list[WorkerRow]]
    shown: Shown  # the plan's head and places, and the estimates, as published
    now: float
    at: float  # monotonic: when it was read
    timed: bool  # an object holds a stop grace that counts down with the clock
    idle: Mapping[str, float] = dataclasses.field(default_factory=dict)  # uid -> idle since
    # the runs whose object differs from the frame before only in its position (a run
    # ahead of them held, started or moved): sent as [id, position], not whole
    moved: frozenset[str] = frozenset()

    def render(self, daemon: Daemon, names: list[str], viewer: Viewer) -> list[dict[str, Any]]:
        """The objects of ``names`` for ``viewer``; the admin view as kept, in its place."""
        if viewer.workspaces is None:
            return [self.placed(n) for n in names]
        loop, rows = daemon.loop, self.rows
        return [
            run_object(rows[n], loop.spec_shown(rows[n]), viewer, self.shown, self.live.get(n, ()),
                       self.now, self.shown.estimates.get(n), self.idle.get(rows[n].run_uid))
            for n in names
        ]  # fmt: skip

    def placed(self, name: str) -> dict[str, Any]:
        """The admin object of ``name`` with its position now."""
        kept, position = self.objects[name], self.shown.positions.get(name)
        return kept if kept["position"] == position else {**kept, "position": position}


class Changes:
    """Turns the loop's "something changed" into versioned diffs of run objects.

    The store is read once per diff (admin view, ``Frame``); each subscriber is sent the
    changed runs rendered for its own caller from that frame, so names stay anonymised
    per viewer, and a viewer's encoded snapshot or diff is made once for all its
    subscribers. A new subscriber starts from the frame when it is current.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.version = 0
        self.frame: Frame | None = None
        self.subscribers: set[asyncio.Queue[Item]] = set()  # each at most QUEUE_MAX long
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self._diffed_at = -DIFF_GAP  # monotonic: when the last diff was computed
        self._fresh = False  # the frame is the store's state: no change arrived since
        self._encoded: dict[tuple[str, int, Viewer], bytes] = {}  # SSE messages, this version
        self._inputs: dict[str, tuple[object, ...]] = {}  # what each admin object came from

    @property
    def last(self) -> dict[str, dict[str, Any]]:
        """The admin view of every active run, as last diffed, by name."""
        return {} if self.frame is None else self.frame.objects

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.daemon.loop.watch(self.notify_threadsafe)

    def close(self) -> None:
        """The daemon stops: every stream ends now, not at its next keep-alive."""
        for queue in list(self.subscribers):
            _replace(queue, None)

    def notify_threadsafe(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        self._fresh = False
        if not self._pending:  # at once after a quiet spell; a burst's rest merged into one
            self._pending = True
            wait = self._diffed_at + DIFF_GAP - time.monotonic()
            asyncio.get_running_loop().call_later(max(0.0, wait), self._compute)

    def current(self, caller: Caller) -> dict[str, dict[str, Any]]:
        """Every active run's object for ``caller``, by the run's real name."""
        frame = self.current_frame()
        return dict(zip(frame.rows, frame.render(self.daemon, list(frame.rows), caller.viewer),
                        strict=True))  # fmt: skip

    def current_frame(self) -> Frame:
        """The frame, read again unless it is the store's state (and young enough, when a
        stop grace in it counts down)."""
        frame = self.frame
        if frame is None or not self._fresh or (frame.timed and _age(frame) > TIMED_REUSE):
            self._diff()
            frame = self.frame
            assert frame is not None
        return frame

    def _compute(self) -> None:
        self._pending = False
        self._diffed_at = time.monotonic()
        if not self.subscribers:  # no one listens: nothing to diff (a subscriber starts
            self._fresh = False  # from a frame read for it; a stale diff is idempotent)
            return
        self._diff()

    def _read(self) -> Frame:
        daemon = self.daemon
        rows = {r.name: r for r in daemon.service.list_runs(ADMIN_CALLER)}
        live = daemon.service.live_by_run()
        # the plan and the estimates as published: new estimates, made after a plan by the
        # back end's helper, are published with it and tell this stream (another diff)
        shown, now = daemon.loop.shown, daemon.loop.clock()
        estimates, spec_shown = shown.estimates, daemon.loop.spec_shown
        idle = dict(daemon.loop.idle)  # the marks as this frame saw them
        last, keys = self.last, self._inputs
        objects: dict[str, dict[str, Any]] = {}
        moved: set[str] = set()
        positions = shown.positions
        self._inputs = inputs = {}
        before = self.frame
        # a run with the row it had before and none of the suspects: its inputs are the
        # ones before, its key need not be built again (a queue of 10,000 is mostly such)
        suspects = set() if before is None else _suspects(before, shown, idle, live)
        rows_then = {} if before is None else before.rows
        positions_then = {} if before is None else before.shown.positions
        for n, r in rows.items():
            key: tuple[object, ...] | None
            if n in keys and rows_then.get(n) is r and n not in suspects:
                key = keys[n]  # surely the inputs before: not built again
            else:
                workers, estimate = live.get(n, ()), estimates.get(n)
                key = _inputs(r, shown, workers, estimate, idle.get(r.run_uid))
            if key is not None and keys.get(n) == key and n in last:
                objects[n] = last[n]  # rendered from the same inputs: the same, but its place
                if positions.get(n) != positions_then.get(n):
                    moved.add(n)
            else:
                workers, estimate = live.get(n, ()), estimates.get(n)
                objects[n] = run_object(r, spec_shown(r), ADMIN, shown, workers, now, estimate,
                                        idle.get(r.run_uid))  # fmt: skip
            if key is not None:
                inputs[n] = key
        timed = any(o["stop_grace_left_seconds"] is not None for o in objects.values())
        return Frame(self.version, rows, objects, live, shown, now, time.monotonic(), timed, idle,
                     frozenset(moved))  # fmt: skip

    def _diff(self) -> None:
        """Read the store into a new frame and send every subscriber what changed."""
        old, new = self.last, self._read()
        rows = {} if self.frame is None else self.frame.rows
        changed: list[str] = []
        moved: list[str] = []
        shifted = new.moved  # each the object before, in another place
        for n, o in new.objects.items():
            was = old.get(n)
            if was is o:
                if n in shifted:
                    moved.append(n)
            elif was != o:  # rendered again: whole, in its place now
                changed.append(n)
        removed = [RunRef(n, rows[n].workspace) for n in old if n not in new.objects]
        self._fresh = True
        if not changed and not removed and not moved:
            self.frame = dataclasses.replace(new, version=self.version)
            return
        self.version += 1
        self.frame = dataclasses.replace(new, version=self.version)
        self._encoded.clear()
        for queue in list(self.subscribers):
            if queue.full():  # a stalled reader: one fresh snapshot instead of every diff
                _replace(queue, RESYNC)
            else:
                queue.put_nowait((self.version, changed, removed, moved))

    def snapshot(self, viewer: Viewer) -> bytes:
        """``event: snapshot`` for ``viewer``: made once a version for all its subscribers."""
        frame = self.current_frame()
        key = ("snapshot", frame.version, viewer)
        found = self._encoded.get(key)
        if found is None:
            runs = frame.render(self.daemon, list(frame.rows), viewer)
            found = self._encoded[key] = _message("snapshot", {"version": frame.version,
                                                               "runs": runs})  # fmt: skip
        return found

    def change(self, version: int, changed: list[str], removed: list[RunRef], moved: list[str],
               viewer: Viewer) -> bytes | None:  # fmt: skip
        """``event: change`` for ``viewer``: the changed runs' objects as the frame has them
        now, the ids gone, and ``[id, position]`` of each run whose place alone changed."""
        frame = self.frame
        if frame is None:
            return None
        key = ("change", version, viewer)
        found = self._encoded.get(key)
        if found is None:
            names = [n for n in changed if n in frame.rows]
            gone = [run_id(r.name, r.workspace, viewer) for r in removed]
            rows, positions = frame.rows, frame.shown.positions
            places = [[run_id(n, rows[n].workspace, viewer), positions.get(n)]
                      for n in moved if n in rows]  # fmt: skip
            found = _message("change", {"version": version,
                                        "upsert": frame.render(self.daemon, names, viewer),
                                        "remove": gone, "moved": places})  # fmt: skip
            if version == frame.version:
                self._encoded[key] = found
        return found


def _replace(queue: asyncio.Queue[Item], item: Item) -> None:
    """Drop what ``queue`` holds (a stream's unsent diffs), then put ``item`` in it."""
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(item)


ADMIN_CALLER = Caller(0, 0, "root", True, frozenset())
TIMED_REUSE = 0.5  # seconds a frame whose stop graces count down is reused for a new stream
SSE_CHUNK = 1 << 20  # bytes written at a time: a big snapshot does not hold the loop


def _suspects(before: Frame, shown: Shown, idle: Mapping[str, float],
              live: Mapping[str, object]) -> set[str]:  # fmt: skip
    """The runs whose inputs (``_inputs``) may differ from those ``before`` rendered them
    from even with the same row: live now or then, the head now or then, or an estimate or
    idle mark that moved (an idle mark is by the run's id: every run, while any mark moved;
    they move rarely). Every other run with its row of then has its inputs of then."""
    heads = (h.run for h in (shown.head, before.shown.head) if h is not None)
    found = {*live, *before.live, *heads}
    estimates, then = shown.estimates, before.shown.estimates
    if estimates is not then:
        found.update(n for n in estimates.keys() | then.keys() if estimates.get(n) != then.get(n))
    if idle != before.idle:
        found.update(before.rows)
    return found


def _inputs(
    run: RunRow, shown: Shown, live: Sequence[WorkerRow], estimate: Estimate | None,
    idle_since: float | None = None,
) -> tuple[object, ...] | None:  # fmt: skip
    """All a run's object is rendered from (runner/api/views.py run_view) but its position,
    to compare with the last diff's; None when it moves with the clock (a stop grace
    counting down)."""
    if any(w.state == WorkerState.STOPPING and w.stop_deadline is not None for w in live):
        return None
    head = shown.head if shown.is_head(run.name) else None
    shadow = None if head is None else head.shadow
    return (run, tuple(live), head is not None, shadow, estimate, idle_since)  # its position aside


def _age(frame: Frame) -> float:
    return time.monotonic() - frame.at


def _message(event: str, data: object) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + msgspec.json.encode(data, enc_hook=str) \
        + b"\n\n"  # fmt: skip


async def sse(request: web.Request, changes: Changes, caller: Caller) -> web.StreamResponse:
    """``event: snapshot`` first (every active run), then ``event: change`` diffs."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})  # fmt: skip
    await response.prepare(request)
    queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_MAX)
    viewer = caller.viewer
    try:
        snapshot = changes.snapshot(viewer)
        changes.subscribers.add(queue)  # no await since the frame: no diff is missed
        loop = changes.daemon.loop
        loop.watchers(len(changes.subscribers))  # estimates made after each plan
        loop.ask_estimates()
        view = memoryview(snapshot)
        for at in range(0, len(view), SSE_CHUNK):
            await response.write(view[at : at + SSE_CHUNK])
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), 15)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if item is None:
                break
            if item is RESYNC:  # fell behind: the runs as they are now, in one snapshot
                view = memoryview(changes.snapshot(viewer))
                for at in range(0, len(view), SSE_CHUNK):
                    await response.write(view[at : at + SSE_CHUNK])
                continue
            message = changes.change(*item, viewer)
            if message is not None:
                await response.write(message)
    except (ConnectionError, asyncio.CancelledError):  # the dashboard went away
        pass
    finally:
        changes.subscribers.discard(queue)
        changes.daemon.loop.watchers(len(changes.subscribers))
    return response


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
            if not follow or not await pause(request, POLL):  # or the daemon stops
                break
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response


def _log_files(daemon: Daemon, run: RunRow) -> list[Path]:
    return daemon.loop.log_files(run)  # by the run's id: never an earlier run's of that name


async def follow_log(
    request: web.Request, daemon: Daemon, run: RunRow, follow: bool
) -> web.StreamResponse:
    """Every attempt's log kept, oldest first, after a line that says which attempts'
    are not (``not_kept``); ``tail=N`` starts at the last N lines.

    Only this run's (by its id): following ends when it finishes or is forgotten."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    tail = int(request.query.get("tail", "0") or 0)
    paths = _log_files(daemon, run)
    offsets = await asyncio.to_thread(tail_start, paths, tail) if tail else {}
    if not tail and (dropped := not_kept(paths)):  # from the oldest output kept
        await response.write(dropped)
    try:
        while True:
            paths = _log_files(daemon, run)
            chunk = await asyncio.to_thread(read_new, paths, offsets)
            if chunk:
                await response.write(chunk)
                continue
            row = daemon.service.run_now(run.name)
            gone = row is None or row.run_uid != run.run_uid
            if not follow or gone or row is None or row.state in RunState.FINISHED:
                break
            if not await pause(request, POLL):  # the daemon stops: so does following
                break
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response
