"""Usage and history, end to end: a real daemon (process executor), real runs.

Runs that succeed, fail, are preempted or are cancelled leave one usage record each,
written with their finish; `astra usage` adds them up per workspace or user, `astra
history` lists them. Both outlive the retention of finished runs. Two real Unix users
read only what the rules of docs/lab-server.md ("Usage and history") let them.
"""

from __future__ import annotations

import itertools
import json
import os
import pwd
import time
from collections.abc import Callable
from typing import Any

import pytest

from astraeus_tui.client import ApiError, Client
from runner.api.usage import history_entry, usage_row
from runner.service.caller import ServiceError
from runner.service.usage import history, usage_report
from tests.support.harness import PY, Harness, sleeper, spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

Make = Callable[..., Harness]
PRIO = '[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'


def hold(seconds: float, code: int = 0) -> list[str]:
    """Holds what it asked for ``seconds``, then exits with ``code``."""
    return [PY, "-c", f"import sys, time; time.sleep({seconds}); sys.exit({code})"]


def finished(h: Harness) -> list[Any]:
    _, records = history(h.daemon.store, h.root)
    return records


def test_outcomes_hours_preemptions_and_waits_add_up(make_daemon: Make) -> None:
    h = make_daemon(PRIO, gpus=1)
    h.submit(spec("ok", hold(0.6), gpus=1, cpus=2))
    h.wait_state("ok", "Succeeded")
    h.submit(spec("bad", hold(0, 3), gpus=1, restart_limit=0))
    h.wait_state("bad", "Failed")
    h.submit(spec("victim", sleeper(), gpus=1, priority=-10))
    h.wait_state("victim", "Running")
    h.submit(spec("urgent", hold(0.3), gpus=1, priority=10))
    h.wait_state("urgent", "Succeeded")
    h.wait_state("victim", "Running")  # again, after urgent
    h.submit(spec("never", hold(0), gpus=1, priority=-10))
    h.wait_state("never", "Queued")
    h.daemon.service.delete("never", h.root)  # cancelled while queued: never started
    h.wait_state("never", "Cancelled")
    h.daemon.service.delete("victim", h.root)
    h.wait_state("victim", "Cancelled")

    rows = {r.run: r for r in finished(h)}
    assert [r.run for r in finished(h)] == ["ok", "bad", "urgent", "never", "victim"]
    ok, bad, victim, never = rows["ok"], rows["bad"], rows["victim"], rows["never"]
    assert (ok.outcome, ok.exit_code, ok.gpus, ok.preemptions) == ("Succeeded", 0, 1, 0)
    assert 0.6 <= ok.gpu_seconds < 30 and ok.cpu_seconds == pytest.approx(2 * ok.gpu_seconds)
    assert ok.wait_seconds is not None and 0 <= ok.wait_seconds < 10
    assert (bad.outcome, bad.exit_code) == ("Failed", 3)
    assert (victim.outcome, victim.preemptions) == ("Cancelled", 1)
    assert victim.gpu_seconds > 0 and victim.started_at is not None
    assert (never.outcome, never.started_at, never.wait_seconds) == ("Cancelled", None, None)
    assert never.gpu_seconds == 0 and never.gpus == 0
    entry = history_entry(never)
    assert (entry.elapsed_seconds, entry.wait_seconds, entry.started_at) == (None, None, None)
    assert history_entry(ok).elapsed_seconds is not None

    report = usage_report(h.daemon.store, h.root, "7d", "workspace", ["default"])
    (row,) = [usage_row(t) for t in report.rows]
    assert row.workspace == "default" and row.visible
    assert row.runs == 5 and row.preemptions == 1
    assert row.outcomes == {"succeeded": 2, "failed": 1, "cancelled": 2}
    gpu_seconds = sum(r.gpu_seconds for r in rows.values())
    assert row.gpu_hours == pytest.approx(gpu_seconds / 3600, abs=1e-6)
    waits = sorted(r.wait_seconds for r in rows.values() if r.wait_seconds is not None)
    assert len(waits) == 4  # "never" never waited its way to a start
    assert row.wait_p50_seconds == pytest.approx(waits[1], abs=1e-3)  # nearest rank
    assert row.wait_p95_seconds == pytest.approx(waits[3], abs=1e-3)
    assert usage_row(report.total).runs == 5


def test_usage_outlives_the_retention_of_finished_runs(make_daemon: Make) -> None:
    h = make_daemon(machine='finished_retention = "2s"', gpus=1)
    uid = h.submit(spec("gone", hold(0.3), gpus=1)).run_uid
    h.wait_state("gone", "Succeeded")
    wait_for(lambda: h.daemon.store.runs.get("gone") is None, 30, "gone to be forgotten")
    (record,) = finished(h)
    assert (record.run_uid, record.run, record.outcome) == (uid, "gone", "Succeeded")
    assert record.gpu_seconds >= 0.3
    # the name, used again, is a run of its own: two records
    again = h.submit(spec("gone", hold(0), gpus=1)).run_uid
    h.wait_state("gone", "Succeeded")
    assert [r.run_uid for r in finished(h)] == [uid, again]
    row = usage_report(h.daemon.store, h.root, "1h", "user").rows[0]
    assert (row.workspace, row.user, row.runs) == ("default", "root", 2)


