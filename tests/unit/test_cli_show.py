"""``astra show``'s worker lines, from the run object's ``workers_history``."""

from __future__ import annotations

import msgspec

from astraeus_tui.cli.fast.show import worker_lines as _worker_lines
from runner.schema import Worker


def test_each_worker_says_its_state_and_whom_its_preemption_is_for() -> None:
    history = [
        {"attempt": 1, "worker": 0, "state": "Running", "stop_reason": None},
        {"attempt": 1, "worker": 1, "state": "Stopping", "stop_reason": "preempt",
         "stopping_for": "a job in another namespace"},
        {"attempt": 1, "worker": 2, "state": "Cancelled", "stop_reason": "delete", "killed": True},
    ]  # fmt: skip
    assert _worker_lines(msgspec.convert(history, list[Worker])) == [
        "  attempt 1 worker 0  Running",
        "  attempt 1 worker 1  Stopping (preempted by a job in another namespace)",
        "  attempt 1 worker 2  Cancelled (delete, SIGKILL)",
    ]
