"""A forgotten run leaves nothing behind: a later run of its name, in any workspace, starts clean.

Two real Unix users against a real daemon (``astra serve``) on its socket: bob's run
prints a secret, finishes and is forgotten; alice's run of the same name must not show
it, and bob's files must be gone from disk.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from typing import Any

import pytest

from astraeus_tui.client import Client
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating two Unix users needs root")
GROUP, ALICE, BOB = "astra-h1", "astra-h1-a", "astra-h1-b"

CONFIG = two_tenants(GROUP, ALICE, BOB, names=("a", "b"))


users = users_fixture(GROUP, ALICE, BOB)


def printing(name: str, workspace: str, text: str, seconds: float = 0) -> dict[str, Any]:
    """A run that prints ``text`` (then sleeps ``seconds``)."""
    script = f"echo {text}; sleep {seconds}" if seconds else f"echo {text}"
    return {
        "metadata": {"name": name, "workspace": workspace},
        "spec": {"task_template": {"image": "local", "command": "sh", "args": ["-c", script]}},
    }


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(CONFIG, gpus=2)


def _logs(user: pwd.struct_passwd, lab: Served, name: str) -> Any:
    return as_user(user, lab.socket, lambda c: b"".join(c.logs(name)).decode())


def _finish_and_forget(lab: Served, bob: pwd.struct_passwd, text: str, seconds: float) -> str:
    """Bob's run ``r`` prints ``text``, finishes and is forgotten; its id."""
    submitted = as_user(bob, lab.socket, lambda c: c.submit(printing("r", "b", text)))
    uid = submitted["ok"]["uid"]
    wait_for(lambda: lab.json("show", "r")["state"] == "Succeeded", 30, "bob's run")
    assert text in _logs(bob, lab, "r")["ok"]
    assert (lab.home / "logs" / uid / "1-0.log").read_text() == f"{text}\n"
    forgot = as_user(bob, lab.socket, lambda c: c.delete("r"))
    assert forgot["ok"]["outcome"] == "forgotten"
    return str(uid)


def test_a_name_used_again_in_another_workspace_never_shows_the_old_output(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    old = _finish_and_forget(lab, bob, "bob-secret-4711", 0)
    wait_for(lambda: not (lab.home / "logs" / old).exists(), 30, "bob's log folder to go")
    new = as_user(alice, lab.socket, lambda c: c.submit(printing("r", "a", "alice-out")))["ok"]
    assert new["uid"] != old and new["workspace"] == "a"
    wait_for(lambda: lab.json("show", "r")["state"] == "Succeeded", 30, "alice's run")
    assert _logs(alice, lab, "r") == {"ok": "alice-out\n"}
    shown = lab.astra("logs", "r")
    assert shown.returncode == 0 and shown.stdout == "alice-out\n"
    everything = "".join(p.read_text() for p in (lab.home / "logs").rglob("*.log"))
    assert "bob-secret" not in everything


def test_worker_folders_are_named_by_the_run_id_not_its_name(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    old = _finish_and_forget(lab, bob, "bob-secret-0815", 0)
    new = as_user(alice, lab.socket, lambda c: c.submit(printing("r", "a", "alice-out", 60)))
    uid = new["ok"]["uid"]
    wait_for(lambda: lab.json("show", "r")["state"] == "Running", 30, "alice's run")
    folders = [p.name for p in (lab.home / "workers").iterdir()]
    assert len(folders) == 1 and uid in folders[0], folders
    assert not any(old in f or "-r-" in f for f in folders), folders
    meta = (lab.home / "workers" / folders[0] / "meta.json").read_text()
    assert "bob-secret" not in meta
    lab.astra("delete", "r")
    wait_for(lambda: lab.json("show", "r")["state"] == "Cancelled", 30, "alice's run stopped")
    wait_for(lambda: not list((lab.home / "workers").iterdir()), 30, "the worker folder to go")
    assert lab.astra("delete", "r").stdout == "r: forgotten\n"
    wait_for(lambda: not (lab.home / "logs" / uid).exists(), 30, "alice's log folder to go")


def test_the_uid_is_in_the_run_object_and_shown_but_not_to_other_workspaces(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    uid = as_user(bob, lab.socket, lambda c: c.submit(printing("s", "b", "x", 60)))["ok"]["uid"]
    assert isinstance(uid, str) and len(uid) == 32 and int(uid, 16) >= 0
    assert lab.json("show", "s")["uid"] == uid
    assert f"uid:                {uid}" in lab.astra("show", "s").stdout.splitlines()
    seen = as_user(alice, lab.socket, lambda c: Client.runs(c))["ok"]
    assert [(r["name"], r["uid"]) for r in seen] == [("a job in another namespace", None)]
    lab.astra("delete", "s")
