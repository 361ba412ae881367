"""A queue long enough that the change stream's snapshot runs past half a megabyte on one
line: a blocker on the only GPU and ``QUEUED`` runs behind it, submitted on one connection."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path

from tests.support.harness import spec

QUEUED = 750  # past 512 KiB of run objects: more than aiohttp's readline takes at once
SLEEP = ["sleep", "600"]


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.path))


def fill(path: Path, count: int) -> None:
    """A blocker on the only GPU, then ``count`` one-GPU runs: one kept-alive connection."""
    conn = _Unix(path)
    for i, name in enumerate(["blocker", *(f"wait-{i:04d}" for i in range(count))]):
        body = json.dumps(spec(name, SLEEP, gpus=1)).encode()
        conn.request("POST", "/v1/runs", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 201, (i, answer.read())
        answer.read()
    conn.close()
