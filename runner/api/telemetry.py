"""``GET /v1/telemetry``: the sampler's last readings of the GPUs and the running runs,
each run named for the caller as ``GET /v1/runs`` names it; ``?history=1`` adds the
last hour's samples, ``?history=<duration>`` (``10m``, ``6h``, ``30d``) that far back
(past the last hour from the store's history, at most 2000 samples a series).
``GET /v1/runs/{name}/telemetry``: one run's use and its samples over its life, for
whoever may read its details.

Only the HTTP side: what the readings become for a caller is runner/service/telemetry.py's
(the daemon's ``telemetry``); the reads of the store run on a thread."""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from runner.api.context import daemon_of, peer_caller
from runner.service.telemetry import history_seconds


async def telemetry(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    history = history_seconds(request.query.get("history"))
    readings = daemon.telemetry
    if readings.reads_store(history):  # past the rings' hour: the store's series
        body = await asyncio.to_thread(readings.for_caller, caller, history)
    else:
        body = readings.for_caller(caller, history)
    return web.Response(body=msgspec.json.encode(body), content_type="application/json")


async def run_telemetry(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    run = daemon.service.get_run(caller, request.match_info["name"])  # 404, or 403 elsewhere
    asked = history_seconds(request.query.get("history"))
    back = None if isinstance(asked, bool) else asked
    body = await asyncio.to_thread(daemon.telemetry.run_telemetry, run, back)
    return web.Response(body=msgspec.json.encode(body), content_type="application/json")


def add_telemetry_routes(app: web.Application) -> None:
    app.router.add_get("/v1/telemetry", telemetry)
    app.router.add_get("/v1/runs/{name}/telemetry", run_telemetry)
