"""HTTP/JSON on a Unix socket: the routes put together, and the listening socket.

Every handler reads the caller (``runner/api/context.py``), asks the service
(``runner/service/``), which checks, reads and writes, and renders objects for that
caller (``runner/api/views.py``). ``docs/api.md`` lists the endpoints with a
``curl --unix-socket`` example each.
"""

from __future__ import annotations

import asyncio
import grp
import os
import socket
from pathlib import Path

from aiohttp import web

from runner.api.admin import add_admin_routes
from runner.api.context import (
    CHANGES,
    DAEMON,
    MAX_BODY,
    checked_input,
    errors,
    guarded,
)
from runner.api.controls import add_control_routes
from runner.api.exec import add_exec_routes
from runner.api.groups import add_group_routes
from runner.api.guard import GuardedSite, SocketInUse, answers
from runner.api.machine import add_machine_routes
from runner.api.metrics import add_metrics_routes
from runner.api.runs import add_run_routes
from runner.api.served import Daemon
from runner.api.stopping import add_stopping
from runner.api.streams import Changes
from runner.api.telemetry import add_telemetry_routes
from runner.api.usage import add_usage_routes
from runner.api.why import add_why_routes

SHUTDOWN_TIMEOUT = 3.0  # seconds an answer may still take once the daemon stops

__all__ = ["CHANGES", "DAEMON", "build_app", "errors", "refuse_if_answered", "start_api"]


def build_app(daemon: Daemon) -> web.Application:
    app = web.Application(middlewares=[guarded, errors, checked_input], client_max_size=MAX_BODY)
    app[DAEMON] = daemon
    app[CHANGES] = Changes(daemon)
    add_stopping(app, app[CHANGES].close)  # the daemon stops: every stream ends at once
    add_run_routes(app)
    add_control_routes(app)
    add_machine_routes(app)
    add_why_routes(app)
    add_group_routes(app)
    add_exec_routes(app)
    add_admin_routes(app)
    add_usage_routes(app)
    add_metrics_routes(app, daemon)  # GET /metrics: any caller of the socket
    add_telemetry_routes(app)
    return app


async def start_api(daemon: Daemon, socket_path: Path, group: str | None) -> web.AppRunner:
    """Listen on the socket: mode 0660 from the start, group-owned if asked.

    Raises SocketInUse, before anything is touched, while another daemon answers there.
    """
    refuse_if_answered(socket_path)
    app = build_app(daemon)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
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
