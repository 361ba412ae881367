"""Ending an exec session must never signal a process that only reuses its pid.

The session's command is its own process group; once the command has been reaped its
pid (and so the group's number) may be handed to any new process, another member's
included, and the daemon signals as root. A pid is made to be reused on purpose
(``/proc/sys/kernel/ns_last_pid``), by a process that leads a group of its own.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from runner.executors.enter import ProcessSession
from runner.sessions import STDOUT
from tests.support.pid_reuse import LAST_PID, with_pid

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not LAST_PID.exists(), reason="choosing the next pid needs root"
)


def test_a_reaped_session_s_kill_spares_the_process_that_took_its_pid() -> None:
    out_read, out_write = os.pipe()
    command = subprocess.Popen(["true"], start_new_session=True, stdout=out_write)
    os.close(out_write)
    session = ProcessSession(command, {out_read: STDOUT}, os.open(os.devnull, os.O_WRONLY), False)
    assert session.read() == (STDOUT, b"")
    assert session.wait() == 0
    victim = with_pid(command.pid)
    if victim is None:
        pytest.skip(f"other processes kept taking pid {command.pid}")
    try:
        session.kill()  # the client went away after the end, as the API does
        time.sleep(0.2)
        assert victim.poll() is None, "the session signalled a process that reused its pid"
    finally:
        victim.kill()
        victim.wait()
