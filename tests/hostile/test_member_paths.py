"""Paths a member chooses are never looked at with root's rights.

Two real Unix users: alice keeps a private folder in her home; bob, in the same
workspace, points symlinks at it and at /etc, names programs under /root and leaves
a symlink in his drive, through a real daemon (process executor) on its socket.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace
from tests.support.users import unix_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
GROUP, ALICE, BOB = "astra-h3-g", "astra-h3-a", "astra-h3-b"
SECRET = "secret-notes-h3.txt"


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, pwd.struct_passwd]]:
    with unix_users(GROUP, ALICE, BOB, home=True, fresh=True) as entries:
        home = Path(entries[ALICE].pw_dir)
        home.chmod(0o755)  # her home can be listed; these two folders cannot
        for private in (home / "hidden", home / ".ssh"):
            private.mkdir(mode=0o700)
            os.chown(private, entries[ALICE].pw_uid, entries[ALICE].pw_gid)
        (home / "hidden" / SECRET).write_text("alice's\n")
        (home / ".ssh" / "id_ed25519").write_text("not a real key\n")
        yield entries


@pytest.fixture
def drive() -> Iterator[Path]:
    """A drive folder bob can reach (the test's tmp_path is root's only)."""
    top = Path(tempfile.mkdtemp(prefix="astra-h3-drive-"))
    top.chmod(0o755)
    (top / "data").mkdir(mode=0o777)
    (top / "data").chmod(0o777)
    yield top / "data"
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd], drive: Path) -> Served:
    config = (
        one_workspace(GROUP, "h3", ALICE, BOB)
        + f"""[drives.h3-data]
path = "{drive}"
workspaces = ["h3"]
"""
    )
    return served(config, gpus=0)


@pytest.fixture
def bob_link(users: dict[str, pwd.struct_passwd]) -> Iterator[Callable[[str], str]]:
    """``link(target)``: a symlink in /tmp that bob made, pointing at ``target``."""
    made: list[str] = []

    def link(target: str) -> str:
        path = f"/tmp/astra-h3-{uuid.uuid4().hex[:8]}"
        os.symlink(target, path)
        os.lchown(path, users[BOB].pw_uid, users[BOB].pw_gid)
        made.append(path)
        return path

    yield link
    for path in made:
        os.unlink(path)


def spec(name: str, argv: list[str], mount_path: str, gpus: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "workspace": "h3"},
        "spec": {"restart_limit": 0, "task_template": {
            "image": "local", "command": argv[0], "args": argv[1:],
            "datavolume_refs": [{"name": "h3-data", "mount_path": mount_path}],
            "requested_resources": {"gpu_requests": {"count": gpus}},
        }},
    }  # fmt: skip


def finished(lab: Served, bob: pwd.struct_passwd, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        run: dict[str, Any] = as_user(bob, lab.socket, lambda c: c.show(name))["ok"]
        return run if run["state"] in ("Failed", "Succeeded") else None

    return wait_for(done, 30, f"run {name} to end")


def everything_bob_sees(lab: Served, bob: pwd.struct_passwd, name: str) -> str:
    """The run's page, its events and its log, as bob gets them."""
    page = as_user(bob, lab.socket, lambda c: c.show(name))
    log = as_user(bob, lab.socket, lambda c: b"".join(c.logs(name)).decode(errors="replace"))
    return f"{page}\n{log}"


@needs_bwrap
def test_a_mount_path_through_a_symlink_does_not_list_another_user_s_folder(
    lab: Served, users: dict[str, pwd.struct_passwd], bob_link: Callable[[str], str]
) -> None:
    bob, hidden = users[BOB], f"{users[ALICE].pw_dir}/hidden"
    link = bob_link(hidden)
    target = f"{link}/new"
    answer = as_user(bob, lab.socket, lambda c: c.submit(spec("peek", ["ls", "-a", link], target)))
    assert answer["ok"]["name"] == "peek"
    run = finished(lab, bob, "peek")
    assert run["state"] == "Failed"
    assert run["reason"].endswith(
        f"cannot place a drive in {hidden}: the run's user cannot list it (Permission denied)"
    )
    assert SECRET not in everything_bob_sees(lab, bob, "peek")
    assert sorted(os.listdir(hidden)) == [SECRET]  # the host's folder is as it was


@needs_bwrap
@pytest.mark.parametrize("below", ["", "/new"], ids=["the-link", "below-it"])
def test_a_mount_path_that_leads_to_etc_is_refused(
    lab: Served, users: dict[str, pwd.struct_passwd], bob_link: Callable[[str], str], below: str
) -> None:
    bob, link = users[BOB], bob_link("/etc")
    target = link + below
    answer = as_user(bob, lab.socket, lambda c: c.submit(spec("over", ["true"], target)))
    assert answer["ok"]["name"] == "over"
    run = finished(lab, bob, "over")
    assert run["state"] == "Failed"
    assert run["reason"].endswith(
        f"drive mount path {target} leads to /etc{below}, which must not be / or under"
        " /proc, /sys, /dev, /run, /var/run, /etc, /boot, /bin, /sbin, /lib*, /usr"
    )


@needs_bwrap
def test_a_program_under_root_s_home_answers_the_same_whether_it_exists(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    secret = Path(f"/root/astra-h3-prog-{uuid.uuid4().hex[:8]}")
    secret.write_text("#!/bin/sh\necho root's own\n")
    secret.chmod(0o755)
    bob, missing = users[BOB], f"/root/astra-h3-nope-{uuid.uuid4().hex[:8]}"
    try:
        seen = []
        for name, program in (("there", str(secret)), ("absent", missing)):
            as_user(bob, lab.socket, lambda c, n=name, p=program: c.submit(spec(n, [p], "/h3")))
            run = finished(lab, bob, name)
            seen.append((run["state"], run["exit_code"], run["reason"].replace(program, "PROG")))
        assert seen[0] == seen[1]
        assert seen[0][:2] == ("Failed", 127)
    finally:
        secret.unlink()


def test_the_checkpoint_scan_does_not_follow_a_symlink_in_the_drive(
    lab: Served, users: dict[str, pwd.struct_passwd], drive: Path
) -> None:
    bob = users[BOB]
    (drive / "probe").symlink_to(f"{users[ALICE].pw_dir}/.ssh")  # as the run would leave it
    os.lchown(drive / "probe", bob.pw_uid, bob.pw_gid)
    asked = spec("probe", ["true"], "/ckpt", gpus=1)  # a GPU this machine lacks: it waits
    assert as_user(bob, lab.socket, lambda c: c.submit(asked))["ok"]["name"] == "probe"
    page = as_user(bob, lab.socket, lambda c: c.show("probe"))["ok"]
    assert page["checkpoint"] is None
    assert "id_ed25519" not in str(page)
    (drive / "probe").unlink()
    (drive / "probe").mkdir()  # the control: a real folder's checkpoint is found
    (drive / "probe" / "step-1.pt").write_text("weights\n")
    page = as_user(bob, lab.socket, lambda c: c.show("probe"))["ok"]
    assert page["checkpoint"]["path"] == "/ckpt/probe/step-1.pt"
