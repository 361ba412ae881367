"""A pid made to be reused on purpose (``/proc/sys/kernel/ns_last_pid``, root only), for the
tests that ending a session after its command never signals the process that took its pid."""

from __future__ import annotations

import subprocess
from pathlib import Path

LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
TRIES = 200


def with_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """A new group leader (as ``nobody``) with pid ``pid``; None if others took it."""
    for _ in range(TRIES):
        LAST_PID.write_text(str(pid - 1))
        victim = subprocess.Popen(["sleep", "60"], start_new_session=True, user="nobody")
        if victim.pid == pid:
            return victim
        victim.kill()
        victim.wait()
    return None
