"""Test hooks: points where the daemon can be made to die, as with kill -9."""

from __future__ import annotations

import os

CRASH_AT = "ASTRAEUS_TEST_CRASH_AT"
_crash_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """A test hook: the daemon dies here, as with kill -9, when ``ASTRAEUS_TEST_CRASH_AT`` says so.

    ``ASTRAEUS_TEST_CRASH_AT=<point>[:N]`` makes the daemon exit at once with status 137
    (``os._exit``: nothing cleaned up, no transaction finished) the Nth time (default: the
    first) it reaches ``<point>``. Unset, as always outside tests, it does nothing. Points:
    ``after-executor-start`` (a worker runs; its row does not say so yet: in
    runner/engine/starts.py's launch_for), ``after-stop-recorded`` (Stopping written,
    SIGTERM not sent) and
    ``after-kill-recorded`` (the SIGKILL written, not sent: both in runner/engine/loop.py).
    tests/faults/ and bench/chaos.py use them.
    """
    wanted = os.environ.get(CRASH_AT)
    if not wanted:
        return
    point, _, count = wanted.partition(":")
    if point != name:
        return
    _crash_hits[name] = hits = _crash_hits.get(name, 0) + 1
    if hits >= int(count or "1"):
        os._exit(137)
