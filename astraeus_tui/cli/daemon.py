"""Daemon commands: serve (foreground), up (background + dashboard), down, dash."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import typer

from astraeus_tui.cli.common import fail
from astraeus_tui.client import ApiError, Client, default_socket
from astraeus_tui.wire import stream


def _home() -> Path:
    from runner.config.files import default_home

    return default_home()


def serve() -> None:
    """Run the daemon in the foreground (logs to stderr) until Ctrl-C or SIGTERM."""
    from runner.daemon.serve import serve as run_daemon

    raise typer.Exit(run_daemon(_home()))


def _answers(client: Client) -> bool:
    """A daemon listens on the socket: it answered, or took the request and is still busy
    with it (a queue of 100,000 runs: the dashboard opens, connecting, not a traceback)."""
    try:
        client.status()
        return True
    except TimeoutError:
        return True
    except ApiError as e:
        if e.status == 0:
            return False
        raise


def ensure_daemon(wait: float = 20.0) -> Client:
    """A client of a running daemon, starting one in the background if needed."""
    client = Client(timeout=5)
    if _answers(client):
        return client
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "daemon.log", "ab")  # noqa: SIM115 (handed to the child)
    subprocess.Popen(
        [sys.executable, "-m", "astraeus_tui.cli.main", "serve"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        env=os.environ.copy(),
    )  # fmt: skip
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if _answers(client):
            return client
    tail = (home / "daemon.log").read_text(errors="replace").strip().splitlines()[-1:]
    fail(f"the daemon did not start: {tail[0] if tail else 'see ' + str(home / 'daemon.log')}")


def up() -> None:
    """Start the daemon if it is not running, then open the dashboard."""
    try:
        client = ensure_daemon()
    except ApiError as e:
        fail(str(e))
    _dashboard(client)


def dash() -> None:
    """Open the dashboard against a running daemon."""
    client = Client(timeout=5)
    try:
        if not _answers(client):
            fail(f"no daemon answers on {default_socket()}: start it with `astra up`")
    except ApiError as e:
        fail(str(e))
    _dashboard(client)


def _dashboard(client: Client) -> None:
    early = threading.Thread(target=_ask_snapshot, args=(client.socket_path,), daemon=True)
    early.start()
    from astraeus_tui.app import run_dashboard  # lazy: textual only for the dashboard

    run_dashboard(client.socket_path)


def _ask_snapshot(socket: Path) -> None:
    """Open the stream while the dashboard's imports load: the daemon makes its snapshot
    (once a version, kept for every reader of this viewer) meanwhile, so the dashboard's
    own stream, a moment later, finds it made. Dropped at its first line: the snapshot
    event's, written once it is made."""
    with contextlib.suppress(ApiError, OSError):
        for _ in stream(socket, "/v1/stream", 60):
            break


def down() -> None:
    """Stop the daemon. Running work goes on and is adopted when it starts again."""
    client = Client(timeout=5)
    try:
        if not _answers(client):
            typer.echo("No daemon is running.")
            return
        client.shutdown()
    except ApiError as e:
        fail(str(e))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and client.socket_path.exists():
        time.sleep(0.1)
    typer.echo("Daemon stopped.")


def register(app: typer.Typer) -> None:
    for fn in (serve, up, down, dash):
        app.command(fn.__name__)(fn)
