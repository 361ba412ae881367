"""Work done as the member: in a child of the supervisor that dropped to its uid:gid.

The drives are placed, and the program looked up, this way (never with root's rights),
within PLACE_TIMEOUT seconds.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from runner.executors.sandbox import PlacementError
from runner.executors.workerfiles import Job
from runner.oneline import one_line

PLACE_TIMEOUT = 5.0  # seconds the member's child may take to place the drives


def as_member(job: Job, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()`` in a child that is the job's uid:gid and its supplementary groups.

    Its answer comes back as JSON; a PlacementError's (or any error's) one line is raised
    here as a PlacementError. The supervisor is single-threaded, so fork is safe.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _answer_as_member(job, work, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    data = read_within(read_end, pid, PLACE_TIMEOUT)
    try:
        answer = json.loads(data)
    except ValueError:
        raise PlacementError("the drives could not be placed (no answer)") from None
    if "ok" not in answer:
        raise PlacementError(str(answer.get("error")))
    ok: dict[str, Any] = answer["ok"]
    return ok


def read_within(read_end: int, pid: int, timeout: float) -> bytes:
    """The child's whole answer, or PlacementError once ``timeout`` s pass (a mount path on
    a file system that does not answer, a member's own FUSE mount): the child is killed,
    and the start fails instead of hanging."""
    deadline, chunks = time.monotonic() + timeout, list[bytes]()
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 65536)
            if not chunk:
                os.waitpid(pid, 0)
                return b"".join(chunks)
            chunks.append(chunk)
        os.kill(pid, signal.SIGKILL)
        _reap_within(pid, 1.0)
        raise PlacementError(
            f"the drives could not be placed within {timeout:g} s: a mount path's file"
            " system does not answer"
        )
    finally:
        os.close(read_end)


def _reap_within(pid: int, timeout: float) -> None:
    """Reap a killed child, waiting at most ``timeout`` s (one stuck in the kernel stays a
    zombie until the supervisor exits, rather than hold up the start)."""
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)


def _answer_as_member(job: Job, work: Callable[[], dict[str, Any]], write_end: int) -> None:
    try:
        if job.uid is not None:
            os.setgroups(job.groups)
            os.setgid(job.gid if job.gid is not None else job.uid)
            os.setuid(job.uid)
        answer: dict[str, Any] = {"ok": work()}
    except Exception as exc:
        answer = {"error": one_line(exc)}
    with os.fdopen(write_end, "wb") as out:
        out.write(json.dumps(answer).encode())
