"""One request must not fill the disk, and one user must not fill the queue.

A real daemon (``astra serve``) on its socket: a sweep's runs share their template in
the state database, and a user's unfinished runs are capped (``max_submit_per_user``)
for submits, sweeps, replica groups and schedules, non-root users and admins alike.
"""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from astraeus_tui.client import Client
from runner.daemon.daemon import Daemon
from tests.hostile.helpers import db_state
from tests.support.harness import Harness, spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user
from tests.support.users import unix_users

USER = "astra-h2-a"
LIMIT = 5
ROOT_ONLY = """
[workspaces.vision]
members = ["root"]
"""
CONFIG = f"""
[workspaces.vision]
members = ["root", "{USER}"]
"""


def run_doc(name: str, args: list[str] | None = None) -> dict[str, Any]:
    """A run that asks for more GPUs than the machine has: it stays Queued."""
    task = {"image": "local", "command": "true", "args": args or [],
            "requested_resources": {"gpu_requests": {"count": 4}}}  # fmt: skip
    return {"metadata": {"name": name, "workspace": "vision"}, "spec": {"task_template": task}}


def state_size(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("state.db*"))


# --------------------------------------------------------------- the template once


def test_a_sweep_of_1000_over_a_60_kib_template_keeps_the_template_once(
    served: Callable[..., Served],
) -> None:
    lab = served(ROOT_ONLY, gpus=2)
    client = Client(lab.socket, timeout=120)
    template = run_doc("wide", ["{I}", "x" * 60_000])
    group = {"kind": "sweep", "template": template, "list": [{"I": i} for i in range(1000)]}
    client.create_group(group)
    listed = client.runs()
    assert len(listed) == 1000
    size = state_size(lab.home)
    assert size < 20 * 1024 * 1024, f"state.db and its WAL take {size} bytes"
    shown = client.show("wide-737")
    task = shown.spec["spec"]["task_template"]
    assert task["args"] == ["737", "x" * 60_000]  # its own values, the template's rest
    assert task["env"]["I"] == task["env"]["ASTRAEUS_SWEEP_INDEX"] == "737"
    assert shown.state == "Queued"
    client.delete_group("wide")  # its runs are cancelled, kept: their spec with them
    wait_for(lambda: client.show("wide-3").state == "Cancelled")
    assert client.show("wide-3").spec["spec"]["task_template"]["args"][0] == "3"
    for i in range(1000):
        client.delete(f"wide-{i}")  # forgotten: the template goes with the last one
    assert db_state(lab.home)["templates"] == []


# ------------------------------------------------------------ max_submit_per_user


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    if os.geteuid() != 0:
        pytest.skip("creating a Unix user needs root")
    with unix_users(None, USER) as made:
        yield made[USER]


@pytest.fixture
def lab(served: Callable[..., Served], user: pwd.struct_passwd) -> Served:
    lab = served(CONFIG, gpus=2, machine=f"max_submit_per_user = {LIMIT}")
    lab.socket.chmod(0o666)  # the test user is in no socket group
    return lab


def full(have: int, extra: str = "") -> str:
    return (
        f"429 TOO_MANY_RUNS: user {USER} has {have} runs queued or running and may have at"
        f" most {LIMIT} (max_submit_per_user){extra}"
    )


def fill(lab: Served, user: pwd.struct_passwd, count: int = LIMIT) -> None:
    """Submit ``count`` runs that cannot start, then wait for the loop to have planned them.

    Until the loop's pass has written each run's reason (``TOO_LARGE``) the state DB
    still changes on its own, and a test that compares it before and after a refused
    request would see the loop's write, not the request's.
    """
    for i in range(count):
        answer = as_user(user, lab.socket, lambda c, i=i: c.submit(run_doc(f"mine-{i}")))
        assert "ok" in answer, answer
    wait_for(lambda: planned(lab.home, count), 30, f"the loop to plan {count} runs")


def planned(home: Path, count: int) -> bool:
    """Whether ``count`` runs are in the state DB, each with the loop's reason written."""
    runs = db_state(home)["runs"]
    return len(runs) == count and all('"TOO_LARGE"' in str(row) for row in runs)


def test_a_submit_past_the_limit_is_refused_and_writes_nothing(
    lab: Served, user: pwd.struct_passwd
) -> None:
    fill(lab, user)
    before = db_state(lab.home)
    answer = as_user(user, lab.socket, lambda c: c.submit(run_doc("one-more")))
    assert answer["error"] == full(LIMIT)
    assert db_state(lab.home) == before
    assert lab.astra("run", "--workspace", "vision", "--", "true").returncode == 0  # root's own
    as_user(user, lab.socket, lambda c: c.delete("mine-0"))  # Cancelled: it counts no more
    assert "ok" in as_user(user, lab.socket, lambda c: c.submit(run_doc("one-more")))


