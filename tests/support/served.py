"""`astra serve` as a real process on a real socket, and `astra` commands against it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.harness import wait_for, write_config


class Served:
    def __init__(self, home: Path, socket: Path) -> None:
        self.home = home
        self.socket = socket
        self.env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_SOCKET": str(socket),
                    "COLUMNS": "200", "ASTRAEUS_WAIT_POLL": "0.1"}  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, config: str = "", **kwargs: Any) -> Served:
        write_config(self.home, config, **kwargs)
        return self.restart()

    def kill9(self) -> None:
        """The daemon dies at once, as in a crash; its workers go on."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def restart(self) -> Served:
        log = open(self.home / "serve.log", "ab")  # noqa: SIM115 (the daemon's log)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "astraeus_tui.cli.main", "serve"],
            env=self.env, stdout=log, stderr=log,
        )  # fmt: skip
        wait_for(self.answers, 20, "the daemon's socket")
        return self

    def answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError((self.home / "serve.log").read_text())
        return self.socket.exists() and self.astra("ls").returncode == 0

    def astra(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """``astra ARGS`` as root, in a new interpreter. As another user, fork instead
        (tests/support/users.py ``fork_as``): a member may not read this interpreter's files."""
        return subprocess.run(
            [sys.executable, "-m", "astraeus_tui.cli.main", *args],
            env=self.env, input=input, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def json(self, *args: str, input: str | None = None) -> Any:
        result = self.astra(*args, "--json", input=input)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for meta in (self.home / "workers").glob("*/meta.json"):
            pgid = json.loads(meta.read_text()).get("child_pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.05)


def indented(raw: bytes) -> str:
    """What ``--json`` prints for the daemon's answer ``raw``: its JSON, indented."""
    return json.dumps(json.loads(raw), indent=2) + "\n"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for a listener to start on)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