def test_each_life_of_a_replica_is_a_record_of_its_own(make_daemon: Make) -> None:
    h = make_daemon('[workspaces.vision]\nmembers = ["root"]\n', gpus=1)
    template = spec("pool", hold(0.4), gpus=1, workspace="vision")
    doc = {"kind": "replicas", "name": "pool", "template": template, "replicas": 1}
    h.daemon.groups.create(doc, h.root)
    wait_for(lambda: len(finished(h)) >= 3, 60, "three lives of pool-0")
    lives = finished(h)[:3]
    assert {r.run for r in lives} == {"pool-0"} and len({r.run_uid for r in lives}) == 1
    for life in lives:  # each its own 0.4 s or so, not the sum of the lives before
        assert life.outcome == "Succeeded" and 0.4 <= life.gpu_seconds < 10
        assert life.wait_seconds is not None and life.wait_seconds >= 0
    for before, after in itertools.pairwise(lives):
        assert after.submitted_at == before.finished_at  # a life waits from the last end
    h.daemon.groups.delete("pool", h.root)


def test_since_filters_by_finish_time(make_daemon: Make) -> None:
    h = make_daemon(gpus=1)
    h.submit(spec("one", hold(0)))
    h.wait_state("one", "Succeeded")
    now = time.time()
    store, root = h.daemon.store, h.root
    assert [r.run for r in history(store, root, "1h", now=now)[1]] == ["one"]
    assert history(store, root, "1h", now=now + 7200)[1] == []  # finished over 1 h before
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(now + 86400))
    assert history(store, root, tomorrow)[1] == []
    assert usage_report(store, root, tomorrow, "workspace", ["default"]).rows[0].runs == 0
    assert usage_report(store, root, "2w", "workspace", ["default"]).rows[0].runs == 1
    # a day each, oldest first: it finished in the last 24 hours, or 2 days before "now"
    week = usage_report(store, root, "7d", "workspace", ["default"], now=now, daily=True)
    assert week.rows[0].daily is not None and len(week.rows[0].daily) == 7
    assert week.rows[0].daily[-1] == week.rows[0].gpu_seconds
    later = usage_report(store, root, "7d", "workspace", [], now=now + 2 * 86400, daily=True)
    assert later.rows[0].daily == [0.0] * 4 + [later.rows[0].gpu_seconds] + [0.0] * 2
    with pytest.raises(ServiceError, match="daily: for at most 31 days"):
        usage_report(store, root, "32d", "workspace", [], daily=True)


# ------------------------------------------------------------- the CLI, its JSON

USAGE_KEYS = ["since", "until", "by", "rows", "total"]
ROW_KEYS = ["workspace", "user", "visible", "runs", "outcomes", "gpu_hours", "core_hours",
            "preemptions", "restarts", "wait_p50_seconds", "wait_p95_seconds"]  # fmt: skip
ENTRY_KEYS = ["uid", "name", "workspace", "owner", "outcome", "exit_code", "submitted_at",
              "started_at", "finished_at", "elapsed_seconds", "wait_seconds", "gpus",
              "gpu_hours", "core_hours", "preemptions", "restarts", "priority",
              "time_limit_seconds", "workers", "gpu_memory_bytes", "cpus", "memory_bytes",
              "run_seconds"]  # fmt: skip


