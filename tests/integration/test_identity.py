"""Two real Unix users against one daemon: who may see and change what.

The requests come from a forked child that has dropped to the user's uid, gid
and groups, so SO_PEERCRED reports that user to the daemon.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Callable

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import ALICE, BOB, CAROL, CONFIG, GROUP, as_user, spec, users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating two Unix users needs root")
__all__ = ["users"]  # the module's fixture


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(CONFIG, gpus=2)


def test_socket_mode_and_group(lab: Served) -> None:
    st = lab.socket.stat()
    assert st.st_mode & 0o777 == 0o660
    assert st.st_gid == grp.getgrnam(GROUP).gr_gid


def test_a_member_sees_other_runs_anonymised_and_cannot_touch_them(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(spec("bob-secret", "nlp")))
    wait_for(lambda: lab.json("show", "bob-secret")["state"] == "Running")
    listed = as_user(alice, lab.socket, lambda c: c.runs())["ok"]
    assert [r["name"] for r in listed] == ["a job in another namespace"]
    assert listed[0]["owner"] is None
    for call in (
        lambda c: c.delete("bob-secret"),
        lambda c: c.set_priority("bob-secret", -5),
    ):
        answer = as_user(alice, lab.socket, call)
        assert answer["error"].startswith("403 FORBIDDEN")
    details = as_user(alice, lab.socket, lambda c: c.show("bob-secret"))
    assert details["error"].startswith("403 FORBIDDEN")
    logs = as_user(alice, lab.socket, lambda c: b"".join(c.logs("bob-secret")).decode())
    assert logs["error"].startswith("403 FORBIDDEN")
    events = as_user(alice, lab.socket, lambda c: list(c.events()))["ok"]
    assert events == []  # not even anonymised: tests/hostile/test_event_privacy.py
    assert lab.json("show", "bob-secret")["state"] == "Running"
    assert lab.json("show", "bob-secret")["priority"] == 0


def test_a_member_cannot_use_another_workspace(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    answer = as_user(users[ALICE], lab.socket, lambda c: c.submit(spec("sneaky", "nlp")))
    assert answer["error"] == "403 FORBIDDEN: astra-alice is not a member of namespace nlp"


def test_the_priority_cap_applies_to_members_and_admins(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    answer = as_user(users[ALICE], lab.socket, lambda c: c.submit(spec("hot", "vision", 50)))
    assert answer["error"] == (
        "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace vision's maximum of 10"
    )
    result = lab.astra("run", "--workspace", "vision", "--priority", "50", "--", "true")
    assert result.stderr.strip() == answer["error"]
    assert "ok" in as_user(users[ALICE], lab.socket, lambda c: c.submit(spec("ok", "vision", 10)))


def test_an_admin_may_change_anyone_s_run(lab: Served, users: dict[str, pwd.struct_passwd]) -> None:
    as_user(users[BOB], lab.socket, lambda c: c.submit(spec("bob-run", "nlp")))
    assert lab.astra("priority", "bob-run", "-3").returncode == 0
    assert lab.json("show", "bob-run")["priority"] == -3
    assert lab.astra("delete", "bob-run").returncode == 0


def test_a_user_outside_the_socket_group_cannot_connect(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    subprocess.run(["gpasswd", "-d", CAROL, GROUP], check=False, capture_output=True)
    answer = as_user(users[CAROL], lab.socket, lambda c: c.runs())
    assert "no permission" in answer["error"]


def test_groups_and_dependencies_stay_within_their_workspace(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    group = {"kind": "replicas", "name": "bob-pool", "replicas": 1, "template": spec("x", "nlp")}
    assert "ok" in as_user(bob, lab.socket, lambda c: c.create_group(group))
    wait_for(lambda: lab.json("show", "bob-pool-0")["state"] == "Running")
    assert lab.json("show", "bob-pool-0")["owner"] == BOB  # made as its owner, runs as them
    assert as_user(alice, lab.socket, lambda c: c.groups())["ok"] == []
    for call in (
        lambda c: c.group("bob-pool"),
        lambda c: c.change_group("bob-pool", {"replicas": 0}),
        lambda c: c.delete_group("bob-pool"),
    ):
        assert as_user(alice, lab.socket, call)["error"] == "404 NOT_FOUND: no group bob-pool"
    sneaky = {**group, "name": "alice-pool"}
    answer = as_user(alice, lab.socket, lambda c: c.create_group(sneaky))
    assert answer["error"] == "403 FORBIDDEN: astra-alice is not a member of namespace nlp"
    after = spec("after-bob", "vision")
    after["spec"]["after"] = ["bob-pool-0"]
    answer = as_user(alice, lab.socket, lambda c: c.submit(after))
    assert answer["error"] == "422 INVALID_SPEC: spec.after: no run bob-pool-0"
    assert lab.json("replicas", "ls")[0]["replicas"] == 1
    assert "ok" in as_user(bob, lab.socket, lambda c: c.change_group("bob-pool", {"replicas": 0}))
    wait_for(lambda: lab.json("show", "bob-pool-0")["state"] == "Cancelled")
    events = as_user(alice, lab.socket, lambda c: list(c.events()))["ok"]
    assert events == []  # neither the group's events nor its runs' reach another workspace
    own = as_user(bob, lab.socket, lambda c: list(c.events()))["ok"]
    assert {"Scaled"} <= {e["kind"] for e in own if e["group"] == "bob-pool"}  # its own: all
