"""The restart back-off through a real daemon: a program that fails at once does not spend
its restart budget in seconds, waits Queued with its reason and ``restart_at`` while
holding nothing, still spends its budget in the end, and says it exits at once."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.support.harness import spec, wait_for
from tests.support.served import Served

HINT = "it exits at once: check its command, folder and environment"
TYPO = ["python3", "-c", "import sys; sys.exit(2)"]  # as a mistyped script fails: exit 2


def _at(message: str) -> str:
    """The message with the time its wait ends as ``…``."""
    return re.sub(r"^Restarting at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC ", "Restarting at … ",
                  message)  # fmt: skip


def _submit(lab: Served, document: dict[str, Any]) -> None:
    done = lab.astra("submit", "-", input=json.dumps(document))
    assert done.returncode == 0, done.stderr


def _starts(run: dict[str, Any]) -> list[str]:
    """The start time of each attempt (worker 0's)."""
    return [w["started_at"] for w in run["workers_history"] if w["worker"] == 0]


def test_a_failing_program_restarts_at_most_three_times_in_its_first_15_s(
    served: Callable[..., Served],
) -> None:
    lab = served(gpus=1)  # the default back-off: 10 s, doubling
    begun = time.monotonic()
    _submit(lab, spec("typo", TYPO, gpus=1))
    wait_for(lambda: lab.json("show", "typo")["restarts"] == 1, 10, "the first failure")
    run = lab.json("show", "typo")
    assert run["state"] == "Queued" and run["reason_code"] == "RESTARTING"
    # the end of its wait, as a time (a stored reason cannot count down), the second
    # restart_at and the START column give; its date only on another day
    at = run["restart_at"]
    said = "(restart 1 of 10): worker 0 exited with code 2"
    assert run["reason"] in (f"Restarting at {at[11:19]} UTC {said}",
                             f"Restarting at {at[:10]} {at[11:19]} UTC {said}")  # fmt: skip
    assert "restart_at" in run and run["gpus"] == []  # it holds nothing while it waits
    why = lab.json("why", "typo")
    assert why["reason"] == run["reason"] and "never the head" in why["chain"][0]
    shown = lab.astra("show", "typo").stdout
    assert f"restart_at:         {run['restart_at']}" in shown
    listed = lab.astra("ls").stdout.splitlines()[1]  # START: when it starts again
    assert listed.split()[6] == run["restart_at"][11:19], listed
    assert lab.astra("hold", "typo").returncode == 0  # held: it starts only once released
    listed = lab.astra("ls").stdout.splitlines()[1]
    assert run["restart_at"][11:19] not in listed and "Held by" in listed, listed
    assert lab.json("why", "typo")["chain"] == [
        "Out of the queue's order while this lasts: it holds nothing back and is never the head."
    ]
    assert lab.astra("release", "typo").returncode == 0
    # the GPU it held is free: another run takes it at once while it waits
    _submit(lab, spec("other", ["sleep", "30"], gpus=1))
    wait_for(lambda: lab.json("show", "other")["state"] == "Running", 10, "the other run")
    lab.astra("delete", "other")
    time.sleep(max(0.0, 15 - (time.monotonic() - begun)))
    run = lab.json("show", "typo")
    assert len(_starts(run)) <= 3, run["workers_history"]
    assert run["restarts"] <= 3
    lab.astra("delete", "typo")


def test_the_budget_is_still_spent_and_a_typo_reads_as_one(
    served: Callable[..., Served],
) -> None:
    lab = served(gpus=1, machine='restart_backoff = "1s"\nrestart_backoff_max = "2s"')
    _submit(lab, spec("typo", TYPO, gpus=1, restart_limit=3))
    wait_for(lambda: lab.json("show", "typo")["state"] == "Failed", 30, "the budget spent")
    run = lab.json("show", "typo")
    assert run["reason"] == (
        f"Failed: worker 0 exited with code 2; the restart budget (3) is spent; {HINT}"
    )
    restarting = [(_at(e["message"]), e["code"]) for e in run["events"]
                  if e["kind"] == "Restarting"]  # fmt: skip
    assert restarting == [
        ("Restarting at … (restart 1 of 3): worker 0 exited with code 2", "RESTARTING"),
        ("Restarting at … (restart 2 of 3): worker 0 exited with code 2", "RESTARTING"),
        (f"Restarting at … (restart 3 of 3): worker 0 exited with code 2; {HINT}",
         "RESTARTING"),
    ]  # fmt: skip
    assert "restart_at" not in run
    finished = [w["finished_at"] for w in run["workers_history"] if w["worker"] == 0]
    gaps = [_seconds(b) - _seconds(a) for a, b in zip(finished, _starts(run)[1:], strict=False)]
    assert len(gaps) == 3
    assert all(g >= wait - 0.25 for g, wait in zip(gaps, (1, 2, 2), strict=True)), gaps


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
