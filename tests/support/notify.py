"""Notifications in the tests: an HTTP server on 127.0.0.1 that keeps what it is sent
(``Receiver``), a failure notice (``NOTICE``) and an outbox kept in memory (``FakeOutbox``)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runner.notify.outbox import Notice, Pending
from runner.notify.targets import NotifyEvent


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every POST's JSON body."""

    def __init__(self) -> None:
        with socket.socket() as s:  # a free port, to start (and stop, and start) on
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.posts: list[dict[str, Any]] = []
        self.begun = 0  # requests that arrived (answered or not)
        self.hold = threading.Event()  # answers wait until it is set (at most 20 s)
        self.hold.set()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.begun += 1
                receiver.hold.wait(20)
                length = int(self.headers.get("Content-Length", "0"))
                receiver.posts.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.hold.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def notices(self) -> list[dict[str, Any]]:
        """The notifications received, as the fields of their message."""
        return [json.loads(p["message"]) for p in list(self.posts)]

    def events_of(self, run: str) -> list[str]:
        return [n["event"] for n in self.notices() if n["run"] == run]


NOTICE = Notice(NotifyEvent.FAILED, "train", "0" * 32, "vision", "Failed", 3, "Failed: exit 3", 1.0)


class FakeOutbox:
    def __init__(self, rows: list[Pending]) -> None:
        self.rows = {r.id: r for r in rows}
        self.log: list[tuple[str, int, str]] = []

    def pending(self, limit: int) -> list[Pending]:
        return list(self.rows.values())[:limit]

    def delivered(self, row: Pending) -> None:
        self.log.append(("delivered", row.id, ""))
        del self.rows[row.id]

    def retry(self, row: Pending, error: str) -> None:
        self.log.append(("retry", row.id, error))
        self.rows[row.id] = Pending(row.id, row.url, row.label, row.notice, row.attempts + 1)

    def fail(self, row: Pending, error: str) -> None:
        self.log.append(("failed", row.id, error))
        del self.rows[row.id]
