"""Reason and event codes on the wire: a real daemon over its socket, real processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.harness import sleeper, spec, wait_for
from tests.support.served import Served

Serve = Callable[..., Served]


def _submit(d: Served, tmp: Path, document: dict[str, Any]) -> None:
    path = tmp / f"{document['metadata']['name']}.json"
    path.write_text(json.dumps(document))
    result = d.astra("submit", str(path))
    assert result.returncode == 0, result.stderr


def _runs(d: Served) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in d.json("ls", "--all")}


def test_run_objects_and_events_carry_codes_and_backfilled(served: Serve, tmp_path: Path) -> None:
    d = served(gpus=4)
    _submit(d, tmp_path, spec("busy", sleeper(), gpus=2, limit=3600))
    wait_for(lambda: _runs(d)["busy"]["state"] == "Running", 30, "busy running")
    _submit(d, tmp_path, spec("big", sleeper(), gpus=4))
    _submit(d, tmp_path, spec("no-limit", sleeper(), gpus=1))
    _submit(d, tmp_path, spec("short", sleeper(), gpus=1, limit=600))
    wait_for(lambda: _runs(d)["short"]["state"] == "Running", 30, "the backfill")
    wait_for(lambda: _runs(d)["no-limit"]["reason_code"] == "QUEUED_BEHIND", 30, "behind")
    runs = _runs(d)
    assert runs["big"]["reason"].startswith("Next to run")
    assert runs["big"]["reason_code"] == "HEAD_WAITS"
    assert runs["short"]["backfilled"] is True
    assert runs["busy"]["backfilled"] is False
    assert runs["busy"]["reason_code"] is None  # a running run has no reason
    shown = d.json("show", "short")
    assert shown["backfilled"] is True
    codes = [(e["kind"], e["code"]) for e in shown["events"]]
    assert codes == [("Submitted", "SUBMITTED"), ("Started", "BACKFILLED")]
    busy = [(e["kind"], e["code"]) for e in d.json("show", "busy")["events"]]
    assert busy == [("Submitted", "SUBMITTED"), ("Started", "STARTED")]