def test_astra_usage_and_history_json_and_tables(served: Callable[..., Served]) -> None:
    s = served('[workspaces.vision]\nmembers = ["*"]\n[workspaces.nlp]\nmembers = []\n', gpus=1)
    done = s.astra("run", "--name", "fine", "--gpus", "1", "--", PY, "-c", "pass")
    assert done.returncode == 0, done.stderr
    broken = spec("broken", [PY, "-c", "exit(4)"], restart_limit=0)
    assert s.astra("submit", "-", input=json.dumps(broken)).returncode == 0
    wait_for(lambda: len(s.json("history")["runs"]) == 2, 30, "two finished runs")
    data = s.json("usage")
    assert list(data) == USAGE_KEYS and data["by"] == "workspace"
    assert [r["workspace"] for r in data["rows"]] == ["nlp", "vision"]  # each, used or not
    assert all(list(r) == ROW_KEYS for r in data["rows"]) and list(data["total"]) == ROW_KEYS
    vision = data["rows"][1]
    assert vision["runs"] == 2 and vision["outcomes"] == {
        "succeeded": 1, "failed": 1, "cancelled": 0
    }  # fmt: skip
    assert data["rows"][0]["runs"] == 0 and data["total"]["visible"] is False
    runs = s.json("history")["runs"]
    assert all(list(r) == ENTRY_KEYS for r in runs)
    assert [(r["name"], r["outcome"], r["exit_code"]) for r in runs] == [
        ("fine", "Succeeded", 0), ("broken", "Failed", 4)
    ]  # fmt: skip
    assert runs[0]["gpus"] == 1 and runs[0]["finished_at"].endswith("Z")
    table = s.astra("usage", "--by", "user")
    assert table.returncode == 0, table.stderr
    assert "GPU-H" in table.stdout and "WAIT P50/P95" in table.stdout and "root" in table.stdout
    lines = s.astra("history", "--workspace", "vision").stdout
    assert "broken" in lines and "Failed" in lines and "fine" in lines
    assert s.astra("history", "--since", "2099-01-01").stdout.startswith("No run finished")
    bad = s.astra("usage", "--since", "last tuesday")
    assert bad.returncode != 0 and bad.stderr.startswith("400 BAD_REQUEST: since:")
    assert s.astra("usage", "--by", "gpu").returncode != 0
    client = Client(s.socket)
    for call, message in (
        (lambda: client.usage(by="gpu"), "400 BAD_REQUEST: by: must be one of workspace, user"),
        (lambda: client.history(limit=0), "400 BAD_REQUEST: limit: must be from 1 to 10000"),
        (lambda: client.usage(since="9" * 65), "400 BAD_REQUEST: since: too long"),
    ):
        with pytest.raises(ApiError) as refused:
            call()
        assert str(refused.value) == message


# ----------------------------------------------------------- two real users

GROUP, ALICE, BOB = "astra-us", "astra-us-a", "astra-us-b"
LAB = two_tenants(GROUP, ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


@pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
def test_members_read_their_workspaces_history_and_usage(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    s = served(LAB, gpus=1)
    alice, bob = users[ALICE], users[BOB]
    for who, name, ws, argv in ((alice, "a-run", "vision", ["true"]),
                                (bob, "b-secret", "nlp", ["false"])):  # fmt: skip
        doc = spec(name, argv, workspace=ws, restart_limit=0)
        assert "ok" in as_user(who, s.socket, lambda c, d=doc: c.submit(d))
    wait_for(lambda: len(s.json("history")["runs"]) == 2, 30, "both runs finished")

    def read(who: pwd.struct_passwd, call: Callable[[Client], Any]) -> Any:
        answer = as_user(who, s.socket, call)  # the users cannot run this checkout's astra
        assert "ok" in answer, answer
        return answer["ok"]

    mine = read(alice, lambda c: c.history())["runs"]
    assert [(r["name"], r["workspace"], r["owner"]) for r in mine] == [("a-run", "vision", ALICE)]
    refused = as_user(alice, s.socket, lambda c: c.history(workspace="nlp"))
    assert refused == {
        "error": "403 FORBIDDEN: a workspace the caller is not a member of: its history is private"
    }
    by_user = read(alice, lambda c: c.usage(by="user"))
    seen = [(r["workspace"], r["user"], r["visible"], r["runs"]) for r in by_user["rows"]]
    assert seen == [("vision", ALICE, True, 1), (None, None, False, 1)]
    assert by_user["total"]["runs"] == 2
    assert "b-secret" not in json.dumps(by_user) and BOB not in json.dumps(by_user)
    by_ws = read(bob, lambda c: c.usage())
    failed = {r["workspace"]: r["outcomes"]["failed"] for r in by_ws["rows"]}
    assert failed == {"nlp": 1, "vision": 0}  # workspace totals: named for everyone
    assert [r["name"] for r in read(bob, lambda c: c.history())["runs"]] == ["b-secret"]
    # admins: every run, every user
    assert [r["name"] for r in s.json("history")["runs"]] == ["a-run", "b-secret"]
    users_seen = {(r["workspace"], r["user"]) for r in s.json("usage", "--by", "user")["rows"]}
    assert users_seen == {("vision", ALICE), ("nlp", BOB)}


def test_history_keeps_a_sweeps_names_whole_at_80_columns(served: Callable[..., Served]) -> None:
    """A sweep's runs differ at the end of their names: cut to `sweep-lr0…` they could not
    be told apart. The workspace and owner columns give way first."""
    s = served(gpus=1)
    names = ["sweep-lr0-00001-warmup-a", "sweep-lr0-00001-warmup-b"]
    for name in names:
        assert s.astra("run", "--name", name, "--", PY, "-c", "pass").returncode == 0
    wait_for(lambda: len(s.json("history")["runs"]) == 2, 30, "two finished runs")
    s.env["COLUMNS"] = "80"
    lines = s.astra("history").stdout.splitlines()
    assert all(any(name in line for line in lines) for name in names), lines
    assert max(map(len, lines)) <= 80
