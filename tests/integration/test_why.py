"""`astra why`, estimates in `astra ls`, and `astra submit --dry-run`, against a daemon."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from tests.support.harness import wait_for
from tests.support.served import Served

Start = Callable[..., Served]


def doc(name: str, gpus: int, limit: int | None = None, priority: int = 0) -> str:
    task = {"image": "local", "command": "sleep", "args": ["300"],
            "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
    if limit:
        task["time_limit_seconds"] = limit
    return json.dumps({"metadata": {"name": name},
                       "spec": {"priority": priority, "task_template": task}})  # fmt: skip


def test_why_with_levers_and_estimates(served: Start) -> None:
    d = served(gpus=4)
    d.astra("submit", "-", input=doc("busy", 3, limit=3600))
    wait_for(lambda: d.json("show", "busy")["state"] == "Running")
    d.astra("submit", "-", input=doc("big", 4, limit=3600))
    d.astra("submit", "-", input=doc("after", 1))
    wait_for(lambda: (d.json("show", "after")["reason"] or "").startswith("Queued behind big"))
    answer = d.json("why", "after")
    assert answer["reason"].startswith("Queued behind big, which starts by ")
    assert answer["chain"][0].startswith("Position 2 of 2 in the queue, priority 0: behind big")
    assert answer["chain"][1].startswith("The head, big, waits for: busy (3 GPUs) ends by ")
    levers = answer["levers"]
    assert any(lever.startswith("A time limit of at most 59 min") for lever in levers), levers
    assert answer["estimate"]["starts_by"] is not None
    listed = {r["name"]: r for r in d.json("ls")}
    assert listed["big"]["starts_by"] and listed["after"]["starts_by"]
    assert listed["after"]["starts_by"] > listed["big"]["starts_by"]
    text = d.astra("why", "after").stdout
    assert "→ A time limit of at most 59 min lets it start now by backfill." in text


def test_dry_run_writes_nothing(served: Start) -> None:
    d = served('[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n', gpus=2)
    d.astra("run", "--name", "low", "--gpus", "2", "--priority", "-5", "--", "sleep", "300")
    wait_for(lambda: d.json("show", "low")["state"] == "Running")
    db = d.home / "state.db"
    wait_for(lambda: d.json("show", "low")["reason"] is None)
    before = hashlib.sha256(db.read_bytes()).hexdigest(), d.astra("events").stdout
    preview = d.json("submit", "--dry-run", "-", input=doc("urgent", 2, priority=5))
    assert preview["position"] == 1 and preview["preempts"] == ["low"]
    assert preview["reason"] == "Preempting 1 lower-priority worker(s) of low to start"
    refused = d.astra("submit", "--dry-run", "-", input=doc("hot", 1, priority=50))
    assert refused.stderr.strip() == (
        "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace default's maximum of 10"
    )
    text = d.astra("submit", "--dry-run", "-", input=doc("later", 1, limit=60)).stdout
    assert "Nothing was submitted." in text
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), d.astra("events").stdout) == before
    assert [r["name"] for r in d.json("ls", "--all")] == ["low"]


def test_why_says_why_the_head_preempts_nothing(served: Start) -> None:
    d = served('[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n', gpus=8)
    d.astra("submit", "-", input=doc("eqa", 6, priority=10))
    d.astra("submit", "-", input=doc("lowb", 2, priority=-5))
    wait_for(lambda: d.json("show", "lowb")["state"] == "Running")
    d.astra("submit", "-", input=doc("hp", 4, priority=10))
    wait_for(lambda: d.json("show", "hp")["reason_code"] == "HEAD_WAITS")
    verdict = (
        "No preemption: eqa has priority 10 (equal, never preempted); stopping lowb "
        "(priority -5, 2 GPUs) would free 2 of the 4 GPUs needed"
    )
    answer = d.json("why", "hp")
    assert answer["preemption"] == {"code": "NO_PREEMPTION_PRIORITY", "text": verdict}
    assert answer["chain"][-1] == verdict + "."
    assert verdict + "." in d.astra("why", "hp").stdout
    assert d.json("show", "lowb")["state"] == "Running"
