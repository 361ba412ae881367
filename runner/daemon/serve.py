"""``astra serve``: the daemon in the foreground, its API on the socket, until signalled."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runner.daemon.daemon import Daemon, DaemonError
from runner.store.db import StoreError

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger("astraeus")


def socket_path(home: Path) -> Path:
    return Path(os.environ.get("ASTRAEUS_SOCKET", home / "astraeus.sock"))


async def _run(daemon: Daemon, sock: Path) -> int:
    from runner.api.app import start_api  # lazy: aiohttp only for the daemon
    from runner.api.guard import SocketInUse

    try:
        runner = await start_api(daemon, sock, daemon.config.socket_group)
    except SocketInUse as e:  # checked again: one may have started since serve() looked
        print(f"error: {e}", file=sys.stderr)
        return 1
    # [api] metrics_address: GET /metrics on TCP too. One that cannot be bound (a local
    # user took the port first) never keeps the scheduler from starting: it is retried
    scraped: list[web.AppRunner] = []
    wait = METRICS_RETRY[0]
    bound = await _bind_metrics(runner.app, daemon, scraped, wait)
    binding = None if bound else asyncio.create_task(_keep_binding(runner.app, daemon, scraped))
    daemon.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    metrics = f"; metrics on http://{daemon.config.metrics.where}/metrics" if scraped else ""
    if daemon.config.metrics.address is not None and not scraped:
        metrics = f"; metrics: {daemon.metrics_state}"
    print(
        f"astraeus: listening on {sock}; executor {daemon.executor_why}; "
        f"GPUs {daemon.inventory.source}{metrics}",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    # first the loop: it restarts no worker while the answers end; then every stream ends
    # (runner/api/stopping.py) and the rest of the answers get a few seconds
    await asyncio.to_thread(daemon.halt)
    if binding is not None:
        binding.cancel()
    await runner.cleanup()
    for site in scraped:
        await site.cleanup()
    daemon.stop()
    sock.unlink(missing_ok=True)
    return 0


METRICS_RETRY = (1.0, 60.0)  # the first wait before binding again, and the longest


async def _bind_metrics(
    app: web.Application, daemon: Daemon, into: list[web.AppRunner], wait: float
) -> bool:
    """One try at ``[api] metrics_address`` (True: bound, or none asked for); its state in
    ``daemon.metrics_state`` (``/v1/status``), the first failure of a kind logged."""
    from runner.api.metrics_site import start_metrics_site

    where = daemon.config.metrics.where
    try:
        site = await start_metrics_site(app, daemon)
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        if not daemon.metrics_state.startswith(f"not listening on {where}: {why}"):
            log.error("api.metrics_address %s: %s; tried again until it can be bound", where, why)
        daemon.metrics_state = f"not listening on {where}: {why} (tried again every {wait:g} s)"
        return False
    if site is not None:
        into.append(site)
        daemon.metrics_state = f"listening on http://{where}/metrics"
    return True


async def _keep_binding(app: web.Application, daemon: Daemon, into: list[web.AppRunner]) -> None:
    """Bind ``[api] metrics_address`` again and again, with a growing wait, until it can."""
    wait, longest = METRICS_RETRY
    while True:
        await asyncio.sleep(wait)
        wait = min(wait * 2, longest)
        if await _bind_metrics(app, daemon, into, wait):
            log.info("metrics on http://%s/metrics", daemon.config.metrics.where)
            return


def _return_large_buffers() -> None:
    """Large buffers (a queue's list, its JSON) go back to the system once freed.

    glibc raises its mmap threshold after the first large free, so later lists come from
    the heap and stay in the daemon's memory; a fixed threshold keeps them mmapped. Other
    C libraries: nothing to do."""
    import contextlib
    import ctypes

    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD


def serve(home: Path) -> int:
    """Run until SIGTERM/SIGINT. Returns the exit status."""
    _return_large_buffers()
    logging.basicConfig(level=os.environ.get("ASTRAEUS_LOG", "INFO"),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    lock = open(home / "daemon.lock", "w")  # noqa: SIM115 (held for the daemon's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"error: a daemon already runs for {home}", file=sys.stderr)
        return 1
    from runner.api.app import refuse_if_answered
    from runner.api.guard import SocketInUse

    sock = socket_path(home)
    try:  # before the state is opened: another home's daemon may own this socket
        refuse_if_answered(sock)
    except SocketInUse as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        daemon = Daemon(home)
    except (DaemonError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return asyncio.run(_run(daemon, sock))
