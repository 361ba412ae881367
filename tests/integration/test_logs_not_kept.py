"""A run keeps only its newest attempts' output (runner/engine/retention.py): `astra logs`
says which attempts' it no longer has before the output it has, on a real daemon."""

from __future__ import annotations

from collections.abc import Callable

from runner.engine.retention import ATTEMPT_LOGS_KEPT
from tests.support.harness import wait_for
from tests.support.served import Served

Start = Callable[..., Served]


def test_logs_say_which_attempts_output_is_not_kept(served: Start) -> None:
    d = served(gpus=1, machine='restart_backoff = "0s"')
    program = "echo attempt $ASTRAEUS_RESTART_COUNT; exit 1"
    out = d.astra("run", "--name", "flaky", "--restarts", "6", "--", "sh", "-c", program)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: d.json("show", "flaky")["state"] == "Failed", 60, "flaky to fail")
    first, *lines = d.astra("logs", "flaky").stdout.splitlines()
    assert ATTEMPT_LOGS_KEPT == 4
    assert (
        first == "[astraeus: output of attempts 1-3 not kept: a run keeps its newest 4 attempts']"
    )
    assert lines == [f"attempt {a}" for a in range(3, 7)]
    # the last lines asked for are only output
    assert d.astra("logs", "flaky", "--tail", "2").stdout.splitlines() == ["attempt 5", "attempt 6"]
    d.astra("run", "--name", "once", "--", "sh", "-c", "echo only")
    wait_for(lambda: d.json("show", "once")["state"] == "Succeeded", 30, "once to end")
    assert d.astra("logs", "once").stdout == "only\n"  # every attempt's kept: nothing said
