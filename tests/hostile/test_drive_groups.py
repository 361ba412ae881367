"""A drive prepared as the lab guide says (``install -d -m 2770 -g vision …``) is
writable by vision's members whose primary group is another: a run, its drive's
placement and ``astra exec`` keep the member's supplementary groups, as a login
(``su - member``) gives them. A real daemon, a real Unix user, a real group."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.hostile.helpers import astra_as
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user
from tests.support.users import unix_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
SOCKET, TEAM, MEMBER = "astra-dg-s", "astra-dg-team", "astra-dg-m"


@pytest.fixture(scope="module")
def member() -> Iterator[pwd.struct_passwd]:
    subprocess.run(["groupadd", "-f", TEAM], check=True)
    try:
        with unix_users(SOCKET, MEMBER, home=True, own_group=True, fresh=True) as made:
            subprocess.run(["usermod", "-a", "-G", TEAM, MEMBER], check=True)
            yield made[MEMBER]
    finally:
        subprocess.run(["groupdel", TEAM], check=False, capture_output=True)


@pytest.fixture
def drive() -> Iterator[Path]:
    """``/tmp/…/checkpoints``, 2770 root:TEAM, as the guide installs it."""
    top = Path(tempfile.mkdtemp(prefix="astra-dg-"))
    top.chmod(0o755)
    folder = top / "checkpoints"
    subprocess.run(["install", "-d", "-m", "2770", "-g", TEAM, str(folder)], check=True)
    yield folder
    shutil.rmtree(top, ignore_errors=True)


def test_a_member_writes_a_drive_of_a_supplementary_group(
    served: Callable[..., Served], member: pwd.struct_passwd, drive: Path
) -> None:
    assert member.pw_gid != grp.getgrnam(TEAM).gr_gid  # TEAM is supplementary only
    lab = served(f"""
[api]
socket_group = "{SOCKET}"
[workspaces.vision]
members = ["{MEMBER}"]
[drives.checkpoints]
path = "{drive}"
workspaces = ["vision"]
""", gpus=1)  # fmt: skip
    task = {"image": "local", "command": "sh",
            "args": ["-c", "id -G > /ckpt/groups && exec sleep 60"],
            "datavolume_refs": [{"name": "checkpoints", "mount_path": "/ckpt"}]}  # fmt: skip
    document = {"metadata": {"name": "saver", "workspace": "vision"},
                "spec": {"restart_limit": 0, "task_template": task}}  # fmt: skip
    assert "ok" in as_user(member, lab.socket, lambda c: c.submit(document))
    ended = ("Succeeded", "Failed", "Cancelled")
    wait_for(lambda: (drive / "groups").exists() or lab.json("show", "saver")["state"] in ended,
             30, "the run to write into the drive")  # fmt: skip
    shown = lab.json("show", "saver")
    assert (drive / "groups").exists(), shown
    written = (drive / "groups").stat()  # (a sandbox shows groups it does not map as 65534)
    assert (written.st_uid, written.st_gid) == (member.pw_uid, grp.getgrnam(TEAM).gr_gid)
    # astra exec inside it writes there too
    astra_as(lab, member, ["exec", "saver", "--", "sh", "-c", "echo hi > /ckpt/by-exec"])
    assert (drive / "by-exec").read_text() == "hi\n"
