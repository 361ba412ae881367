"""The API's per-run controls: hold, release and requeue (runner/service/controls.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from runner.api.context import daemon_of, peer_caller
from runner.service import controls
from runner.service.caller import Caller
from runner.service.runs import Service

Control = Callable[[Service, str, Caller], str]


def _control(action: Control) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        daemon, caller = daemon_of(request), peer_caller(request)
        name = request.match_info["name"]
        outcome = await asyncio.to_thread(action, daemon.service, name, caller)
        return web.json_response({"name": name, "outcome": outcome})

    return handler


def add_control_routes(app: web.Application) -> None:
    app.router.add_post("/v1/runs/{name}/hold", _control(controls.hold))
    app.router.add_post("/v1/runs/{name}/release", _control(controls.release))
    app.router.add_post("/v1/runs/{name}/requeue", _control(controls.requeue))
