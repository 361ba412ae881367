"""``GET /v1/runs/{name}/exec``: a command inside a run's worker, over a WebSocket.

The client's first message is JSON: ``{"argv": [...], "worker": N|null, "tty": bool,
"rows": R, "cols": C}``. Then binary frames carry bytes, the first byte naming the
channel (0 the command's input, 1 its output, 2 its errors; with a terminal all
output is 1); text frames carry JSON: from the client ``{"resize": [rows, cols]}``
and ``{"eof": true}``, from the daemon ``{"exit_code": N}`` as the last message or
``{"error": {"status", "code", "message"}}`` when refused. Who may, and the bounds:
:mod:`runner.service.enter`. The command is ended when the client goes away or the
run stops running.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import WSMsgType, web

from runner.api.context import DAEMON, peer_caller
from runner.api.served import Daemon
from runner.api.streams import run_objects
from runner.model import RunState
from runner.service.caller import Caller, ServiceError
from runner.service.enter import Entries, Entry
from runner.service.logs import last_bytes
from runner.sessions import BACKLOG, STDIN, STDOUT, EnterRequest, Session

ENTRIES: web.AppKey[Entries] = web.AppKey("entries", Entries)
MAX_FRAME = 1 << 20  # bytes one message from the client may hold
FIRST_WITHIN = 10.0  # seconds for the client's first message
WATCH_EVERY = 1.0  # seconds between looks at whether the run still runs
WAIT_POLL = 0.5  # seconds between looks at a waiting interactive run
SETTLE_WITHIN = 10.0  # seconds the end waits for the run's final state
T = TypeVar("T")


async def exec_route(request: web.Request) -> web.StreamResponse:
    caller = peer_caller(request)
    entries = request.app[ENTRIES]
    ws = web.WebSocketResponse(max_msg_size=MAX_FRAME)
    await ws.prepare(request)
    try:
        worker, asked = _asked(await _first(ws))
        entry = await asyncio.to_thread(
            entries.open, caller, request.match_info["name"], worker, asked
        )
    except ServiceError as e:
        return await _refused(ws, e)
    try:
        code = await _relay(ws, entry, entries)
        if code is not None:
            await ws.send_str(json.dumps({"exit_code": code}))
    finally:
        await asyncio.to_thread(entries.close, entry)
        await ws.close()
    return ws


async def _refused(ws: web.WebSocketResponse, e: ServiceError) -> web.WebSocketResponse:
    error = {"status": e.status, "code": e.code, "message": e.message}
    await ws.send_str(json.dumps({"error": error}))
    await ws.close()
    return ws


async def _first(ws: web.WebSocketResponse) -> dict[str, Any]:
    try:
        message = await asyncio.wait_for(ws.receive(), FIRST_WITHIN)
    except TimeoutError as e:
        raise ServiceError(408, "REQUEST_TIMEOUT", "exec: no request within 10 s") from e
    if message.type is not WSMsgType.TEXT:
        raise ServiceError(422, "INVALID_REQUEST", "exec: the first message must be JSON")
    try:
        asked = json.loads(message.data)
    except ValueError as e:
        raise ServiceError(422, "INVALID_REQUEST", "exec: the first message must be JSON") from e
    if not isinstance(asked, dict):
        raise ServiceError(422, "INVALID_REQUEST", "exec: the first message must be an object")
    return asked


def _asked(asked: dict[str, Any]) -> tuple[int | None, EnterRequest]:
    argv, worker = asked.get("argv"), asked.get("worker")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ServiceError(422, "INVALID_REQUEST", "exec: argv must be a list of strings")
    if worker is not None and (not isinstance(worker, int) or isinstance(worker, bool)):
        raise ServiceError(422, "INVALID_REQUEST", "exec: worker must be a whole number")
    rows, cols = asked.get("rows", 24), asked.get("cols", 80)
    if not all(isinstance(n, int) and 0 < n < 10000 for n in (rows, cols)):
        raise ServiceError(422, "INVALID_REQUEST", "exec: rows and cols must be 1 to 9999")
    return worker, EnterRequest(tuple(argv), bool(asked.get("tty")), rows, cols)


async def _relay(ws: web.WebSocketResponse, entry: Entry, entries: Entries | None) -> int | None:
    """Carry bytes both ways until the command's output ends; its exit code then (None:
    the client went away, and the command is ended)."""
    output: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue(maxsize=64)
    _read_in_thread(entry.session, output, asyncio.get_running_loop())
    tasks = [asyncio.create_task(_from_client(ws, entry.session))]
    if entries is not None:  # an exec ends with its run; a run's own terminal ends itself
        tasks.append(asyncio.create_task(_watch(entry, entries)))
    try:
        while True:
            channel, data = await output.get()
            if not data:
                break
            if not ws.closed:
                await ws.send_bytes(bytes([channel]) + data)
        # a command that closed its output may go on: it is still ended with its run or
        # when the client goes away (the tasks stay until it exits)
        code = await _in_own_thread(entry.session.wait)
    finally:
        for task in tasks:
            task.cancel()
    return None if ws.closed else code


def _in_own_thread(call: Callable[[], T]) -> asyncio.Future[T]:
    """``call()`` in a thread of its own: a session's blocking calls (a wait for a command
    that does not end, a write to one that does not read) last as long as the member
    wants, and must not hold the default pool every request of every member uses."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: tuple[T] | BaseException) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome[0])

    def run() -> None:
        outcome: tuple[T] | BaseException
        try:
            outcome = (call(),)
        except BaseException as e:  # handed to the awaiting coroutine
            outcome = e
        with contextlib.suppress(RuntimeError):  # the loop is closing: the daemon stops
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="exec-session", daemon=True).start()
    return future