def test_a_sweep_past_the_limit_is_refused_whole(lab: Served, user: pwd.struct_passwd) -> None:
    fill(lab, user, 3)
    sweep = {"kind": "sweep", "template": run_doc("sw"), "list": [{"A": i} for i in range(3)]}
    before = db_state(lab.home)
    answer = as_user(user, lab.socket, lambda c: c.create_group(sweep))
    assert answer["error"] == full(3, ": the sweep's 3 runs would make 6")
    assert db_state(lab.home) == before
    replicas = {"kind": "replicas", "name": "pool", "replicas": 3, "template": run_doc("pool")}
    answer = as_user(user, lab.socket, lambda c: c.create_group(replicas))
    assert answer["error"] == full(3, ": the replica group's 3 runs would make 6")
    assert db_state(lab.home) == before
    sweep["list"] = sweep["list"][:2]
    assert "ok" in as_user(user, lab.socket, lambda c: c.create_group(sweep))


def group_events(lab: Served, user: pwd.struct_passwd, name: str) -> list[tuple[str, str]]:
    shown = as_user(user, lab.socket, lambda c: c.group(name))["ok"]
    return [(e["kind"], e["message"]) for e in shown["events"]]


def test_a_replica_past_the_limit_is_refused_in_the_group_s_events(
    lab: Served, user: pwd.struct_passwd
) -> None:
    fill(lab, user)
    replicas = {"kind": "replicas", "name": "pool", "replicas": 0, "template": run_doc("pool")}
    assert "ok" in as_user(user, lab.socket, lambda c: c.create_group(replicas))
    as_user(user, lab.socket, lambda c: c.change_group("pool", {"replicas": 1}))
    refusal = f"Replica pool-0 not started: {full(LIMIT)}"
    wait_for(lambda: ("Refused", refusal) in group_events(lab, user, "pool"), 20)
    assert [r["name"] for r in lab.json("ls") if r["name"].startswith("pool")] == []
    as_user(user, lab.socket, lambda c: c.delete("mine-0"))
    wait_for(lambda: any(r["name"] == "pool-0" for r in lab.json("ls")), 20, "pool-0 made")


def test_a_schedule_past_the_limit_is_refused_once_in_its_events(
    lab: Served, user: pwd.struct_passwd
) -> None:
    fill(lab, user)
    schedule = {"kind": "schedule", "name": "tick", "cron": "* * * * * *", "policy": "queue",
                "template": run_doc("tick")}  # fmt: skip
    assert "ok" in as_user(user, lab.socket, lambda c: c.create_group(schedule))

    def fired_since(first: str) -> bool:
        last = as_user(user, lab.socket, lambda c: c.group("tick"))["ok"]["last_fired_at"]
        return last is not None and last > first

    first = wait_for(
        lambda: as_user(user, lab.socket, lambda c: c.group("tick"))["ok"]["last_fired_at"], 20
    )
    wait_for(lambda: fired_since(first), 20, "a second firing")
    second = as_user(user, lab.socket, lambda c: c.group("tick"))["ok"]["last_fired_at"]
    wait_for(lambda: fired_since(second), 20, "a third firing")
    refused = [m for k, m in group_events(lab, user, "tick") if k == "Refused"]
    assert len(refused) == 1, refused  # one event for the same cause, not one a second
    assert refused[0].startswith("Not submitted (tick-") and refused[0].endswith(full(LIMIT))
    as_user(user, lab.socket, lambda c: c.delete("mine-0"))
    wait_for(lambda: any(k == "Fired" for k, _ in group_events(lab, user, "tick")), 20)


def test_admins_have_the_same_limit(lab: Served) -> None:
    client = Client(lab.socket)
    for i in range(LIMIT):
        client.submit(run_doc(f"root-{i}"))
    result = lab.astra("submit", "-", input=json.dumps(run_doc("root-more")))
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "429 TOO_MANY_RUNS: user root has 5 runs queued or running and may have at most 5"
        " (max_submit_per_user)"
    )


def test_a_run_stored_under_a_larger_bound_still_plans_after_an_upgrade(
    make_daemon: Callable[..., Any],
) -> None:
    """The 64 KiB bound refuses new submits only: a run acknowledged before it (a long
    ``bash -c`` script) is read back, planned and started, and nothing else is held up."""
    h = make_daemon(gpus=1)
    h.submit(spec("old", ["sh", "-c", "sleep 30"], gpus=1))
    h.wait_state("old", "Running")
    h.submit(spec("big", ["sh", "-c", "true"], gpus=1))  # waits behind "old"
    h.daemon.stop()
    script = "true #" + "x" * 100_000  # written by a daemon with the older bound
    db = sqlite3.connect(h.daemon.home / "state.db")
    with db:
        row = db.execute("SELECT spec FROM runs WHERE name = 'big'").fetchone()
        doc = json.loads(row[0])
        doc["spec"]["task_template"]["args"] = ["-c", script]
        db.execute("UPDATE runs SET spec = ? WHERE name = 'big'", (json.dumps(doc),))
    db.close()
    again = Harness(Daemon(h.daemon.home).start())
    try:
        again.submit(spec("small", ["true"]))
        again.wait_state("small", "Succeeded")
        again.daemon.service.delete("old", again.root)
        assert again.wait_state("big", "Succeeded", "Failed").state == "Succeeded"
    finally:
        again.daemon.stop()
