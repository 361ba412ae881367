"""A local run gets what it asked for and nothing more: its memory, its share of CPU, and
a stop that reaches every process it made. A real daemon on this machine's cgroups (v1
here, v2 where the machine has it: the same tests), real Unix users."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.executors.cgroups import WorkerGroup, detect
from tests.hostile.helpers import astra_as
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import one_workspace, users_fixture

PY = "/usr/bin/python3"  # a member cannot run root's own interpreter
FOUND = detect("probe-enforced")
if FOUND.cgroups is not None:
    FOUND.cgroups.forget()
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root"),
    pytest.mark.skipif(FOUND.cgroups is None, reason=f"no cgroups to enforce: {FOUND.why_not}"),
    pytest.mark.skipif(not os.path.exists(PY), reason=f"no {PY} for members' programs"),
]
GROUP, ALICE, BOB = "astra-ea-g", "astra-ea-a", "astra-ea-b"
LEAK = f"{PY} -c \"x = b'a' * (300 << 20); print('allocated')\""
NEIGHBOUR = f"{PY} -c \"import time; x = b'b' * (50 << 20); time.sleep(4); print('intact')\""


members = users_fixture(GROUP, ALICE, BOB, home=True, own_group=True, fresh=True, name="members")


@pytest.fixture
def lab(served: Callable[..., Served], members: dict[str, pwd.struct_passwd]) -> Served:
    config = one_workspace(GROUP, "ea", ALICE, BOB)
    return served(config, gpus=2, machine='restart_backoff = "1s"')


@pytest.fixture
def folder() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="astra-ea-"))
    made.chmod(0o777)  # the members' runs start here, and none of them owns it
    yield made
    shutil.rmtree(made, ignore_errors=True)


def run(lab: Served, who: pwd.struct_passwd, folder: Path, *args: str) -> None:
    said = astra_as(lab, who, ["run", *args], cwd=folder)
    assert said.startswith(b"Submitted run "), said


def ended(lab: Served, name: str, timeout: float = 60) -> dict[str, object]:
    finished = ("Succeeded", "Failed", "Cancelled")
    wait_for(lambda: lab.json("show", name)["state"] in finished, timeout, name)
    shown: dict[str, object] = lab.json("show", name)
    return shown


def group_of(lab: Served, name: str) -> WorkerGroup:
    """The running worker 0's cgroup, as its supervisor wrote it down."""
    uid = lab.json("show", name)["uid"]
    metas = list((lab.home / "workers").glob(f"*{uid}*/meta.json"))
    assert metas, f"no worker folder of {name}"
    group = WorkerGroup.from_json(json.loads(metas[0].read_text()).get("cgroup"))
    assert group is not None, "the worker has no cgroup"
    return group


