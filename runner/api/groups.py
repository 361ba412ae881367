"""The API's groups: sweeps, replica groups and schedules (runner/runspec/groups.py).

GET    /v1/groups[?kind=sweep|replicas|schedule]
POST   /v1/groups                 a group document (JSON or TOML)
GET    /v1/groups/{name}          with its runs and its own events
PATCH  /v1/groups/{name}          {"replicas": N} or {"paused": true|false}
DELETE /v1/groups/{name}          the group and its runs together
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from runner.api.context import daemon_of, peer_caller, read_document
from runner.api.streams import run_objects
from runner.api.views import event_object, group_object
from runner.runspec.groups import KINDS
from runner.service.runs import ServiceError


async def list_groups(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    kind = request.query.get("kind")
    if kind is not None and kind not in KINDS:
        raise ServiceError(400, "BAD_REQUEST", f"kind: must be one of {', '.join(KINDS)}")
    groups = daemon.groups.visible(caller, kind)
    service = daemon.service
    return web.json_response(
        {"groups": [group_object(g, service.runs_of_group(g.name)) for g in groups]}
    )


async def create_group(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    document = await read_document(request)
    group = await asyncio.to_thread(daemon.groups.create, document, caller)
    body = group_object(group, daemon.service.runs_of_group(group.name))
    return web.json_response(body, status=201)


async def show_group(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    group = daemon.groups.get(request.match_info["name"], caller)
    runs = daemon.service.runs_of_group(group.name)
    body = group_object(group, runs)
    body["run_objects"] = run_objects(daemon, runs, caller, {})
    events = daemon.service.group_events(group.name)
    body["events"] = [event_object(e, caller.viewer) for e in events]
    return web.json_response(body)


async def patch_group(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    body = await read_document(request)
    if not isinstance(body, dict) or len(body) != 1 or not {"replicas", "paused"} & set(body):
        raise ServiceError(422, "INVALID_SPEC", 'send {"replicas": N} or {"paused": true|false}')
    if "replicas" in body:
        count = body["replicas"]
        if not isinstance(count, int) or isinstance(count, bool):
            raise ServiceError(422, "INVALID_SPEC", "replicas: must be a whole number")
        group = await asyncio.to_thread(daemon.groups.scale, name, count, caller)
    else:
        paused = body["paused"]
        if not isinstance(paused, bool):
            raise ServiceError(422, "INVALID_SPEC", "paused: must be true or false")
        group = await asyncio.to_thread(daemon.groups.set_paused, name, paused, caller)
    return web.json_response(group_object(group, daemon.service.runs_of_group(name)))


async def delete_group(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    outcomes = await asyncio.to_thread(daemon.groups.delete, name, caller)
    return web.json_response({"name": name, "runs": outcomes})


def add_group_routes(app: web.Application) -> None:
    app.router.add_get("/v1/groups", list_groups)
    app.router.add_post("/v1/groups", create_group)
    app.router.add_get("/v1/groups/{name}", show_group)
    app.router.add_patch("/v1/groups/{name}", patch_group)
    app.router.add_delete("/v1/groups/{name}", delete_group)
