"""Notifications: what the outbox adds to a commit, and how soon a notification arrives.

Run by hand: ``.venv/bin/python bench/bench_notify.py [N]``.

1. The commit of a run's end (``store.runs.finish`` and its ``Succeeded`` event) with no
   notification asked for, and with one URL in the run's ``spec.notify`` (its outbox row
   written in the same transaction): median per commit, on disk and on /dev/shm (where
   no fsync hides the work done in the process). Target: the row adds <= 1 ms.
2. From a run's ``Succeeded`` event (its time) to the json:// POST reaching a receiver
   on 127.0.0.1, through a real daemon on the process executor: median and the
   slowest of N. Target: median <= 1 s (the sender is woken by the commit, not polled).
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from runner.daemon.daemon import Daemon
from runner.model import RunState
from runner.reasons import Reason, ReasonCode
from runner.service.runs import caller_for
from runner.store.db import RunRow, Store, new_run_uid


def commits(n: int, notify: bool, where: str | None = None) -> float:
    """Median seconds of one commit of a run's end, over ``n`` runs; ``where``: the
    folder of the state (``/dev/shm``: no disk, so the work in the process shows)."""
    with tempfile.TemporaryDirectory(dir=where) as home:
        store = Store(Path(home) / "state.db")
        spec: dict[str, object] = {"metadata": {"name": "x"}, "spec": {}}
        if notify:
            spec["spec"] = {"notify": [{"url": "json://127.0.0.1:9/hook"}]}
        for i in range(n):
            row = RunRow(f"r{i}", "default", "root", 0, 0, json.dumps(spec), 0, RunState.RUNNING,
                         None, time.time(), None, None, None, 0, 0, 1, None, None, False,
                         run_uid=new_run_uid())  # fmt: skip
            store.runs.insert(row)
        times = []
        for i in range(n):
            start = time.perf_counter()
            with store.transaction() as tx:
                store.runs.finish(tx, f"r{i}", RunState.SUCCEEDED, time.time(), exit_code=0)
                store.events.add(
                    tx,
                    f"r{i}",
                    "default",
                    ReasonCode.SUCCEEDED,
                    Reason("Succeeded", code=ReasonCode.MESSAGE),
                )
            times.append(time.perf_counter() - start)
        assert len(store.outbox.pending(n + 1)) == (n if notify else 0)
        store.close()
        return statistics.median(times)


def latency(n: int) -> list[float]:
    """Seconds from each run's Succeeded event to its POST arriving."""
    arrived: dict[str, float] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            arrived[json.loads(body["message"])["run"]] = time.time()
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "config.toml").write_text('[machine]\nexecutor = "process"\ngpus = 1\n')
        daemon = Daemon(Path(home)).start()
        root = caller_for(0, 0, daemon.config)
        try:
            for i in range(n):
                task = {"image": "local", "command": sys.executable, "args": ["-c", "pass"]}
                notify = [{"url": f"json://127.0.0.1:{port}/hook"}]
                doc = {"metadata": {"name": f"n{i}"},
                       "spec": {"task_template": task, "notify": notify}}  # fmt: skip
                daemon.service.submit(doc, root)
                deadline = time.monotonic() + 30
                while f"n{i}" not in arrived and time.monotonic() < deadline:
                    time.sleep(0.01)
            out = []
            for i in range(n):
                ended = [e.time for e in daemon.store.events.all(f"n{i}") if e.kind == "Succeeded"]
                out.append(arrived[f"n{i}"] - ended[0])
            return out
        finally:
            daemon.stop()
            server.shutdown()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for where in (None, "/dev/shm"):
        if where is not None and not Path(where).is_dir():
            continue
        plain, queued = commits(n, False, where), commits(n, True, where)
        print(f"commit of a run's end ({where or 'disk'}): {plain * 1e3:.2f} ms without, "
              f"{queued * 1e3:.2f} ms with its outbox row ({(queued - plain) * 1e3:+.2f} ms;"
              f" median of {n})")  # fmt: skip
    waits = latency(max(5, n // 20))
    print(f"Succeeded event -> POST received: median {statistics.median(waits) * 1e3:.0f} ms, "
          f"slowest {max(waits) * 1e3:.0f} ms (of {len(waits)})")  # fmt: skip


if __name__ == "__main__":
    main()
