"""The supervisor's child that places drives as the member answers in time or is killed.

A mount path on a file system that never answers (a member's own FUSE mount, a hung
network share) must fail the start with one line, not hang the supervisor and the start.
"""

from __future__ import annotations

import os
import time

import pytest

from runner.executors.member import read_within
from runner.executors.sandbox import PlacementError


def _child(write: int, read: int, answer: bytes, delay: float) -> int:
    pid = os.fork()
    if pid == 0:
        os.close(read)
        time.sleep(delay)
        os.write(write, answer)
        os._exit(0)
    os.close(write)
    return pid


def test_a_child_that_answers_in_time_is_heard() -> None:
    read, write = os.pipe()
    pid = _child(write, read, b'{"ok": {}}', 0.1)
    assert read_within(read, pid, 5) == b'{"ok": {}}'


def test_a_child_that_hangs_is_killed_and_the_start_fails_in_one_line() -> None:
    read, write = os.pipe()
    pid = _child(write, read, b"late", 30)
    with pytest.raises(PlacementError, match=r"could not be placed within 0\.5 s"):
        read_within(read, pid, 0.5)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(pid, 0)
