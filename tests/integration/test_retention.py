"""Finished runs are forgotten after the retention time; forgotten runs leave no files.

A real daemon (process executor) in a temporary home, a real SQLite file read back
read-only: usage outlives the runs it was spent by.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from runner.engine.retention import ATTEMPT_LOGS_KEPT, forget_expired
from runner.store.db import MIGRATIONS, SCHEMA_APPLICATION_ID
from tests.integration.group_docs import WORKSPACE, group_doc
from tests.support.harness import NO_BACKOFF, PY, Harness, sleeper, spec, wait_for

RETAIN_2S = 'finished_retention = "2s"'


def quick(text: str, seconds: float = 0.3) -> list[str]:
    """Prints ``text``, holds its GPU ``seconds``, exits 0."""
    return [PY, "-c", f"import time; print({text!r}, flush=True); time.sleep({seconds})"]


def read_only(home: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


def test_a_finished_run_is_forgotten_after_the_retention_time_its_usage_kept(
    make_daemon: Callable[..., Harness],
) -> None:
    h = make_daemon(machine=RETAIN_2S, gpus=1)
    uid = h.submit(spec("old", quick("first"), gpus=1)).run_uid
    h.wait_state("old", "Succeeded")
    folder = h.daemon.home / "logs" / uid
    assert (folder / "1-0.log").read_text() == "first\n"
    wait_for(lambda: h.daemon.store.runs.get("old") is None, 30, "old to be forgotten")
    wait_for(lambda: not folder.exists(), 30, "its log folder to go")
    ((name, workspace, gpu_seconds),) = read_only(
        h.daemon.home, "SELECT run, workspace, gpu_seconds FROM usage WHERE run_uid = ?", uid
    )
    assert (name, workspace) == ("old", "default") and gpu_seconds > 0
    # the name is free, and the next run of it is a run of its own, usage too
    again = h.submit(spec("old", quick("second"), gpus=1)).run_uid
    assert again != uid
    h.wait_state("old", "Succeeded")
    assert h.log("old") == "second\n"
    rows = read_only(h.daemon.home, "SELECT run_uid FROM usage WHERE run = 'old'")
    assert sorted(r[0] for r in rows) == sorted([uid, again])


def test_a_run_that_a_queued_run_waits_for_is_kept(make_daemon: Callable[..., Harness]) -> None:
    h = make_daemon(machine=RETAIN_2S, gpus=1)
    h.submit(spec("first", quick("a"), gpus=1))
    h.wait_state("first", "Succeeded")
    h.submit(spec("blocker", sleeper(), gpus=1))
    h.wait_state("blocker", "Running")
    doc = spec("then", quick("b"), gpus=1)
    doc["spec"]["after"] = ["first", "blocker"]
    h.submit(doc)
    h.submit(spec("other", quick("c"), cpus=0.1))
    h.wait_state("other", "Succeeded")
    wait_for(lambda: h.daemon.store.runs.get("other") is None, 30, "other to be forgotten")
    assert h.state("first") == "Succeeded"  # past the retention, but still waited for
    assert h.state("then") == "Queued"
    h.daemon.service.delete("blocker", h.root)
    h.wait_state("then", "Failed")
    assert h.reason("then") == "Dependency blocker was cancelled"
    wait_for(lambda: h.daemon.store.runs.get("first") is None, 30, "first to be forgotten")


def test_retention_off_keeps_finished_runs(make_daemon: Callable[..., Harness]) -> None:
    h = make_daemon(machine='finished_retention = "off"')
    assert h.daemon.settings.finished_retention is None
    h.submit(spec("kept", quick("x", 0)))
    h.wait_state("kept", "Succeeded")
    h.submit(spec("probe", quick("y", 0)))  # the loop goes on after "kept" finished
    h.wait_state("probe", "Succeeded")
    later = h.daemon.backend.clock() + 10**8
    assert forget_expired(h.daemon.store, h.daemon.backend.specs, None, later) == 0
    assert h.state("kept") == "Succeeded"


def test_a_deleted_group_takes_its_finished_runs_files_along(
    make_daemon: Callable[..., Harness],
) -> None:
    h = make_daemon(WORKSPACE)
    template = spec("sw", [PY, "-c", "import os; print(os.environ['A'])"], workspace="vision")
    h.daemon.groups.create(group_doc("sweep", "sw", template, list=[{"A": 1}, {"A": 2}]), h.root)
    runs = [r.name for r in h.daemon.store.runs.of_group("sw")]
    assert len(runs) == 2
    uids = [h.wait_state(r, "Succeeded").run_uid for r in runs]
    assert all((h.daemon.home / "logs" / u / "1-0.log").is_file() for u in uids)
    h.daemon.groups.delete("sw", h.root)
    for u in uids:
        wait_for(lambda u=u: not (h.daemon.home / "logs" / u).exists(), 30, "the sweep's logs")
    assert read_only(h.daemon.home, "SELECT COUNT(*) FROM forgotten") == [(0,)]


def _schema_3(home: Path) -> None:
    """A state database as the daemon left it before runs had ids (schema 3)."""
    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "state.db", isolation_level=None)
    for script in MIGRATIONS[:3]:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    conn.execute(f"PRAGMA application_id = {SCHEMA_APPLICATION_ID}")
    doc = json.dumps(spec("legacy", ["true"]))
    conn.execute(
        "INSERT INTO runs (name, workspace, owner, uid, gid, spec, priority, state,"
        " submitted_at, finished_at, exit_code) VALUES"
        " ('legacy', 'default', 'root', 0, 0, ?, 0, 'Succeeded', 1e9, 1e9, 0)",
        (doc,),
    )
    conn.execute("INSERT INTO usage VALUES ('legacy', 'default', 12.5, 3.0)")
    conn.execute("INSERT INTO usage VALUES ('gone', 'default', 7.5, 1.0)")
    conn.close()
    for name, text in (("legacy", "kept\n"), ("gone", "a forgotten run's secret\n")):
        (home / "logs" / name).mkdir(parents=True)
        (home / "logs" / name / "1-0.log").write_text(text)


def test_an_old_database_gets_ids_and_its_log_folders_move(
    make_daemon: Callable[..., Harness], tmp_path: Path
) -> None:
    _schema_3(tmp_path / "home")
    h = make_daemon(machine='finished_retention = "off"')
    uid = h.run("legacy").run_uid
    assert len(uid) == 32 and int(uid, 16) > 0
    logs = h.daemon.home / "logs"
    wait_for(lambda: not (logs / "legacy").exists(), 10, "the old folder to move")
    assert (logs / uid / "1-0.log").read_text() == "kept\n"
    assert h.log("legacy") == "kept\n"
    assert sorted(p.name for p in logs.iterdir()) == [uid]  # the forgotten run's folder went
    usage = read_only(h.daemon.home, "SELECT run, run_uid, gpu_seconds FROM usage ORDER BY run")
    assert [(r[0], r[2]) for r in usage] == [("gone", 7.5), ("legacy", 12.5)]
    assert usage[1][1] == uid and usage[0][1] != uid
    assert h.daemon.store.usage.by_workspace() == {"default": (20.0, 4.0)}


def test_the_loop_keeps_no_spec_of_a_finished_run(make_daemon: Callable[..., Harness]) -> None:
    """The planner's parsed specs are as many as its unfinished runs: a finished run's
    goes (a 60 KB argument each once kept the daemon growing), and is read from the
    store when asked."""
    h = make_daemon()
    h.submit(spec("waits", ["sleep", "60"], gpus=2))  # never starts: one GPU
    h.submit(spec("once", ["true"]))
    h.wait_state("once", "Succeeded")
    specs = h.daemon.backend.specs
    wait_for(lambda: "once" not in specs, 15, "its spec to be dropped")
    assert "waits" in specs
    assert specs.get(h.run("once")).name == "once" and "once" not in specs


def test_a_run_that_restarts_again_and_again_keeps_its_newest_attempts_logs(
    make_daemon: Callable[..., Harness],
) -> None:
    """Each attempt's log is within log_limit; a run keeps only its newest attempts' logs,
    so restarts cannot multiply what one run holds on disk."""
    h = make_daemon(machine=NO_BACKOFF)
    h.submit(spec("flaky", ["sh", "-c", "echo attempt $ASTRAEUS_RESTART_COUNT; exit 1"],
                  restart_limit=6))  # fmt: skip
    h.wait_state("flaky", "Failed", timeout=60)
    folder = h.daemon.home / "logs" / h.run("flaky").run_uid
    kept = sorted(p.name for p in folder.glob("*.log"))
    assert kept == [f"{a}-0.log" for a in range(8 - ATTEMPT_LOGS_KEPT, 8)]
    assert h.log("flaky").split() == [w for a in range(3, 7) for w in ("attempt", str(a))]


def test_an_independent_worker_s_restarts_leave_its_sibling_s_log_alone(
    make_daemon: Callable[..., Harness],
) -> None:
    """Attempts are counted per run: worker 1 restarting in attempts 2, 3, … must not
    remove the log worker 0 still writes in attempt 1."""
    program = (
        'if [ "$ASTRAEUS_WORKER_INDEX" = 0 ]; then echo zero; sleep 60; else echo one; exit 1; fi'
    )
    h = make_daemon(machine=NO_BACKOFF)
    h.submit(spec("pair", ["sh", "-c", program], workers=2, gang=False, restart_limit=6))
    h.wait_state("pair", "Failed", timeout=60)
    folder = h.daemon.home / "logs" / h.run("pair").run_uid
    names = {p.name for p in folder.glob("*.log")}
    assert "1-0.log" in names and (folder / "1-0.log").read_text() == "zero\n"
    ones = sorted(n for n in names if n.endswith("-1.log"))
    assert len(ones) == ATTEMPT_LOGS_KEPT, ones
