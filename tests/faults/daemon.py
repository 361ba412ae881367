"""A real ``astra serve`` process for the fault tests: start, kill -9, ask, read its state.

Lighter than tests/support/served.py: the API is asked through the client library
(no ``astra`` process per question), the daemon's output goes to a file of the test's
choosing (outside ASTRAEUS_HOME, which may be a tiny tmpfs), and its state database can
be read directly, read-only, while it is dead.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from astraeus_tui.client import ApiError, Client
from runner.executors.base import ExecutorError
from runner.executors.process import ProcessExecutor
from tests.support.harness import wait_for

PY = sys.executable
CONNECTION_ERRORS = (ApiError, OSError, http.client.HTTPException)

WORKSPACE = '[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'


def write_config(
    home: Path, *, gpus: int = 4, cores: int = 8, grace: float = 1, executor: str = "process",
    machine: str = "",
) -> None:  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[machine]\nexecutor = "{executor}"\ngpus = {gpus}\ncpu_cores = {cores}\n'
        f'memory = "64GiB"\nstop_grace_seconds = {grace}\n{machine}\n[admins]\nusers = ["root"]\n'
        + WORKSPACE
    )


def document(
    name: str, argv: list[str], *, gpus: int = 0, cpus: float = 0, priority: int = 0,
    workers: int = 1, restart_limit: int = 10, limit: int | None = None,
    image: str = "local",
) -> dict[str, Any]:  # fmt: skip
    task: dict[str, Any] = {
        "image": image,
        "command": argv[0],
        "args": argv[1:],
        "requested_resources": {"gpu_requests": {"count": gpus}, "cpu_cores": cpus},
    }
    if limit is not None:
        task["time_limit_seconds"] = limit
    spec = {"priority": priority, "workers": workers, "restart_limit": restart_limit,
            "task_template": task}  # fmt: skip
    return {"metadata": {"name": name}, "spec": spec}


class DaemonProcess:
    """``python -m astraeus_tui.cli.main serve`` with ASTRAEUS_HOME=home."""

    def __init__(self, home: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.socket = home / "astraeus.sock"
        self.log = log
        self.env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_SOCKET": str(self.socket),
                    "ASTRAEUS_LOG": "WARNING", **(env or {})}  # fmt: skip
        self.env.pop("ASTRAEUS_TEST_CRASH_AT", None)
        self.proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------ life

    def spawn(self, **env: str) -> subprocess.Popen[bytes]:
        """Start it; do not wait for the socket."""
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [PY, "-m", "astraeus_tui.cli.main", "serve"],
                env={**self.env, **env}, stdout=out, stderr=out,
            )  # fmt: skip
        return self.proc

    def start(self, timeout: float = 30, **env: str) -> DaemonProcess:
        self.spawn(**env)
        wait_for(self.answers, timeout, "the daemon's socket")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the daemon exited ({self.proc.returncode}): {self.tail()}")
        return self.socket_answers()

    def socket_answers(self) -> bool:
        try:
            self.client(timeout=5).request("GET", "/v1/status")
        except CONNECTION_ERRORS:
            return False
        return True

    def kill9(self) -> int:
        """Dead at once, as in a crash; its workers go on. Returns its exit status."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        return self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def stop_all_runs(self, timeout: float = 20) -> None:
        """Delete every active run and wait for them to end (best effort: for teardowns)."""
        with contextlib.suppress(Exception):
            if self.alive():
                for run in self.active():
                    self.client().request("DELETE", f"/v1/runs/{run['name']}")
                wait_for(lambda: not self.active(), timeout, "the runs to stop")

    def kill_workers(self) -> None:
        """End every process of every process worker (after a test, whatever happened)."""
        workers = ProcessExecutor(self.home / "workers")
        for worker in workers.list_workers():
            with contextlib.suppress(ExecutorError):
                workers.signal(worker.handle, signal.SIGKILL)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ------------------------------------------------------------ asking

    def client(self, timeout: float = 10) -> Client:
        return Client(self.socket, timeout=timeout)

    def submit(self, doc: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.client().request("POST", "/v1/runs", doc)
        return result

    def run(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.client().request("GET", f"/v1/runs/{name}")
        return result

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.client().request("GET", "/v1/status")
        return result

    def active(self) -> list[dict[str, Any]]:
        result: dict[str, Any] = self.client().request("GET", "/v1/runs")
        runs: list[dict[str, Any]] = result["runs"]
        return runs

    def wait_state(self, name: str, *states: str, timeout: float = 30) -> dict[str, Any]:
        found: dict[str, Any] = wait_for(
            lambda: (r := self.run(name))["state"] in states and r, timeout, f"{name} in {states}"
        )
        return found

    @contextlib.contextmanager
    def database(self) -> Iterator[sqlite3.Connection]:
        """The state database, read-only (through its WAL): for a dead or live daemon."""
        conn = sqlite3.connect(f"file:{self.home / 'state.db'}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        finally:
            conn.close()


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def pids_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            alive.append(pid)
    return alive


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members