def test_a_leak_past_its_memory_ends_it_alone_and_says_so(
    lab: Served, members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    run(lab, members[BOB], folder, "--name", "neighbour", "--", "sh", "-c", NEIGHBOUR)
    wait_for(lambda: lab.json("show", "neighbour")["state"] == "Running", 20, "the neighbour")
    run(lab, members[ALICE], folder, "--name", "leak", "--memory", "100MiB", "--cpus", "1",
        "--", "sh", "-c", LEAK)  # fmt: skip
    wait_for(lambda: lab.json("show", "leak")["restarts"] >= 1, 30, "the leak's first end")
    reason = str(lab.json("show", "leak")["reason"])
    assert re.match(r"Restarting at [-\d: ]+ UTC \(restart 1 of 10\): worker 0 ran out of memory"
                    r" \(asked 100MiB; its peak ", reason), reason  # fmt: skip
    events = [e for e in lab.json("show", "leak")["events"] if e["kind"] == "Restarting"]
    assert "ran out of memory (asked 100MiB; its peak 100MiB)" in events[0]["message"]
    lab.astra("delete", "leak")
    shown = ended(lab, "neighbour")
    assert (shown["state"], shown["exit_code"]) == ("Succeeded", 0)
    assert lab.astra("logs", "neighbour").stdout == "intact\n"  # nothing else was touched


def test_the_budget_spent_on_memory_fails_it_with_the_verdict(
    lab: Served, members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    spec = {"metadata": {"name": "leak0"}, "spec": {"restart_limit": 0, "task_template": {
        "image": "local", "command": "sh", "args": ["-c", LEAK],
        "requested_resources": {"cpu_cores": 1, "memory_bytes": "100MiB"}}}}  # fmt: skip
    path = folder / "leak0.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o644)
    said = astra_as(lab, members[ALICE], ["submit", str(path)], cwd=folder)
    assert b"leak0" in said, said
    shown = ended(lab, "leak0")
    assert shown["state"] == "Failed"
    assert str(shown["reason"]).startswith(
        "Failed: worker 0 ran out of memory (asked 100MiB; its peak "
    ), shown["reason"]
    assert str(shown["reason"]).endswith("; the restart budget (0) is spent")


def test_a_busy_loop_asking_half_a_core_gets_half_a_core(
    lab: Served, members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    busy = (f"{PY} -c \"import os, time; t = time.monotonic()\n"
            "while time.monotonic() - t < 5: pass\n"
            "c = os.times(); print(round(c.user + c.system, 2))\"")  # fmt: skip
    run(lab, members[ALICE], folder, "--name", "busy", "--cpus", "0.5", "--", "sh", "-c", busy)
    shown = ended(lab, "busy")
    assert shown["state"] == "Succeeded"
    used = float(lab.astra("logs", "busy").stdout)
    assert used <= 0.6 * 5, f"{used} s of CPU in 5 s asking 0.5 cores"


def test_a_stop_ends_a_double_forked_process_and_outlives_a_daemon_crash(
    lab: Served, members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    pidfile = folder / "escaped.pid"
    escape = (f"{PY} -c \"import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              f"        open('{pidfile}', 'w').write(str(os.getpid())); time.sleep(600)\n"
              "    os._exit(0)\n"
              "time.sleep(600)\"")  # fmt: skip
    run(lab, members[ALICE], folder, "--name", "escape", "--", "sh", "-c", escape)
    wait_for(lambda: pidfile.exists() and pidfile.read_text(), 20, "the escaped process")
    escaped = int(pidfile.read_text())
    group = group_of(lab, "escape")
    assert escaped in group.pids()  # it left its session, not its cgroup
    lab.kill9()  # the daemon crashes; the run goes on, and is adopted
    lab.restart()
    lab.astra("delete", "escape")
    shown = ended(lab, "escape", 30)
    assert shown["state"] == "Cancelled"
    with pytest.raises(ProcessLookupError):
        os.kill(escaped, 0)
    assert group.pids() == []
    wait_for(lambda: not any(f.exists() for f in group.folders), 10, "the group removed")


def test_a_command_run_in_a_worker_is_in_its_cgroup(
    lab: Served, members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    run(lab, members[ALICE], folder, "--name", "host", "--memory", "200MiB", "--", "sleep", "60")
    wait_for(lambda: lab.json("show", "host")["state"] == "Running", 20, "the run")
    group = group_of(lab, "host")
    said = astra_as(lab, members[ALICE], ["exec", "host", "--", "cat", "/proc/self/cgroup"],
                    cwd=folder).decode()  # fmt: skip
    worker = group.folders[0].name
    assert any(line.endswith(f"/{worker}") for line in said.splitlines()), said
    lab.astra("delete", "host")


def test_where_asks_are_enforced_nothing_says_otherwise(lab: Served) -> None:
    from astraeus_tui.client import Client

    status = json.loads(Client(lab.socket).answer("GET", "/v1/status"))
    assert status["not_enforced"] is None
    assert "Not enforced" not in lab.astra("gpus").stdout
    assert lab.json("gpus")["not_enforced"] is None


def test_with_cpu_pinning_each_run_gets_cores_of_its_own(
    served: Callable[..., Served], members: dict[str, pwd.struct_passwd], folder: Path
) -> None:
    config = one_workspace(GROUP, "ea", ALICE, BOB)
    lab = served(config, gpus=2, machine="cpu_pinning = true")
    cores = sorted(os.sched_getaffinity(0))
    allowed = "grep Cpus_allowed_list /proc/self/status | cut -f2; sleep 30"
    names = [f"pinned-{i}" for i in range(len(cores) + 1)]  # one more than there are cores
    for name in names:
        run(lab, members[ALICE], folder, "--name", name, "--cpus", "1", "--", "sh", "-c", allowed)
        wait_for(lambda n=name: lab.astra("logs", n).stdout.strip(), 20, name)  # type: ignore[misc]
    seen = [lab.astra("logs", n).stdout.strip() for n in names]
    assert sorted(seen[:-1]) == [str(c) for c in cores]  # a core each, none shared
    assert seen[-1] == f"{cores[0]}-{cores[-1]}"  # none left: a share of every core
    for name in names:
        lab.astra("delete", name)
