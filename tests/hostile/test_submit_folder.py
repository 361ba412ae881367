"""A run starts where it was submitted from, as sbatch's does: a member's `astra run` in
a project folder finds its relative files; `--chdir` names another; a submit folder the
member cannot enter when the run starts leaves it in its home, its log's first line
saying so; a --chdir folder it cannot enter fails the start in one line. The folders are
entered as the member, never as root. A real daemon; a real Unix user."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.hostile.helpers import astra_as
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.users import unix_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, MEMBER = "astra-sf-g", "astra-sf-m"


@pytest.fixture(scope="module")
def member() -> Iterator[pwd.struct_passwd]:
    with unix_users(GROUP, MEMBER, home=True, own_group=True, fresh=True) as made:
        yield made[MEMBER]


@pytest.fixture
def project(member: pwd.struct_passwd) -> Iterator[Path]:
    """The member's project folder with a data file, and a second folder beside it."""
    top = Path(tempfile.mkdtemp(prefix="astra-sf-"))
    top.chmod(0o755)
    for name in ("proj", "other"):
        (top / name).mkdir()
        (top / name / "data.txt").write_text(f"data of {name}\n")
        for path in (top / name, top / name / "data.txt"):
            os.chown(path, member.pw_uid, member.pw_gid)
    yield top / "proj"
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def lab(served: Callable[..., Served], member: pwd.struct_passwd) -> Served:
    return served(f'[api]\nsocket_group = "{GROUP}"\n[workspaces.sf]\nmembers = ["{MEMBER}"]\n',
                  gpus=1)  # fmt: skip


def ran(lab: Served, name: str) -> tuple[str, str]:
    wait_for(lambda: lab.json("show", name)["state"] in ("Succeeded", "Failed"), 30, name)
    return lab.json("show", name)["state"], lab.astra("logs", name).stdout


def test_a_run_starts_in_the_folder_it_was_submitted_from(
    lab: Served, member: pwd.struct_passwd, project: Path
) -> None:
    cat = ["--", "sh", "-c", "pwd; cat data.txt"]
    astra_as(lab, member, ["run", "--name", "here", *cat], cwd=project)
    assert ran(lab, "here") == ("Succeeded", f"{project}\ndata of proj\n")
    shown = lab.astra("show", "here").stdout
    assert f"folder:             {project} (submitted from)" in shown
    astra_as(lab, member, ["run", "--name", "there", "-D", "../other", *cat], cwd=project)
    assert ran(lab, "there") == ("Succeeded", f"{project.parent / 'other'}\ndata of other\n")


def test_a_folder_the_member_cannot_enter(
    lab: Served, member: pwd.struct_passwd, project: Path
) -> None:
    locked = project.parent / "locked"
    locked.mkdir(mode=0o700)  # root's: the daemon could enter it, the member cannot
    astra_as(lab, member, ["run", "--name", "asked", "-D", str(locked), "--", "pwd"], cwd=project)
    state, log = ran(lab, "asked")
    assert state == "Failed" and log == "" and lab.json("show", "asked")["restarts"] == 0
    reason = lab.json("show", "asked")["reason"]
    assert f"cannot enter the working directory {locked}: Permission denied" in reason
    # submitted held from the project, which is closed to the member before it starts
    astra_as(lab, member, ["run", "--name", "home", "--hold", "--", "pwd"], cwd=project)
    os.chown(project, 0, 0)
    project.chmod(0o700)
    astra_as(lab, member, ["release", "home"], cwd=project.parent)
    state, log = ran(lab, "home")
    assert state == "Succeeded"
    assert log.splitlines() == [
        f"[astraeus: cannot enter the submit folder {project} (Permission denied):"
        f" started in {member.pw_dir}]", member.pw_dir]  # fmt: skip
