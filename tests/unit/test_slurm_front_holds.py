"""A front for Slurm submits a held run, or one before its begin time, only once it may
join the queue: released, or its begin time passed. Slurm itself is replaced by a fake
that records each sbatch (the real one is in tests/slurm/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.config.slurm import SlurmConfig, SlurmSettings
from runner.reasons import ReasonCode
from runner.runspec.build import run_document
from runner.slurm.front import SlurmFront
from runner.store.db import Store
from tests.unit.store_rows import queued_row

NOW = 1_790_856_000.0  # 2026-10-01 12:00 UTC


class RecordingSlurm:
    """What the front asks of Slurm: no jobs yet; each sbatch is noted and numbered."""

    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def jobs(self, job_ids: object = None) -> list[Any]:
        return []

    def submit(self, job: Any) -> int:
        self.submitted.append(job)
        return 100 + len(self.submitted)


def _insert(store: Store, name: str, *, held_by: str | None = None, begin: str | None = None,
            ) -> None:  # fmt: skip
    doc = run_document(name, ["true"], image="local", begin_at=begin)
    store.runs.insert(queued_row(name, json.dumps(doc), NOW - 60, owner="alice", uid=1000,
                                gid=1000, held_by=held_by))  # fmt: skip


def test_held_and_later_runs_are_not_submitted_until_they_may_join(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    _insert(store, "plain")
    _insert(store, "held", held_by="alice")
    _insert(store, "later", begin="2026-10-01T13:00:00Z")
    slurm = RecordingSlurm()
    clock = [NOW]
    front = SlurmFront(store, SlurmConfig(SlurmSettings()), stop_grace=30,
                       client=slurm, clock=lambda: clock[0])  # type: ignore[arg-type]  # fmt: skip
    front.tick()
    assert len(slurm.submitted) == 1
    held, later = store.runs.get("held"), store.runs.get("later")
    assert held is not None and later is not None
    assert held.reason is not None and held.reason.render() == "Held by alice"
    assert later.reason is not None and later.reason.code is ReasonCode.BEGIN_WAIT
    assert store.workers.of("held") == [] and store.workers.of("later") == []

    clock[0] = NOW + 3600  # 13:00: its begin time has come
    front.tick()
    assert store.workers.of("later") and store.workers.of("held") == []
