"""`astra sweep|replicas|schedule` and `--after` through a served daemon and its socket."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.integration.group_docs import WORKSPACE
from tests.support.harness import PY, sleeper, spec, wait_for
from tests.support.served import Served

SWEEP_TOML = f"""
[metadata]
name = "lr"
workspace = "vision"

[spec.task_template]
image = "local"
command = "{PY}"
args = ["-c", "import os; print(os.environ['LR'])"]

[spec.sweep.grid]
LR = [0.1, 0.01, 0.001]
"""


def test_sweeps_from_a_spec_file_listed_shown_and_deleted_together(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(WORKSPACE)
    path = tmp_path / "lr.toml"
    path.write_text(SWEEP_TOML)
    created = d.json("submit", str(path))
    assert created["kind"] == "sweep" and created["runs"] == ["lr-0", "lr-1", "lr-2"]
    listed = d.json("sweep", "ls")
    assert [g["name"] for g in listed] == ["lr"] and listed[0]["size"] == 3
    wait_for(lambda: d.json("sweep", "show", "lr")["states"] == {"Succeeded": 3}, 20)
    runs = {r["name"]: r for r in d.json("ls", "--all")}
    assert runs["lr-1"]["group"] == "lr"
    assert d.astra("logs", "lr-2").stdout.strip() == "0.001"
    deleted = d.astra("sweep", "delete", "lr")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "lr: deleted (3 forgotten)"
    assert d.json("sweep", "ls") == []
    bad = d.astra("submit", "-", input=SWEEP_TOML.replace("[0.1, 0.01, 0.001]", "[]"))
    assert bad.returncode == 1
    assert bad.stderr.strip() == "422 INVALID_SPEC: spec.sweep.grid.LR: must not be empty"


def test_after_replicas_and_schedules_from_the_command_line(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(WORKSPACE)
    first = d.astra("run", "--name", "first", "--workspace", "vision", "--", *sleeper(1))
    assert first.returncode == 0, first.stderr
    second = d.astra("run", "--json", "--name", "second", "--workspace", "vision",
                     "--after", "first", "--", PY, "-c", "pass")  # fmt: skip
    assert json.loads(second.stdout)["after"] == ["first"]
    wait_for(lambda: d.json("show", "second")["state"] == "Succeeded", 20)
    missing = d.astra("run", "--name", "third", "--after", "ghost", "--", PY, "-c", "pass")
    assert missing.stderr.strip() == "422 INVALID_SPEC: spec.after: no run ghost"

    template = tmp_path / "svc.json"
    template.write_text(json.dumps(spec("svc", sleeper(), workspace="vision")))
    made = d.json("replicas", "create", str(template), "--replicas", "2")
    assert made["replicas"] == 2 and made["runs"] == ["svc-0", "svc-1"]
    scaled = d.astra("replicas", "scale", "svc", "3")
    assert scaled.stdout.strip() == "svc: 3 replica(s)"
    wait_for(lambda: d.json("replicas", "ls")[0]["running"] == 3, 20)
    too_many = d.astra("replicas", "scale", "svc", "1000")
    assert too_many.stderr.strip() == "422 INVALID_SPEC: replicas: must be between 0 and 256"
    wrong = d.astra("schedule", "pause", "svc")
    assert wrong.stderr.strip() == "409 WRONG_KIND: svc is a replicas, not a schedule"

    job = tmp_path / "nightly.json"
    job.write_text(json.dumps(spec("nightly", [PY, "-c", "pass"], workspace="vision", priority=3)))
    made = d.json("schedule", "create", str(job), "--cron", "0 3 * * *", "--policy", "queue")
    assert made["cron"] == "0 3 * * *" and made["policy"] == "queue" and made["next_at"]
    assert d.astra("schedule", "pause", "nightly").stdout.strip() == "nightly: paused"
    assert d.json("schedule", "ls")[0]["paused"] is True
    assert d.astra("schedule", "resume", "nightly").returncode == 0
    bad = d.astra("schedule", "create", str(job), "--cron", "tomorrow")
    assert bad.stderr.strip() == "422 INVALID_SPEC: cron: is not a cron expression, got 'tomorrow'"
    capped = tmp_path / "capped.json"
    capped.write_text(json.dumps(spec("capped", [PY], workspace="vision", priority=50)))
    refused = d.astra("schedule", "create", str(capped), "--cron", "0 3 * * *")
    assert refused.stderr.strip() == (
        "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace vision's maximum of 10"
    )
    assert [g["name"] for g in d.json("schedule", "ls")] == ["nightly"]
    assert d.astra("schedule", "delete", "nightly").returncode == 0
    assert d.astra("replicas", "delete", "svc").returncode == 0
    assert d.json("replicas", "ls") == [] and d.json("schedule", "ls") == []


def test_why_and_preview_of_a_run_waiting_for_a_dependency(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(WORKSPACE)
    assert (
        d.astra("run", "--name", "long", "--workspace", "vision", "--", *sleeper()).returncode == 0
    )
    done = d.astra(
        "run", "--name", "next", "--workspace", "vision", "--after", "long", "--", "true"
    )
    assert done.returncode == 0, done.stderr
    wait_for(lambda: d.json("show", "next")["reason"] == "Waits for long to succeed", 10)
    why = d.json("why", "next")
    assert why["reason"] == "Waits for long to succeed" and why["levers"] == []
    path = tmp_path / "p.json"
    document = spec("p", [PY, "-c", "pass"], workspace="vision")
    document["spec"]["after"] = ["long"]
    path.write_text(json.dumps(document))
    preview = d.astra("submit", "--dry-run", str(path))
    assert preview.returncode == 0, preview.stderr
    assert preview.stdout.splitlines()[:2] == [
        "p (vision, priority 0): not in the order until its dependencies succeed",
        "Would wait: Waits for long to succeed (start not known).",
    ]
