"""The checkpoint scan looks with the run's owner's eyes: a member who names a run as
another user's private folder on a shared drive learns nothing of what it holds (its
newest file's name, size, time). Real Unix users on a real daemon."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-cs-g", "astra-cs-a", "astra-cs-b"


users = users_fixture(GROUP, ALICE, BOB, own_group=True, fresh=True)


@pytest.fixture
def shared(users: dict[str, pwd.struct_passwd]) -> Iterator[Path]:
    """A drive both use (sticky, as /tmp), bob's 0700 folder in it with a file, and
    alice's own folder with hers."""
    top = Path(tempfile.mkdtemp(prefix="astra-cs-"))
    top.chmod(0o755)
    drive = top / "scratch"
    drive.mkdir()
    drive.chmod(0o1777)
    for user, folder, mode in ((users[BOB], "bobs-plans", 0o700), (users[ALICE], "alices", 0o750)):
        (drive / folder).mkdir()
        (drive / folder / "latest.pt").write_text("x" * 123)
        for path in (drive / folder, drive / folder / "latest.pt"):
            os.chown(path, user.pw_uid, user.pw_gid)
        (drive / folder).chmod(mode)
    yield drive
    shutil.rmtree(top, ignore_errors=True)


def test_a_run_named_as_another_users_private_folder_sees_nothing(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd], shared: Path
) -> None:
    lab = served(one_workspace(GROUP, "lab", ALICE, BOB) + f"""[drives.scratch]
path = "{shared}"
""", gpus=1)  # fmt: skip
    alice = users[ALICE]
    for name in ("bobs-plans", "alices"):
        task = {"image": "local", "command": "true",
                "requested_resources": {"gpu_requests": {"count": 2}},  # never starts
                "datavolume_refs": [{"name": "scratch", "mount_path": "/s"}]}  # fmt: skip
        document = {"metadata": {"name": name, "workspace": "lab"},
                    "spec": {"task_template": task}}  # fmt: skip
        assert "ok" in as_user(alice, lab.socket, lambda c, d=document: c.submit(d))
    probe = as_user(alice, lab.socket, lambda c: c.show("bobs-plans"))["ok"]
    assert probe["checkpoint"] is None  # bob's folder: alice may not list it
    own = as_user(alice, lab.socket, lambda c: c.show("alices"))["ok"]["checkpoint"]
    assert (own["path"], own["size"]) == ("/s/alices/latest.pt", 123)  # the control
    assert lab.json("show", "bobs-plans")["checkpoint"] is None  # also as root: it is alice's run
