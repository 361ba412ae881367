"""Talking to a real daemon with raw bytes, and reading what it wrote; ``astra`` as a
real Unix user."""

from __future__ import annotations

import io
import json
import os
import pty
import pwd
import select
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from astraeus_tui.cli.main import app
from tests.support.served import Served
from tests.support.users import fork_as

TABLES = ("runs", "workers", "events", "usage", "groups", "templates")


def db_state(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the state DB's tables, read-only (the daemon keeps it open)."""
    db = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    try:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}
    finally:
        db.close()


def request_bytes(
    method: str, path: str, body: bytes = b"", content_type: str | None = "application/json"
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: astraeus\r\nConnection: close\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def raw(sock_path: Path, data: bytes, *, half_close: bool = False, timeout: float = 10) -> bytes:
    """Send ``data`` as is and read until the daemon closes; b"" when it answers nothing.

    ``half_close`` ends our side after sending (a truncated request never completes).
    A daemon that stops reading (a body past the limit) may reset the connection: what
    it answered before that is still returned.
    """
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(str(sock_path))
    chunks: list[bytes] = []
    try:
        try:
            conn.sendall(data)
            if half_close:
                conn.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        conn.close()
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    """The HTTP status of a raw response; 0 when there is none."""
    line = response.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else 0


def error_of(response: bytes) -> str:
    """``"<status> <CODE>: <message>"`` from a JSON error response, as the CLI prints it."""
    body = response.split(b"\r\n\r\n", 1)[-1]
    error = json.loads(body)["error"]
    return f"{error['status']} {error['code']}: {error['message']}"


def astra_as(
    lab: Served, who: pwd.struct_passwd, args: list[str], terminal: bool = False,
    cwd: Path | None = None, env: dict[str, str] | None = None,
) -> bytes:  # fmt: skip
    """What ``astra ARGS`` writes to its stdout, a terminal (a pty) or a pipe, run as
    ``who`` (its groups as the system gives them), from ``cwd`` and with the
    environment ``env`` (and the daemon's socket) if given."""
    if terminal:
        reading, writing = pty.openpty()
        os.chown(os.ttyname(writing), who.pw_uid, -1)
    else:
        reading, writing = os.pipe()
    pid = fork_as(who)
    if pid == 0:  # the child never returns into the test
        try:
            os.dup2(writing, 1)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
            if env is None:
                os.environ.update(lab.env)
            else:  # the given environment, and only where the daemon is from lab's
                os.environ.clear()
                os.environ.update(env)
                os.environ.update({k: v for k, v in lab.env.items() if k.startswith("ASTRAEUS_")})
            if cwd is not None:
                os.chdir(cwd)
            app(args, prog_name="astra")
        finally:
            os._exit(0)
    os.close(writing)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not select.select([reading], [], [], 1)[0]:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            continue
        try:
            chunk = os.read(reading, 65536)
        except OSError:  # a pty's reader: the writer closed
            break
        if not chunk:
            break
        out += chunk
    os.close(reading)
    os.waitpid(pid, 0)
    return out.replace(b"\r\n", b"\n") if terminal else out  # a pty makes \n \r\n
