"""What every route module of the API needs: the app's keys, the peer caller, the body.

The caller is the peer's uid, from SO_PEERCRED: nothing in a request can claim another
identity. Route modules (runs, machine, why, groups) import this module, never
``runner/api/app.py``, which only puts them together.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from runner.api.guard import guard_of, too_late
from runner.api.served import Daemon
from runner.api.streams import Changes
from runner.runspec.documents import decode_document
from runner.runspec.parse import SpecError, one_line
from runner.service.caller import DiskFull
from runner.service.runs import Caller, ServiceError, caller_for

log = logging.getLogger("astraeus.api")
# A run spec's command, args and env are at most 64 KiB (runner/runspec/parse.py), a sweep's
# values at most 1 MiB (runner/runspec/groups.py): 4 MiB holds either with JSON's quoting, and
# the template is stored once (runner/runspec/templates.py), so no body costs more than itself.
MAX_BODY = 4 * 1024 * 1024
JSON_TYPES = ("application/json",)
TOML_TYPES = ("application/toml", "text/x-toml")
DOCUMENT: web.RequestKey[object] = web.RequestKey("document", object)  # kept by read_document
BODY_TIME: web.RequestKey[float] = web.RequestKey("body_time", float)  # seconds left to read it
_WHOLE_QUERY = ("after", "tail")  # query values that must be whole numbers
MAX_WHOLE = (1 << 63) - 1  # the largest integer SQLite holds
CALLER_TTL = 5.0  # seconds a uid's user, groups and workspaces are remembered
_CALLERS: dict[tuple[int, int, int], tuple[float, Caller]] = {}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
DAEMON: web.AppKey[Daemon] = web.AppKey("daemon", Daemon)
CHANGES: web.AppKey[Changes] = web.AppKey("changes", Changes)


def peer_caller(request: web.Request) -> Caller:
    sock: socket.socket | None = (
        request.transport.get_extra_info("socket") if request.transport else None
    )
    if sock is None:
        raise web.HTTPForbidden(text="403 FORBIDDEN: no peer credentials\n")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, gid = struct.unpack("3i", creds)
    config = request.app[DAEMON].config
    key, now = (uid, gid, id(config)), time.monotonic()
    cached = _CALLERS.get(key)
    if cached is None or cached[0] < now:  # users and groups change rarely: look again soon
        cached = _CALLERS[key] = (now + CALLER_TTL, caller_for(uid, gid, config))
        if len(_CALLERS) > 1024:
            _CALLERS.clear()
    return cached[1]


def error_response(status: int, code: str, message: str) -> web.Response:
    body = {"error": {"status": status, "code": code, "message": one_line(message)}}
    return web.json_response(body, status=status)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ServiceError as e:
        return error_response(e.status, e.code, e.message)
    except DiskFull as e:  # rolled back: nothing of the request was kept
        return error_response(507, "DISK_FULL", str(e))
    except web.HTTPException as e:
        if e.status >= 400:
            return error_response(e.status, e.reason.upper().replace(" ", "_"), e.text or e.reason)
        raise
    except ConnectionError:  # the caller went away mid-request: no one to answer
        raise
    except Exception as e:  # a bug: one JSON line for the caller, the traceback in the log
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, "INTERNAL", f"the daemon failed: {type(e).__name__}")


@web.middleware
async def checked_input(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Malformed input is refused before any handler: query numbers, workspace changes."""
    for key in _WHOLE_QUERY:
        value = request.query.get(key, "0") or "0"
        digits = value.lstrip("0") or "0"  # bounded before int(): no huge numbers made
        if not (value.isascii() and value.isdigit()) or len(digits) > 19 or int(digits) > MAX_WHOLE:
            raise ServiceError(
                400, "BAD_REQUEST", f"{key}: must be a whole number from 0 to {MAX_WHOLE}"
            )
    if request.method == "PATCH" and request.path.startswith("/v1/workspaces/"):
        change = await read_document(request, code="INVALID_CONFIG", toml=False)
        if isinstance(change, dict) and not isinstance(change.get("quota", {}), dict):
            raise ServiceError(422, "INVALID_CONFIG", "quota: must be an object of limits")
    return await handler(request)


async def read_document(
    request: web.Request, code: str = "INVALID_SPEC", toml: bool = True
) -> object:
    """The body as a document: JSON, or TOML with a TOML content type. Read once.

    Strict (runner.runspec.documents.decode_document): UTF-8, at most MAX_BODY bytes, JSON without
    duplicate keys, NaN or deep nesting. Another content type is 415.
    """
    if DOCUMENT in request:
        return request[DOCUMENT]
    kind = request.content_type if "Content-Type" in request.headers else JSON_TYPES[0]
    if kind not in JSON_TYPES + (TOML_TYPES if toml else ()):
        wanted = "application/json or application/toml" if toml else "application/json"
        raise ServiceError(415, "UNSUPPORTED_MEDIA_TYPE", f"Content-Type {kind}: send {wanted}")
    raw = await _read_body(request)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ServiceError(422, code, f"<document>: not UTF-8 (byte {e.start})") from None
    try:
        document = decode_document(text, "toml" if kind in TOML_TYPES else "json")
    except SpecError as e:
        raise ServiceError(422, code, str(e)) from None
    request[DOCUMENT] = document
    return document


async def _read_body(request: web.Request) -> bytes:
    """The body, within what is left of the request's time (HTTPRequestEntityTooLarge past
    MAX_BODY)."""
    left = request.get(BODY_TIME)
    try:
        async with asyncio.timeout(left):
            return await request.read()
    except TimeoutError:
        message = too_late(request.app[DAEMON].config.api)
        raise ServiceError(408, "REQUEST_TIMEOUT", message) from None


@web.middleware
async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The connection's request clock stops while a handler runs; a late body closes it."""
    guard = guard_of(request)
    if guard is None:
        return await handler(request)
    request[BODY_TIME] = guard.handling()
    late = False
    try:
        response = await handler(request)
        late = response.status == 408
        if late:
            response.force_close()
        return response
    finally:
        guard.handled(close=late)


def daemon_of(request: web.Request) -> Daemon:
    """The daemon this request's app serves."""
    return request.app[DAEMON]
