"""A real daemon in a temporary ASTRAEUS_HOME, on the process executor."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.daemon.daemon import Daemon
from runner.service.runs import Caller, caller_for
from runner.store.db import RunRow

TRAIN = Path(__file__).resolve().parents[2] / "config" / "examples" / "train.py"
PY = sys.executable


def write_config(
    home: Path, body: str = "", *, gpus: int = 4, grace: float = 2, executor: str = "process",
    machine: str = "",
) -> None:  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"""
[machine]
executor = "{executor}"
gpus = {gpus}
cpu_cores = 16
memory = "64GiB"
stop_grace_seconds = {grace}
{machine}

[admins]
users = ["root"]
"""
        + body
    )


# restarts at once: for tests of what restarts do, not of when (tests/integration/
# test_restart_backoff.py tests the back-off itself)
NO_BACKOFF = 'restart_backoff = "0s"'


def spec(
    name: str,
    argv: list[str],
    *,
    gpus: int = 0,
    cpus: float = 0,
    priority: int = 0,
    limit: int | None = None,
    workspace: str | None = None,
    drives: list[dict[str, str]] | None = None,
    workers: int = 1,
    gang: bool = True,
    restart_limit: int = 10,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "image": "local",
        "command": argv[0],
        "args": argv[1:],
        "requested_resources": {"gpu_requests": {"count": gpus}, "cpu_cores": cpus},
    }
    if limit is not None:
        task["time_limit_seconds"] = limit
    if drives:
        task["datavolume_refs"] = drives
    if env:
        task["env"] = env
    meta: dict[str, Any] = {"name": name}
    if workspace:
        meta["workspace"] = workspace
    return {
        "metadata": meta,
        "spec": {
            "priority": priority,
            "workers": workers,
            "gang": gang,
            "restart_limit": restart_limit,
            "task_template": task,
        },
    }


def sleeper(seconds: float = 600) -> list[str]:
    """A program that runs until stopped and exits at once on SIGTERM."""
    return [PY, "-c", f"import time; time.sleep({seconds})"]


def worker() -> list[str]:
    """A program that works (about half a core) until stopped: its simulated GPUs are busy,
    where a sleeper's do nothing (runner/telemetry/gpus.py ``simulate``)."""
    loop = "while True:\n t = time.monotonic()\n while time.monotonic() - t < 0.01: pass\n"
    return [PY, "-c", f"import time\n{loop} time.sleep(0.01)"]


def spinner() -> list[str]:
    """A program that wants a whole core until stopped: on a loaded machine it still gets
    far more than the 10 % of a core that keeps a simulated GPU busy, where ``worker()``'s
    half a core may fall under it for a moment (the idle tests need "never idle")."""
    return [PY, "-c", "while True:\n pass"]


def wait_for(what: Callable[[], Any], timeout: float = 30, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message or what}")
        time.sleep(0.05)


class Harness:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.root: Caller = caller_for(0, 0, daemon.config)

    def submit(self, document: dict[str, Any], caller: Caller | None = None) -> RunRow:
        return self.daemon.service.submit(document, caller or self.root)

    def run(self, name: str) -> RunRow:
        run = self.daemon.store.runs.get(name)
        assert run is not None, name
        return run

    def state(self, name: str) -> str:
        return self.run(name).state

    def reason(self, name: str) -> str:
        reason = self.run(name).reason
        return "" if reason is None else reason.render()

    def wait_state(self, name: str, *states: str, timeout: float = 30) -> RunRow:
        wait_for(lambda: self.state(name) in states, timeout, f"{name} in {states}")
        return self.run(name)

    def events(self, name: str) -> list[str]:
        return [e.message.render() for e in self.daemon.store.events.all(name)]

    def log(self, name: str) -> str:
        folder = self.daemon.home / "logs" / self.run(name).run_uid
        return (
            "".join(p.read_text() for p in sorted(folder.glob("*.log"))) if folder.exists() else ""
        )


def interruptible(argv: list[str]) -> list[str]:
    """``argv`` (a Python program's) started with Ctrl-C's signal as a terminal gives it:
    a suite started in the background (``cmd &``) has SIGINT ignored, and an ignored
    signal stays ignored across exec, so Python would never turn it into
    KeyboardInterrupt."""
    reset = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [argv[0], "-c", reset, *argv]
