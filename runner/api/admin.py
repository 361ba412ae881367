"""The API's drains: drain the machine or some GPUs, resume them, read them.

``POST /v1/drain`` and ``POST /v1/resume`` are for admins (runner/service/drain.py);
``GET /v1/drain`` is for everyone, as the header of the dashboard shows it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from runner.api.context import daemon_of, peer_caller, read_document
from runner.api.served import Daemon
from runner.api.views import iso
from runner.rows import DrainRow
from runner.service.caller import ServiceError


def drain_object(rows: list[DrainRow]) -> dict[str, Any]:
    """``{"machine": {reason, by, at} | null, "gpus": [{index, reason, by, at}]}``."""

    def one(r: DrainRow) -> dict[str, Any]:
        return {"reason": r.reason, "by": r.by, "at": iso(r.at)}

    machine = next((one(r) for r in rows if r.gpu is None), None)
    gpus = [{"index": r.gpu, **one(r)} for r in sorted(rows, key=lambda r: r.gpu or 0)
            if r.gpu is not None]  # fmt: skip
    return {"machine": machine, "gpus": gpus}


def drain_now(daemon: Daemon) -> dict[str, Any]:
    return drain_object(daemon.service.drains())


def _gpus(body: dict[str, Any]) -> list[int] | None:
    gpus = body.get("gpus")
    if gpus is None:
        return None
    if not isinstance(gpus, list):
        raise ServiceError(422, "INVALID_SPEC", "gpus: must be a list of GPU indices")
    return gpus


async def _body(request: web.Request) -> dict[str, Any]:
    body = await read_document(request) if request.can_read_body else {}
    if not isinstance(body, dict) or not set(body) <= {"reason", "gpus"}:
        raise ServiceError(422, "INVALID_SPEC", "expected reason and gpus")
    return body


async def get_drain(request: web.Request) -> web.Response:
    peer_caller(request)
    return web.json_response(drain_now(daemon_of(request)))


async def post_drain(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    body = await _body(request)
    local = daemon.loop.capabilities.plans_locally
    rows = await asyncio.to_thread(
        daemon.service.drain, caller, body.get("reason"), _gpus(body), local
    )
    daemon.service.poke()
    return web.json_response(drain_object(rows))


async def post_resume(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    body = await _body(request)
    rows = await asyncio.to_thread(daemon.service.resume, caller, _gpus(body))
    daemon.service.poke()
    return web.json_response(drain_object(rows))


def add_admin_routes(app: web.Application) -> None:
    app.router.add_get("/v1/drain", get_drain)
    app.router.add_post("/v1/drain", post_drain)
    app.router.add_post("/v1/resume", post_resume)
