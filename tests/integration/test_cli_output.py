"""What scripts read from the `astra` CLI: one JSON document, NDJSON events, one-line ls."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.support.harness import wait_for
from tests.support.served import Served

Start = Callable[..., Served]
HEADER = ["#", "NAME", "WS", "PRIO", "STATE", "GPUS", "AGE", "START", "REASON"]


def _ran(d: Served, name: str) -> None:
    out = d.astra("run", "--name", name, "--", sys.executable, "-c", "print('hi')")
    assert out.returncode == 0, out.stderr
    assert d.astra("wait", name).returncode == 0


def test_events_json_is_ndjson_with_and_without_follow(served: Start) -> None:
    d = served(gpus=1)
    _ran(d, "ev")
    out = d.astra("events", "ev", "--json")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]  # each line is one object
    assert kinds[:2] == ["Submitted", "Started"] and "Succeeded" in kinds
    follow = subprocess.Popen(
        [sys.executable, "-m", "astraeus_tui.cli.main", "events", "ev", "-f", "--json"],
        env=d.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert follow.stdout is not None
        seen = []
        while "Succeeded" not in seen:
            line = follow.stdout.readline()
            assert line, "the stream ended before the run's last event"
            seen.append(json.loads(line)["kind"])
    finally:
        follow.kill()
        follow.wait()


def test_every_json_option_prints_one_document(served: Start) -> None:
    d = served(gpus=1)
    _ran(d, "one")
    commands = [("ls", "--all"), ("show", "one"), ("why", "one"), ("gpus",), ("workspaces",),
                ("sweep", "ls"), ("replicas", "ls"), ("schedule", "ls")]  # fmt: skip
    for args in commands:
        out = d.astra(*args, "--json")
        assert out.returncode == 0, (args, out.stderr)
        json.loads(out.stdout)  # exactly one document, or this raises
    made = d.astra("run", "--name", "two", "--json", "--", "true")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["name"] == "two"


def _ls(d: Served, *args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "astraeus_tui.cli.main", "ls", *args],
        env={**d.env, "COLUMNS": "80"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_ls_is_one_line_a_run_at_80_columns_and_wide_shows_all(served: Start) -> None:
    d = served('[workspaces.default]\nmembers = ["*"]\nquota = { gpus = 2 }\n', gpus=4)
    wait = d.astra("run", "--name", "waiter", "--gpus", "3", "--", "true")
    assert wait.returncode == 0, wait.stderr
    reason = wait_for(lambda: d.json("show", "waiter")["reason"], message="a reason")
    assert len(reason) > 60
    lines = _ls(d)
    assert lines[0].split() == HEADER and len(lines) == 2
    assert all(len(line) <= 80 for line in lines)
    [waiter] = [line for line in lines if "waiter" in line]
    assert waiter.endswith("…") and reason not in waiter
    wide = " ".join(_ls(d, "--wide"))
    assert wide.split()[: len(HEADER)] == HEADER
    assert " ".join(reason.split()) in " ".join(wide.split())
