"""A change stream whose reader stalls cannot make the daemon keep a backlog for it.

A client opens ``GET /v1/stream`` on the real socket and reads nothing while 5,000
runs are submitted in a hundred batches, each batch a diff or more. The daemon keeps
at most ``QUEUE_MAX`` unsent diffs for a stream: past them, the stream is owed one
fresh snapshot instead. When the reader reads at last it gets a few changes and a
second snapshot, not every diff, and the runs it ends up with are the daemon's.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

from astraeus_tui.client import Client
from runner.api.streams import QUEUE_MAX
from tests.support.harness import wait_for
from tests.support.served import Served

RUNS, BATCHES = 5000, 100


def _doc(name: str) -> str:
    task = {
        "command": "sleep",
        "args": ["60"],
        "requested_resources": {"gpu_requests": {"count": 1}},
    }
    return json.dumps({"metadata": {"name": name}, "spec": {"task_template": task}})


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _events(data: bytes) -> list[tuple[str, Any]]:
    """The stream's messages after the HTTP head (chunked: each chunk's size line dropped)."""
    body = data.split(b"\r\n\r\n", 1)[1]
    out, rest = [], b""
    while body:  # undo the chunked transfer coding
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        rest += body[:size]
        body = body[size + 2 :]
    for message in rest.split(b"\n\n"):
        lines = dict(line.split(b": ", 1) for line in message.split(b"\n") if b": " in line)
        if b"event" in lines:
            out.append((lines[b"event"].decode(), json.loads(lines[b"data"])))
    return out


def test_a_stream_that_never_reads_is_resynced_not_queued(
    served: Callable[..., Served],
) -> None:
    d = served(gpus=1, machine=f"max_submit_per_user = {RUNS + 10}")
    assert d.proc is not None
    client = Client(d.socket, timeout=120)
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(d.socket))
    stalled.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: astraeus\r\n\r\n")
    rss_before = _rss_kib(d.proc.pid)
    per = RUNS // BATCHES
    for b in range(BATCHES):  # each batch its own diff (they are DIFF_GAP apart)
        lines = "\n".join(_doc(f"r-{b}-{i}") for i in range(per))
        answer = client.submit_batch(lines.encode())
        assert answer.accepted == per, answer
        time.sleep(0.25)
    wait_for(lambda: len(client.runs()) == RUNS, 60, "every run stored")
    time.sleep(1.0)  # the last diffs made
    rss_after = _rss_kib(d.proc.pid)

    stalled.settimeout(3.0)
    data = b""
    while True:  # now read it all: what the daemon kept for this stream
        try:
            got = stalled.recv(1 << 20)
        except TimeoutError:
            break
        if not got:
            break
        data += got
    stalled.close()
    events = _events(data)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "snapshot" and kinds.count("snapshot") >= 2, kinds  # resynced
    last = max(i for i, kind in enumerate(kinds) if kind == "snapshot")
    assert kinds[last + 1 :].count("change") <= QUEUE_MAX, kinds
    assert kinds.count("change") < BATCHES, kinds  # not one message a diff

    runs: dict[str, Any] = {}
    for kind, message in events:  # as the dashboard applies them
        if kind == "snapshot":
            runs = {r["id"]: r for r in message["runs"]}
        else:
            runs.update({r["id"]: r for r in message["upsert"]})
            for rid in message["remove"]:
                runs.pop(rid, None)
    assert len(runs) == RUNS
    print(f"daemon RSS {rss_before} KiB before, {rss_after} KiB after; {len(kinds)} messages")
