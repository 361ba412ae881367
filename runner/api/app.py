"""HTTP/JSON on a Unix socket. The caller is the peer's uid, from SO_PEERCRED.

Nothing in a request can claim another identity. Every handler reads the
caller, asks :class:`runner.service.runs.Service` (which checks and writes), and
renders objects for that caller (``runner/api/views.py``). ``docs/api.md`` lists
the endpoints with a ``curl --unix-socket`` example each.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from runner.api.guard import GuardedSite, SocketInUse, answers, guard_of, too_late
from runner.api.streams import Changes, follow_events, follow_log, run_objects, sse
from runner.api.views import event_object, event_visible, iso, run_object, worker_object
from runner.api.why import ESTIMATES
from runner.daemon.daemon import Daemon
from runner.drives import latest_checkpoint
from runner.service.runs import Caller, ServiceError, caller_for
from runner.spec.documents import decode_document
from runner.spec.parse import SpecError, one_line
from runner.store.db import DiskFull, RunRow

log = logging.getLogger("astraeus.api")
# A run spec's command, args and env are at most 64 KiB (runner/spec/parse.py), a sweep's
# values at most 1 MiB (runner/spec/groups.py): 4 MiB holds either with JSON's quoting, and
# the template is stored once (runner/spec/templates.py), so no body costs more than itself.
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

    Strict (runner.spec.documents.decode_document): UTF-8, at most MAX_BODY bytes, JSON without
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


def _daemon(request: web.Request) -> Daemon:
    return request.app[DAEMON]


def _seen_run(daemon: Daemon, name: str, caller: Caller) -> RunRow:
    """The run whose details ``caller`` may read: 404 when there is none, 403 when it is
    another workspace's (its details, events and logs are private)."""
    run = daemon.store.get_run(name)
    if run is None:
        raise ServiceError(404, "NOT_FOUND", f"no run {name}")
    if not caller.viewer.sees(run.workspace):
        raise ServiceError(403, "FORBIDDEN", "a job in another namespace: details are private")
    return run


def _run_json(request: web.Request, daemon: Daemon, name: str, caller: Caller) -> dict[str, Any]:
    run = daemon.store.get_run(name)
    if run is None:
        raise ServiceError(404, "NOT_FOUND", f"no run {name}")
    spec = daemon.loop.specs.get(run)
    live = [w for w in daemon.store.workers_of(name)]
    estimate = request.app[ESTIMATES].get(daemon).get(name) if run.state == "Queued" else None
    plan, now = daemon.loop.status.plan, daemon.loop.clock()
    return run_object(run, spec, caller.viewer, plan, live, now, estimate)


# ------------------------------------------------------------------ runs


