"""Record what a real daemon says, for the dashboard's snapshot tests.

    python -m tests.tui.record_fixtures          # idle, head, backfill, preemption
    python -m tests.tui.record_fixtures groups   # the groups screen
    python -m tests.tui.record_fixtures slurm    # a front for Slurm (tests/slurm/setup.sh)
    python -m tests.tui.record_fixtures shared   # runs sharing GPUs by memory

Starts ``astra serve`` (process executor, 4 simulated GPUs, stop grace 8 s) in
a temporary home, plays the demo's story step by step, and writes one JSON file
per state to ``tests/tui/fixtures/``: ``idle``, ``head`` (a head waiting with a
shadow time), ``backfill`` and ``preemption`` (a victim in its grace).

Times are moved to a fixed day by a whole number of minutes, so the shadow
times in the messages (rounded up to the minute) stay true to the timestamps.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from astraeus_tui.client import Client
from runner.api.views import iso as iso_utc
from runner.runspec.groups import next_fire
from tests.support.harness import spec, wait_for
from tests.support.served import Served

FIXTURES = Path(__file__).parent / "fixtures"
BASE = datetime(2026, 10, 1, 12, 0, tzinfo=UTC).timestamp()
PY = sys.executable
WORKSPACES = """
[workspaces.vision]
members = ["*"]
max_priority = 10
weight = 2.0
quota = { gpus = 8, workers = 6 }

[workspaces.nlp]
members = ["*"]
max_priority = 0
quota = { gpus = 2 }

[workspaces.default]
members = ["*"]
"""
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
UTC_TEXT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def slow_stop(seconds: float) -> list[str]:
    """Runs until stopped; on SIGTERM takes ``seconds`` to save, then exits."""
    code = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (print('saving', flush=True),"
        f" time.sleep({seconds}), sys.exit(0)))\n"
        "print('step 0', flush=True)\n"
        "time.sleep(3600)\n"
    )
    return [PY, "-c", code]


class Shift:
    """Moves every time in a recording by a whole number of minutes."""

    def __init__(self, recorded_at: float) -> None:
        self.delta = round((BASE - recorded_at) / 60) * 60

    def iso(self, match: re.Match[str]) -> str:
        t = datetime.fromisoformat(match.group(0).replace("Z", "+00:00"))
        return (t + timedelta(seconds=self.delta)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def text(self, match: re.Match[str]) -> str:
        t = datetime.strptime(match.group(0), "%Y-%m-%d %H:%M UTC").replace(tzinfo=UTC)
        return (t + timedelta(seconds=self.delta)).strftime("%Y-%m-%d %H:%M UTC")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return UTC_TEXT.sub(self.text, ISO.sub(self.iso, value))
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value


def record(client: Client, name: str, home: Path) -> None:
    at = time.time()
    runs = client.runs()
    named = [r.name for r in runs if r.visible]
    groups = client.groups()
    answers = {
        "now": at,
        "status": client.status(),
        "gpus": client.gpus(),
        "workspaces": client.workspaces(),
        "snapshot": runs,
        "runs": {n: client.show(n) for n in named},
        "events": {n: list(client.events(n)) for n in named},
        "logs": {n: b"".join(client.logs(n, tail=200)).decode() for n in named},
        "groups": groups,
        "group": {g.name: client.group(g.name) for g in groups},
    }
    data: dict[str, Any] = msgspec.to_builtins(answers)  # the Structs as the daemon sent them
    shift = Shift(at)
    data = shift(data)
    data["now"] = at + shift.delta
    for g in [*data["groups"], *data["group"].values()]:  # a cron's times are not shifted
        if g["kind"] == "schedule" and g["next_at"]:
            g["next_at"] = iso_utc(next_fire(g["cron"], data["now"]))
    text = json.dumps(data, indent=1, sort_keys=True)
    (FIXTURES / f"{name}.json").write_text(text.replace(str(home), "/home/astra") + "\n")
    print(f"recorded {name}: {len(runs)} runs")


def state(client: Client, run: str) -> str:
    return str(client.show(run).state)


def play(client: Client, home: Path) -> None:
    record(client, "idle", home)
    client.submit(spec("ft-lowprio", slow_stop(6), gpus=1, priority=-10, limit=1800,
                       workspace="nlp"))  # fmt: skip
    client.submit(spec("eval-nightly", slow_stop(0), gpus=2, limit=2700, workspace="vision"))
    wait_for(lambda: state(client, "eval-nightly") == "Running", 20, "eval-nightly")
    client.submit(spec("pretrain-7b", slow_stop(0), gpus=3, limit=7200, workspace="vision"))
    client.submit(spec("sweep-lr", slow_stop(0), gpus=2, workspace="vision"))
    client.submit(spec("nlp-big", slow_stop(0), gpus=2, limit=3600, workspace="nlp"))
    wait_for(lambda: client.show("pretrain-7b").head, 20, "a head")
    time.sleep(0.5)
    record(client, "head", home)
    client.submit(spec("quick-test", slow_stop(0), gpus=1, limit=600, workspace="vision"))
    wait_for(lambda: state(client, "quick-test") == "Running", 20, "the backfill")
    time.sleep(1.0)
    record(client, "backfill", home)
    client.submit(spec("urgent-fix", slow_stop(0), gpus=1, priority=10, limit=1200,
                       workspace="vision"))  # fmt: skip
    wait_for(lambda: state(client, "ft-lowprio") == "Stopping", 20, "the preemption")
    time.sleep(1.5)
    record(client, "preemption", home)


def play_groups(client: Client, home: Path) -> None:
    """A replica group, a sweep, a schedule and a chain: the groups screen's picture."""
    pool = spec("eval-pool", slow_stop(0), gpus=1, workspace="vision")
    client.create_group({"kind": "replicas", "replicas": 2, "template": pool})
    sweep = spec("lr-sweep", slow_stop(0), gpus=1, limit=1800, workspace="vision")
    client.create_group({"kind": "sweep", "template": sweep, "grid": {"LR": [0.1, 0.01, 0.001]}})
    nightly = spec("nightly-eval", slow_stop(0), gpus=2, limit=3600, workspace="vision")
    client.create_group({"kind": "schedule", "template": nightly, "cron": "0 3 * * *"})
    wait_for(lambda: state(client, "lr-sweep-1") == "Running", 20, "the sweep")
    time.sleep(0.5)
    record(client, "groups", home)


