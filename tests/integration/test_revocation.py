"""Runs are authorised again when they start, as real Unix users against a real daemon.

A member removed from a workspace (the daemon restarted with the new config), or a
workspace removed from the config (reloaded by an admin change): their queued runs never
start and are never the head; they say why, and an admin, or their owner, may delete them.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from typing import Any

import pytest

from astraeus_tui.client import Client
from tests.support.harness import wait_for, write_config
from tests.support.served import Served
from tests.support.tenants import as_user, spec, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ANN, BEN = "astra-h5-g", "astra-h5-a", "astra-h5-b"


users = users_fixture(GROUP, ANN, BEN)


def config(vision: list[str], nlp: bool = True) -> str:
    text = f'[api]\nsocket_group = "{GROUP}"\n\n[workspaces.vision]\nmembers = {vision!r}\n'
    return text + (f'\n[workspaces.nlp]\nmembers = ["{ANN}"]\n' if nlp else "")


def run(lab: Served, name: str) -> dict[str, Any]:
    found: dict[str, Any] = Client(lab.socket).request("GET", f"/v1/runs/{name}")
    return found


def state(lab: Served, name: str, wanted: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        lambda: (r := run(lab, name))["state"] == wanted and r, 30, f"{name} {wanted}"
    )
    return found


def submitted(lab: Served, who: pwd.struct_passwd, name: str, workspace: str) -> None:
    answer = as_user(who, lab.socket, lambda c: c.submit(spec(name, workspace)))
    assert "ok" in answer, answer


def end_the_blocker_and_check(lab: Served, held: str, reason: str, behind: str) -> None:
    """The blocker ends; ``held`` waits with ``reason``, not the head: ``behind`` starts,
    and a run submitted after that is the head."""
    Client(lab.socket).delete("blocker")
    state(lab, behind, "Running")
    Client(lab.socket).submit(spec("later", "vision"))
    wait_for(lambda: (run(lab, "later")["reason"] or "").startswith("Next to run"), 30, "a head")
    found = run(lab, held)
    assert (found["state"], found["reason"]) == ("Queued", reason)
    assert found["started_at"] is None


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    lab = served(config([ANN, BEN]), gpus=1)
    Client(lab.socket).submit(spec("blocker", "vision"))
    state(lab, "blocker", "Running")
    return lab


def test_a_removed_members_queued_run_never_starts_and_an_admin_deletes_it(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    submitted(lab, users[ANN], "ann-run", "vision")
    submitted(lab, users[BEN], "ben-run", "vision")  # behind ann-run in the order
    write_config(lab.home, config([BEN]), gpus=1)
    lab.kill9()  # the blocker goes on running
    lab.restart()
    end_the_blocker_and_check(
        lab, "ann-run",
        "Waits: its owner is no longer a member of namespace vision"
        " (the owner or an admin may delete it)",
        behind="ben-run",
    )  # fmt: skip
    Client(lab.socket).delete("ann-run")
    state(lab, "ann-run", "Cancelled")


def test_a_removed_workspaces_run_never_starts_and_its_owner_may_delete_it(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    submitted(lab, users[ANN], "nlp-run", "nlp")
    submitted(lab, users[BEN], "ben-run", "vision")
    write_config(lab.home, config([ANN, BEN], nlp=False), gpus=1)
    Client(lab.socket).change_workspace("vision", {"weight": 1.0})  # the daemon reloads it
    end_the_blocker_and_check(
        lab, "nlp-run",
        "Waits: namespace nlp is no longer in the config (its owner or an admin may delete it)",
        behind="ben-run",
    )  # fmt: skip
    refused = as_user(users[BEN], lab.socket, lambda c: c.delete("nlp-run"))
    assert refused["error"].startswith("403 FORBIDDEN"), refused  # not ben's
    answer = as_user(users[ANN], lab.socket, lambda c: c.delete("nlp-run"))
    assert "ok" in answer, answer
    state(lab, "nlp-run", "Cancelled")
