"""The daemon stops: every followed answer (a run's log, the events) ends at once.

A follower of a silent run would otherwise poll until aiohttp's shutdown timeout and
hold the daemon's exit that long. ``build_app`` adds :func:`end_streams` to the app's
``on_shutdown``, which aiohttp runs once the socket no longer listens and before it
waits for open answers; the followers' pauses (:func:`pause`) end with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

STOPPING: web.AppKey[asyncio.Event] = web.AppKey("stopping", asyncio.Event)


def add_stopping(app: web.Application, also: Callable[[], None]) -> None:
    """Followers end when the daemon stops; ``also`` ends the rest (the SSE streams)."""
    app[STOPPING] = asyncio.Event()

    async def end_streams(app: web.Application) -> None:
        app[STOPPING].set()
        also()

    app.on_shutdown.append(end_streams)


async def pause(request: web.Request, seconds: float) -> bool:
    """Wait ``seconds`` (a follower's poll); False at once when the daemon stops."""
    stopping = request.app.get(STOPPING)
    if stopping is None:  # an app built without it (a test's): a plain pause
        await asyncio.sleep(seconds)
        return True
    if stopping.is_set():
        return False
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        return True
    return False
