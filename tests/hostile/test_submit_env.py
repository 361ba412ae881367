"""A run gets the environment of the `astra run` that submitted it, as sbatch's
``--export=ALL`` gives it: a variable, a tool on the caller's PATH, a virtualenv's
python. ``--export=NONE`` gives the clean one, ``--export=NAME`` only what it names.
What is carried reaches only the member's own processes: ``LD_PRELOAD``, ``PYTHONPATH``
and ``BASH_ENV`` from a member change nothing the daemon runs as root; and another
member of the workspace does not read it. A real daemon; real Unix users."""

from __future__ import annotations

import json
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
from tests.support.tenants import one_workspace, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-se-g", "astra-se-a", "astra-se-b"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


users = users_fixture(GROUP, ALICE, BOB, home=True, own_group=True, fresh=True)


@pytest.fixture
def kit(users: dict[str, pwd.struct_passwd]) -> Iterator[Path]:
    """Alice's project: a tool, a "virtualenv" python, and what a member could carry to
    reach root (a sitecustomize, a BASH_ENV, an LD_PRELOAD), each leaving a mark."""
    top = Path(tempfile.mkdtemp(prefix="astra-se-"))
    top.chmod(0o755)
    files = {
        "bin/mytool": "#!/bin/sh\necho tool ran\n",
        "venv/bin/python3": "#!/bin/sh\necho venv python\n",
        "py/sitecustomize.py": f"open('{top}/marks/site-%d' % __import__('os').getuid(), 'w')\n",
        "bashenv": f"touch {top}/marks/bash-$(id -u)\n",
        "evil.so": "not a library\n",
    }
    for name, text in files.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    (top / "marks").mkdir(mode=0o777)
    (top / "marks").chmod(0o777)
    alice = users[ALICE]
    for path in [top / "proj", *top.rglob("*")]:
        path.mkdir(exist_ok=True) if path == top / "proj" else None
        os.chown(path, alice.pw_uid, alice.pw_gid)
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(one_workspace(GROUP, "se", ALICE, BOB), gpus=1)


def shell_env(kit: Path, alice: pwd.struct_passwd) -> dict[str, str]:
    return {
        "HOME": alice.pw_dir, "USER": alice.pw_name, "FOO": "bar",
        "VIRTUAL_ENV": str(kit / "venv"),
        "PATH": f"{kit / 'venv/bin'}:{kit / 'bin'}:{SYSTEM_PATH}",
        "LD_PRELOAD": str(kit / "evil.so"), "PYTHONPATH": str(kit / "py"),
        "BASH_ENV": str(kit / "bashenv"),
    }  # fmt: skip


def ended(lab: Served, name: str) -> str:
    wait_for(lambda: lab.json("show", name)["state"] in ("Succeeded", "Failed"), 30, name)
    log: str = lab.astra("logs", name).stdout
    return log


def test_a_run_gets_the_environment_it_was_submitted_with(
    lab: Served, users: dict[str, pwd.struct_passwd], kit: Path
) -> None:
    alice, bob = users[ALICE], users[BOB]
    env = shell_env(kit, alice)
    command = ["--", "bash", "-c", "echo FOO=$FOO; mytool; python3"]
    astra_as(lab, alice, ["run", "--name", "mine", *command], cwd=kit / "proj", env=env)
    log = ended(lab, "mine")
    assert [line for line in log.splitlines() if "preloaded" not in line] == [
        "FOO=bar", "tool ran", "venv python"]  # fmt: skip
    shown = astra_as(lab, alice, ["show", "mine"], env=env).decode()
    assert f"variables from the submit; virtualenv {kit / 'venv'}" in shown
    # carried only to the member's own processes: its bash read BASH_ENV, nothing as root
    marks = sorted(p.name for p in (kit / "marks").iterdir())
    assert marks == [f"bash-{alice.pw_uid}"], marks
    assert "preloaded" not in (lab.home / "serve.log").read_text()
    # another member of the workspace reads the run, not what its owner carried
    theirs = json.loads(astra_as(lab, bob, ["show", "mine", "--json"], env={}))
    assert "submit_env" not in theirs["spec"]["spec"]["task_template"]
    own = json.loads(astra_as(lab, alice, ["show", "mine", "--json"], env=env))
    assert own["spec"]["spec"]["task_template"]["submit_env"]["FOO"] == "bar"


def test_export_none_and_names(lab: Served, users: dict[str, pwd.struct_passwd], kit: Path) -> None:
    alice = users[ALICE]
    env = shell_env(kit, alice)
    probe = ["--", "sh", "-c", "echo FOO=$FOO BAZ=$BAZ; command -v mytool || echo none"]
    here = kit / "proj"  # a folder the member may enter (the checkout may be private)
    astra_as(lab, alice, ["run", "--name", "clean", "--export=NONE", *probe], cwd=here, env=env)
    assert ended(lab, "clean") == "FOO= BAZ=\nnone\n"
    named = ["run", "--name", "named", "--export=FOO,BAZ=qux", *probe]
    astra_as(lab, alice, named, cwd=here, env=env)
    assert ended(lab, "named") == "FOO=bar BAZ=qux\nnone\n"