def _read_in_thread(
    session: Session, output: asyncio.Queue[tuple[int, bytes]], loop: asyncio.AbstractEventLoop
) -> None:
    """A thread of its own reads the output: a blocking read never holds the event loop
    nor the default pool, and a slow client holds the command back (the queue is bounded)."""

    def read() -> None:
        while True:
            got = session.read()
            with contextlib.suppress(RuntimeError):  # the loop is closing: the daemon stops
                asyncio.run_coroutine_threadsafe(output.put(got), loop).result()
            if not got[1]:
                return

    threading.Thread(target=read, name="exec-output", daemon=True).start()


async def _from_client(ws: web.WebSocketResponse, session: Session) -> None:
    async for message in ws:
        if message.type is WSMsgType.BINARY and message.data[:1] == bytes([STDIN]):
            await _in_own_thread(functools.partial(session.write, message.data[1:]))
        elif message.type is WSMsgType.TEXT:
            with contextlib.suppress(ValueError):
                control = json.loads(message.data)
                if not isinstance(control, dict):
                    continue  # not a control: ignored, as an unknown key is
                if control.get("eof"):
                    session.close_stdin()
                size = control.get("resize")
                if isinstance(size, list) and len(size) == 2 and all(_dimension(n) for n in size):
                    session.resize(*size)
    session.kill()  # the client went away: so does the command


def _dimension(n: object) -> bool:
    """A terminal's rows or columns, as the first message bounds them."""
    return isinstance(n, int) and not isinstance(n, bool) and 0 < n < 10000


async def _watch(entry: Entry, entries: Entries) -> None:
    while await asyncio.sleep(WATCH_EVERY, True):
        if not await asyncio.to_thread(entries.still_running, entry):
            entry.session.kill()
            return


async def terminal_route(request: web.Request) -> web.StreamResponse:
    """An interactive run's terminal: wait while it is queued (its reason sent as it
    changes), relay once it runs, then its end. The client going away cancels the run,
    as srun's end cancels its job: nobody is left at its terminal."""
    caller, daemon = peer_caller(request), request.app[DAEMON]
    entries, name = request.app[ENTRIES], request.match_info["name"]
    ws = web.WebSocketResponse(max_msg_size=MAX_FRAME)
    await ws.prepare(request)
    entry: Entry | None = None
    try:
        size = await _first(ws)
        run = await asyncio.to_thread(entries.interactive_run, caller, name)
        if not await _wait_for_start(ws, daemon, caller, run.name, run.run_uid):
            return ws
        try:
            entry = await asyncio.to_thread(entries.attach, caller, run)
        except ServiceError:
            if not await _ended_before_attach(ws, daemon, caller, run.name):
                raise
            return ws
        await ws.send_str(json.dumps({"started": {"worker": entry.worker}}))
    except ServiceError as e:
        return await _refused(ws, e)
    try:
        rows, cols = size.get("rows", 24), size.get("cols", 80)
        if _dimension(rows) and _dimension(cols):
            entry.session.resize(rows, cols)
        code = await _relay(ws, entry, None)
        if code is None:  # the client went away: so does the run
            await _cancel(daemon, caller, entry.run)
        else:
            await _settled(daemon, entry.run, entry.run_uid)
            ended = await _shown(daemon, caller, entry.run)
            await ws.send_str(json.dumps({"exit_code": code, **ended}))
            if ended["state"] not in RunState.FINISHED:  # preempted: not run again, unattended
                await _cancel(daemon, caller, entry.run)
    finally:
        await asyncio.to_thread(entries.close, entry)
        await ws.close()
    return ws


