"""``astra`` in a pseudo-terminal, read as a person reads it and typed into as a person types."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

from tests.support.served import Served


def shell_in_terminal(lab: Served, name: str, prompt: bytes) -> None:
    """``astra exec -it NAME -- sh`` in a terminal, typed into as a person would."""
    pid, fd = astra_in_terminal(lab, "exec", "-it", name, "--", "sh")
    shown = read_until(fd, prompt, 30)  # typed before the prompt, it would be lost
    assert prompt in shown, shown
    os.write(fd, b"echo hi-$((1+2)); tty; exit 4\n")
    out = read_until(fd, None, 30)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 4
    assert b"hi-3\r\n/dev/pts/" in out


def read_until(fd: int, wanted: bytes | None, timeout: float) -> bytes:
    """What the terminal shows until ``wanted`` ends it (None: until it closes)."""
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end and not (wanted and wanted in out):
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    return out


def astra_in_terminal(lab: Served, *args: str) -> tuple[int, int]:
    """``astra ARGS`` in a child whose terminal is a pseudo-terminal: (pid, its master)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(lab.env)
        os.execv(sys.executable, [sys.executable, "-m", "astraeus_tui.cli.main", *args])
    return pid, fd
