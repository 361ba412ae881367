"""The API's explanations: why a run waits and submit previews (runner/service/explain.py
makes them), with the start estimates as published (runner/engine/published.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from aiohttp import web

from runner.api.context import daemon_of, peer_caller, read_document
from runner.service.explain import estimate_json

if TYPE_CHECKING:
    from runner.api.served import Daemon
    from runner.shown import Shown

log = logging.getLogger(__name__)
ESTIMATES_WAIT = 2.0  # seconds a request waits for the estimates of the plan it shows


async def published(daemon: Daemon, run: str | None = None) -> Shown:
    """The plan and start estimates as the back end published them, with fresh estimates
    of that plan (runner/engine/published.py: asked for here, a helper makes them); with
    ``run``, once that run is in the plan too (just submitted). At most ESTIMATES_WAIT
    seconds: then as they are."""
    loop = daemon.loop

    def ready(shown: Shown) -> bool:
        if not loop.estimating or not shown.planned:  # nothing planned: none to make
            return True
        placed = run is None or run in shown.placed
        return shown.fresh(time.monotonic()) and placed

    shown = loop.shown
    if ready(shown):
        return shown
    with loop.asking():  # the helper makes them while a request waits (Publisher.wanted)
        deadline = time.monotonic() + ESTIMATES_WAIT
        while time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            shown = loop.shown
            if ready(shown):
                return shown
    log.warning("start estimates not made within %s s: answered with the last", ESTIMATES_WAIT)
    return loop.shown


async def why(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    answer = daemon.explainer.why(caller, name)
    body = answer.body
    if answer.workspaces is not None:  # it waits in the order: the plan's estimate
        estimates = (await published(daemon, name)).estimates
        body["estimate"] = estimate_json(estimates.get(name), answer.workspaces, caller)
    return web.json_response(body)


async def preview(request: web.Request) -> web.Response:
    """What a submit would do: position, start, victims, refusals. Writes nothing."""
    daemon, caller = daemon_of(request), peer_caller(request)
    return web.json_response(daemon.explainer.preview(await read_document(request), caller))


def add_why_routes(app: web.Application) -> None:
    app.router.add_get("/v1/runs/{name}/why", why)
    app.router.add_post("/v1/preview", preview)