async def _wait_for_start(
    ws: web.WebSocketResponse, daemon: Daemon, caller: Caller, name: str, run_uid: str
) -> bool:
    """Until the run runs: its state and reason to the client as they change. False when
    the client went away (the run is cancelled) or the run ended before it ran."""
    said: dict[str, Any] = {}
    closed = asyncio.create_task(ws.receive())
    try:
        while True:
            run = await asyncio.to_thread(daemon.service.run_now, name)
            if run is None or run.run_uid != run_uid:
                await ws.send_str(json.dumps({"ended": await _shown(daemon, caller, name)}))
                return False
            if run.state in RunState.FINISHED:  # it ran and ended between two looks
                return True
            if run.state is RunState.RUNNING:
                return True
            shown = await _shown(daemon, caller, name)
            if shown != said:
                await ws.send_str(json.dumps({"waiting": shown}))
                said = shown
            done, _ = await asyncio.wait({closed}, timeout=WAIT_POLL)
            if done:
                await _cancel(daemon, caller, name)
                return False
    finally:
        closed.cancel()


async def _ended_before_attach(
    ws: web.WebSocketResponse, daemon: Daemon, caller: Caller, name: str
) -> bool:
    """A command that ended before the terminal was attached: what its log kept of the
    terminal (the last BACKLOG bytes) and its end. False: it had not ended."""
    await _settled(daemon, name, None)
    run = await asyncio.to_thread(daemon.service.run_now, name)
    if run is None or run.state not in RunState.FINISHED:
        return False
    await ws.send_str(json.dumps({"started": {"worker": 0}}))
    tail = await asyncio.to_thread(last_bytes, daemon.loop.log_files(run), BACKLOG)
    if tail:
        await ws.send_bytes(bytes([STDOUT]) + tail)
    code = run.exit_code if run.exit_code is not None else 1
    await ws.send_str(json.dumps({"exit_code": code, **await _shown(daemon, caller, name)}))
    return True


async def _settled(daemon: Daemon, name: str, run_uid: str | None) -> None:
    """Wait (a little) until the loop has seen the command's end: the run's final state."""
    for _ in range(int(SETTLE_WITHIN / WAIT_POLL)):
        run = await asyncio.to_thread(daemon.service.run_now, name)
        if run is None or (run_uid is not None and run.run_uid != run_uid):
            return
        if run.state in RunState.FINISHED or run.state is RunState.QUEUED:
            return
        await asyncio.sleep(WAIT_POLL)


async def _shown(daemon: Daemon, caller: Caller, name: str) -> dict[str, Any]:
    run = await asyncio.to_thread(daemon.service.run_now, name)
    if run is None:
        return {"state": None, "reason": None}
    shown = run_objects(daemon, [run], caller, {})[0]
    return {"state": shown["state"], "reason": shown["reason"], "code": shown.get("reason_code")}


async def _cancel(daemon: Daemon, caller: Caller, name: str) -> None:
    with contextlib.suppress(ServiceError):
        await asyncio.to_thread(daemon.service.delete, name, caller)


def add_exec_routes(app: web.Application) -> None:
    daemon = app[DAEMON]
    service, loop = daemon.service, daemon.loop
    app[ENTRIES] = Entries(service, loop.enter, loop.terminal, loop.spec)

    async def end_sessions(app: web.Application) -> None:  # the daemon stops: so do they
        await asyncio.to_thread(app[ENTRIES].close_all)

    app.on_shutdown.append(end_sessions)
    app.router.add_get("/v1/runs/{name}/exec", exec_route)
    app.router.add_get("/v1/runs/{name}/terminal", terminal_route)