def play_slurm(client: Client, home: Path) -> None:
    """The backfill scene on a front for the real Slurm of tests/slurm/setup.sh."""
    client.submit(spec("pretrain-7b", slow_stop(0), gpus=4, limit=180, workspace="vision"))
    wait_for(lambda: state(client, "pretrain-7b") == "Running", 30, "the blocker")
    client.submit(spec("finetune-70b", slow_stop(0), gpus=6, limit=120, workspace="vision"))
    client.submit(spec("quick-eval", slow_stop(0), gpus=2, limit=60, workspace="vision"))
    client.submit(spec("sweep-lr", slow_stop(0), gpus=2, limit=600, workspace="vision"))
    wait_for(lambda: state(client, "quick-eval") == "Running", 60, "the backfill")
    wait_for(lambda: client.show("finetune-70b").head, 60, "Slurm's head")
    time.sleep(2)
    record(client, "slurm", home)
    for name in ("pretrain-7b", "finetune-70b", "quick-eval", "sweep-lr"):
        client.delete(name)


def shared_spec(name: str, gib: int, **kwargs: Any) -> dict[str, Any]:
    """A run sharing one GPU: ``gib`` GiB of it."""
    doc = spec(name, slow_stop(0), **kwargs)
    doc["spec"]["task_template"]["requested_resources"]["gpu_requests"] = {
        "count": 1, "memory_bytes": gib * 1024**3, "shared": True}  # fmt: skip
    return doc


def play_shared(client: Client, home: Path) -> None:
    """Small runs packed by memory beside whole-GPU work: the GPU panel's shares."""
    client.submit(spec("pretrain-7b", slow_stop(0), gpus=2, limit=7200, workspace="vision"))
    wait_for(lambda: state(client, "pretrain-7b") == "Running", 20, "the whole-GPU run")
    for name, gib, ws in (("eval-a", 20, "vision"), ("notebook", 30, "nlp"),
                          ("eval-b", 40, "vision"), ("eval-c", 30, "vision")):  # fmt: skip
        client.submit(shared_spec(name, gib, limit=1800, workspace=ws))
    wait_for(lambda: state(client, "eval-c") == "Running", 20, "the packing")
    client.submit(shared_spec("eval-d", 50, limit=1800, workspace="vision"))
    wait_for(lambda: client.show("eval-d").head, 20, "a shared head")
    time.sleep(0.5)
    record(client, "shared", home)


SLURM_CONFIG = """
[workspaces.vision]
members = ["*"]
max_priority = 100

[slurm]
privileged = true
partition = "low"
priority_partitions = { high = 100 }
log_dir = "/tmp"
"""


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="astra-record-"))
    what = sys.argv[1] if sys.argv[1:] else ""
    if what == "slurm":
        served = Served(home, home / "astraeus.sock").start(
            SLURM_CONFIG, gpus=8, grace=5, executor="slurm"
        )
    else:
        served = Served(home, home / "astraeus.sock").start(WORKSPACES, gpus=4, grace=8)
    plays = {"groups": play_groups, "slurm": play_slurm, "shared": play_shared}
    try:
        plays.get(what, play)(Client(served.socket), home)
    finally:
        served.stop()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
