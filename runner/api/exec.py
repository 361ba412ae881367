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
import json
import threading
from typing import Any

from aiohttp import WSMsgType, web

from runner.api.context import DAEMON, peer_caller
from runner.executors.sessions import STDIN, EnterRequest, Session
from runner.service.caller import ServiceError
from runner.service.enter import Entries, Entry

ENTRIES: web.AppKey[Entries] = web.AppKey("entries", Entries)
MAX_FRAME = 1 << 20  # bytes one message from the client may hold
FIRST_WITHIN = 10.0  # seconds for the client's first message
WATCH_EVERY = 1.0  # seconds between looks at whether the run still runs


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
        error = {"status": e.status, "code": e.code, "message": e.message}
        await ws.send_str(json.dumps({"error": error}))
        await ws.close()
        return ws
    try:
        code = await _relay(ws, entry, entries)
        if code is not None:
            await ws.send_str(json.dumps({"exit_code": code}))
    finally:
        await asyncio.to_thread(entries.close, entry)
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


async def _relay(ws: web.WebSocketResponse, entry: Entry, entries: Entries) -> int | None:
    """Carry bytes both ways until the command's output ends; its exit code then (None:
    the client went away, and the command is ended)."""
    output: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue(maxsize=64)
    _read_in_thread(entry.session, output, asyncio.get_running_loop())
    tasks = [
        asyncio.create_task(_from_client(ws, entry.session)),
        asyncio.create_task(_watch(entry, entries)),
    ]
    try:
        while True:
            channel, data = await output.get()
            if not data:
                break
            if not ws.closed:
                await ws.send_bytes(bytes([channel]) + data)
    finally:
        for task in tasks:
            task.cancel()
    code = await asyncio.to_thread(entry.session.wait)
    return None if ws.closed else code


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
            await asyncio.to_thread(session.write, message.data[1:])
        elif message.type is WSMsgType.TEXT:
            with contextlib.suppress(ValueError, TypeError):
                control = json.loads(message.data)
                if control.get("eof"):
                    session.close_stdin()
                if isinstance(control.get("resize"), list) and len(control["resize"]) == 2:
                    rows, cols = control["resize"]
                    session.resize(int(rows), int(cols))
    session.kill()  # the client went away: so does the command


async def _watch(entry: Entry, entries: Entries) -> None:
    while await asyncio.sleep(WATCH_EVERY, True):
        if not await asyncio.to_thread(entries.still_running, entry):
            entry.session.kill()
            return


def add_exec_routes(app: web.Application) -> None:
    daemon = app[DAEMON]
    app[ENTRIES] = Entries(daemon.service, daemon.backend.enter)
    app.router.add_get("/v1/runs/{name}/exec", exec_route)
