"""A second real Unix user: no mounting another workspace's drive, no admin changes.

tests/integration/test_identity.py covers runs, logs, details and the socket's group;
this adds drives, workspace changes, and the socket's mode under a careless umask.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.runspec.parse import spec_to_dict
from runner.runspec.sbatch import parse_sbatch
from tests.hostile.helpers import db_state
from tests.support.served import Served
from tests.support.tenants import ALICE, BOB, CAROL, GROUP, as_user
from tests.support.tenants import users as users  # the fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")


def spec(name: str, workspace: str, drive: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "workspace": workspace},
        "spec": {"task_template": {
            "image": "local", "command": "true",
            "datavolume_refs": [{"name": drive, "mount_path": "/data"}],
        }},
    }  # fmt: skip


@pytest.fixture
def lab(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd], tmp_path: Path
) -> Served:
    drives = {n: tmp_path / n for n in ("nlp-data", "vision-data")}
    for folder in drives.values():
        folder.mkdir()
    config = f"""
[api]
socket_group = "{GROUP}"
[workspaces.vision]
members = ["{ALICE}"]
[workspaces.nlp]
members = ["{BOB}"]
[drives.nlp-data]
path = "{drives["nlp-data"]}"
workspaces = ["nlp"]
[drives.vision-data]
path = "{drives["vision-data"]}"
workspaces = ["vision"]
"""
    return served(config, gpus=0)


def test_a_member_cannot_mount_another_workspace_s_drive(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, before = users[ALICE], db_state(lab.home)
    answer = as_user(alice, lab.socket, lambda c: c.submit(spec("a", "vision", "nlp-data")))
    assert answer["error"] == "403 DRIVE_NOT_ALLOWED: namespace vision may not mount nlp-data"
    answer = as_user(alice, lab.socket, lambda c: c.submit(spec("a", "nlp", "nlp-data")))
    assert answer["error"] == f"403 FORBIDDEN: {ALICE} is not a member of namespace nlp"
    script = "#!/bin/bash\n#SBATCH --container-image=local\n"
    script += "#SBATCH --container-mounts=nlp-data:/data\ntrue\n"
    batch = parse_sbatch(script, name_hint="job")  # as `astra slurm sbatch` does, as alice
    answer = as_user(alice, lab.socket, lambda c: c.submit(spec_to_dict(batch)))
    assert answer["error"].startswith("403 DRIVE_NOT_ALLOWED: namespace vision may not")
    assert db_state(lab.home) == before
    ok = as_user(users[BOB], lab.socket, lambda c: c.submit(spec("b", "nlp", "nlp-data")))
    assert ok["ok"]["name"] == "b"  # the control: nlp's member mounts nlp's drive


def test_a_member_cannot_change_a_workspace(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    config = (lab.home / "config.toml").read_bytes()
    change = {"quota": {"gpus": 100}, "max_priority": 1000}
    answer = as_user(users[ALICE], lab.socket, lambda c: c.change_workspace("vision", change))
    assert answer["error"] == "403 FORBIDDEN: only an admin may change a workspace"
    assert (lab.home / "config.toml").read_bytes() == config


def test_the_socket_is_0660_whatever_the_umask(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    old = os.umask(0)
    try:
        d = served(f'[api]\nsocket_group = "{GROUP}"\n', gpus=0)
    finally:
        os.umask(old)
    st = d.socket.stat()
    assert (st.st_mode & 0o777, st.st_gid) == (0o660, grp.getgrnam(GROUP).gr_gid)
    subprocess.run(["gpasswd", "-d", CAROL, GROUP], check=False, capture_output=True)
    answer = as_user(users[CAROL], d.socket, lambda c: c.runs())
    assert "no permission" in answer["error"]
    assert "ok" in as_user(users[ALICE], d.socket, lambda c: c.runs())  # in the group
