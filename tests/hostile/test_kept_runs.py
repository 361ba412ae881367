"""What a member keeps is bounded, not only what it runs: a churn of short runs with a
large argument forgets the member's oldest finished runs past ``max_kept_per_user`` or
``max_kept_bytes_per_user`` (their usage kept), and below ``state_reserve`` free on the
state database's disk a member's submit is refused in one line while an admin's delete
goes on. Real Unix users against a real daemon."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-kr-g", "astra-kr-a", "astra-kr-b"
LAB = one_workspace(GROUP, "lab", ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


def run(name: str, arg_kib: int = 0) -> dict[str, Any]:
    task = {"image": "local", "command": "true", "args": ["x" * (arg_kib * 1024)]}
    return {"metadata": {"name": name, "workspace": "lab"},
            "spec": {"restart_limit": 0, "task_template": task}}  # fmt: skip


def names(lab: Served) -> set[str]:
    return {r["name"] for r in lab.json("ls", "--all")}


def churn(lab: Served, who: pwd.struct_passwd, prefix: str, n: int, arg_kib: int = 0) -> None:
    for i in range(n):
        made = as_user(who, lab.socket, lambda c, i=i: c.submit(run(f"{prefix}-{i}", arg_kib)))
        assert "ok" in made, made
        wait_for(lambda i=i: lab.json("show", f"{prefix}-{i}")["state"] == "Succeeded", 30)


def test_a_members_oldest_finished_runs_go_past_what_it_may_keep(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    kept = 'max_kept_per_user = 3\nmax_kept_bytes_per_user = "150KiB"'
    lab = served(LAB, gpus=1, machine=kept)
    churn(lab, users[BOB], "bob", 2)  # another user's are their own
    churn(lab, users[ALICE], "a", 5)
    wait_for(lambda: names(lab) == {"bob-0", "bob-1", "a-2", "a-3", "a-4"}, 30, "3 of alice's")
    churn(lab, users[ALICE], "big", 3, arg_kib=60)  # 60 KiB each: two fit in 150 KiB
    wait_for(lambda: names(lab) == {"bob-0", "bob-1", "big-1", "big-2"}, 30, "by bytes")
    usage = as_user(users[ALICE], lab.socket, lambda c: c.usage(by="user"))["ok"]
    mine = next(r for r in usage["rows"] if r["user"] == ALICE)
    assert mine["runs"] == 8  # forgotten runs' usage stays in the accounting


def test_below_the_state_reserve_a_members_submit_is_refused(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(LAB, gpus=1, machine='state_reserve = "1PiB"')  # more than is free
    refused = as_user(users[ALICE], lab.socket, lambda c: c.submit(run("a-0")))
    assert refused["error"].startswith(
        "507 DISK_FULL: less than state_reserve (1024TiB) is free for the state database"
    ), refused
    group = {"kind": "replicas", "name": "g", "replicas": 1, "template": run("g")}
    refused = as_user(users[ALICE], lab.socket, lambda c: c.create_group(group))
    assert refused["error"].startswith("507 DISK_FULL: ")
    assert names(lab) == set()
    admin = lab.astra("run", "--name", "by-admin", "--image", "local", "--", "sleep", "60")
    assert admin.returncode == 0, admin.stderr  # the admin's room
    assert lab.astra("delete", "by-admin").returncode == 0