async def list_runs(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    q = request.query
    runs = daemon.store.runs(active_only=q.get("all") not in ("1", "true"))
    if "workspace" in q:
        runs = [r for r in runs if r.workspace == q["workspace"]]
    if "group" in q:
        runs = [r for r in runs if r.grp == q["group"]]
    if "state" in q:
        wanted = {s.strip().lower() for s in q["state"].split(",")}
        runs = [r for r in runs if r.state.lower() in wanted]
    objects = run_objects(daemon, runs, caller, request.app[ESTIMATES].get(daemon))
    running = ("Running", "Stopping", "Starting")
    objects.sort(key=lambda o: (o["state"] not in running, o["position"] or 1 << 30))
    return web.json_response({"runs": objects})


async def submit(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    document = await read_document(request)
    run = daemon.service.submit(document, caller)  # quick: a thread hop costs more
    spec = daemon.loop.specs.get(run)
    plan, now = daemon.loop.status.plan, daemon.loop.clock()
    return web.json_response(run_object(run, spec, caller.viewer, plan, (), now), status=201)


async def show_run(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    name = request.match_info["name"]
    run = _seen_run(daemon, name, caller)
    obj = _run_json(request, daemon, name, caller)
    obj["spec"] = run.spec()
    obj["workers_history"] = [
        worker_object(w, caller.viewer) for w in daemon.store.workers_of(name)
    ]
    seen = [e for e in daemon.store.events(name) if event_visible(e, caller.viewer)]
    obj["events"] = [event_object(e, caller.viewer) for e in seen]
    found = latest_checkpoint(daemon.loop.specs.get(run), daemon.settings.drives, name)
    obj["checkpoint"] = None if found is None else {**found, "modified": iso(found["modified"])}
    return web.json_response(obj)


async def patch_run(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    body = await read_document(request)
    priority = body.get("priority") if isinstance(body, dict) else None
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ServiceError(422, "INVALID_SPEC", "priority: must be a whole number")
    name = request.match_info["name"]
    await asyncio.to_thread(daemon.service.set_priority, name, priority, caller)
    return web.json_response(_run_json(request, daemon, name, caller))


async def delete_run(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    name = request.match_info["name"]
    outcome = await asyncio.to_thread(daemon.service.delete, name, caller)
    return web.json_response({"name": name, "outcome": outcome})


async def run_logs(request: web.Request) -> web.StreamResponse:
    daemon, caller = _daemon(request), peer_caller(request)
    name = request.match_info["name"]
    run = daemon.store.get_run(name)
    if run is None:
        raise ServiceError(404, "NOT_FOUND", f"no run {name}")
    if not caller.viewer.sees(run.workspace):
        raise ServiceError(403, "FORBIDDEN", "a job in another namespace: its logs are private")
    follow = request.query.get("follow") in ("1", "true")
    return await follow_log(request, daemon, run, follow)


async def events(request: web.Request) -> web.StreamResponse:
    daemon, caller = _daemon(request), peer_caller(request)
    run = request.query.get("run")
    if run is not None:
        _seen_run(daemon, run, caller)  # answers as the run's details do
    after = int(request.query.get("after", "0") or 0)  # digits: see checked_input
    follow = request.query.get("follow") in ("1", "true")
    return await follow_events(request, daemon, caller, run, after, follow)


# ------------------------------------------------------- machine and state


async def status(request: web.Request) -> web.Response:
    daemon, caller = _daemon(request), peer_caller(request)
    s, plan = daemon.loop.status, daemon.loop.status.plan
    head = None
    if plan is not None and plan.head is not None:
        head = (
            _run_json(request, daemon, plan.head.run, caller)
            if daemon.store.get_run(plan.head.run)
            else None
        )
        if head is not None:
            head["held_gpus"] = list(plan.head.held_gpus)
            head["preempting"] = plan.head.preempting
    return web.json_response({
        "executor": daemon.executor.name,
        "executor_why": daemon.executor_why,
        "gpus_source": daemon.inventory.source,
        "simulated": daemon.inventory.simulated,
        "stop_grace_seconds": daemon.settings.machine.stop_grace,
        "ticks": s.ticks,
        "last_plan_ms": round(s.last_plan_ms, 2),
        "errors": s.errors,
        "head": head,
        "caller": {"user": caller.user, "admin": caller.admin,
                   "workspaces": sorted(caller.workspaces)},
    })  # fmt: skip


async def stream(request: web.Request) -> web.StreamResponse:
    caller = peer_caller(request)
    changes = request.app[CHANGES]
    return await sse(request, changes, caller)


def build_app(daemon: Daemon) -> web.Application:
    from runner.api.groups import add_group_routes
    from runner.api.machine import add_machine_routes  # lazy: keeps this module short
    from runner.api.why import add_why_routes

    app = web.Application(middlewares=[guarded, errors, checked_input], client_max_size=MAX_BODY)
    app[DAEMON] = daemon
    app[CHANGES] = Changes(daemon)
    app.router.add_get("/v1/runs", list_runs)
    app.router.add_post("/v1/runs", submit)
    app.router.add_get("/v1/runs/{name}", show_run)
    app.router.add_patch("/v1/runs/{name}", patch_run)
    app.router.add_delete("/v1/runs/{name}", delete_run)
    app.router.add_get("/v1/runs/{name}/logs", run_logs)
    app.router.add_get("/v1/events", events)
    app.router.add_get("/v1/status", status)
    app.router.add_get("/v1/stream", stream)
    add_machine_routes(app)
    add_why_routes(app)
    add_group_routes(app)
    app[CHANGES].estimates = lambda: app[ESTIMATES].get(daemon)  # the stream's starts_by
    return app


async def start_api(daemon: Daemon, socket_path: Path, group: str | None) -> web.AppRunner:
    """Listen on the socket: mode 0660 from the start, group-owned if asked.

    Raises SocketInUse, before anything is touched, while another daemon answers there.
    """
    refuse_if_answered(socket_path)
    app = build_app(daemon)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    socket_path.unlink(missing_ok=True)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o117)  # no window in which the socket is wider than 0660
    try:
        listening.bind(str(socket_path))
    finally:
        os.umask(old)
    listening.listen(128)
    await GuardedSite(runner, listening, lambda: daemon.config.api).start()
    if group is not None:
        os.chown(socket_path, -1, grp.getgrnam(group).gr_gid)
    os.chmod(socket_path, 0o660)
    app[CHANGES].attach(asyncio.get_running_loop())
    return runner


def refuse_if_answered(socket_path: Path) -> None:
    """A live socket is another daemon's: never take it over. A stale file may go."""
    if answers(str(socket_path)):
        raise SocketInUse(f"another daemon answers on {socket_path}")
