"""Into a running run: ``astra exec`` and ``astra attach`` through a real daemon.

Two real Unix users in one workspace: bob owns the runs, alice may read them but not
act inside them; root is an admin. The process executor, a drive placed by
bubblewrap where it is installed.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp  # noqa: F401  (imported here: a child that became a user cannot read it)
import pytest

from astraeus_tui.cli.main import app
from tests.support.harness import interruptible, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace, users_fixture
from tests.support.terminal import astra_in_terminal, read_until, shell_in_terminal
from tests.support.users import fork_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
GROUP, ALICE, BOB = "astra-ex-g", "astra-ex-a", "astra-ex-b"


users = users_fixture(GROUP, ALICE, BOB, home=True, own_group=True, shell="/bin/sh", fresh=True)


@pytest.fixture
def drive() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="astra-ex-drive-"))
    top.chmod(0o755)
    (top / "data").mkdir(mode=0o777)
    (top / "data").chmod(0o777)
    (top / "data" / "marker.txt").write_text("on the drive\n")
    yield top / "data"
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd], drive: Path) -> Served:
    config = (
        one_workspace(GROUP, "ex", ALICE, BOB)
        + f"""[drives.ex-data]
path = "{drive}"
workspaces = ["ex"]
"""
    )
    return served(config, gpus=2)


def submit(
    lab: Served, who: pwd.struct_passwd, argv: list[str], mount: str | None = None,
    folder: str | None = None,
) -> str:  # fmt: skip
    name = f"ex-{uuid.uuid4().hex[:6]}"
    task: dict[str, Any] = {"image": "local", "command": argv[0], "args": argv[1:],
                            "requested_resources": {"gpu_requests": {"count": 1}}}  # fmt: skip
    if folder is not None:
        task["working_dir"] = folder
    if mount is not None:
        task["datavolume_refs"] = [{"name": "ex-data", "mount_path": mount}]
    document = {"metadata": {"name": name, "workspace": "ex"},
                "spec": {"restart_limit": 0, "task_template": task}}  # fmt: skip
    answer = as_user(who, lab.socket, lambda c: c.submit(document))
    assert "ok" in answer, answer
    wait_for(lambda: lab.json("show", name)["state"] == "Running", 30, f"{name} to run")
    return name


def astra(
    lab: Served, *args: str, user: pwd.struct_passwd | None = None, input: str = ""
) -> subprocess.CompletedProcess[str]:
    """``astra ARGS`` in a child that is really ``user`` (root when None): forked, not
    executed, since another user cannot reach this interpreter's files."""
    if user is None:
        return lab.astra(*args, input=input)
    pipes = [os.pipe() for _ in range(3)]
    pid = fork_as(user, [grp.getgrnam(GROUP).gr_gid])
    if pid == 0:  # the child never returns into the test
        code = 1
        try:
            for target, (read, write) in enumerate(pipes):
                os.dup2(read if target == 0 else write, target)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115  (not the test's captured streams)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            os.environ.update(lab.env)
            app(list(args), prog_name="astra")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    for target, (read, write) in enumerate(pipes):
        os.close(write if target else read)
    os.write(pipes[0][1], input.encode())
    os.close(pipes[0][1])
    out, err = (_drain(pipes[n][0]) for n in (1, 2))
    _, status = os.waitpid(pid, 0)
    return subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(status), out, err)


def _drain(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode()


def test_exec_runs_as_the_run_s_user_with_its_environment(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    bob = users[BOB]
    name = submit(lab, bob, ["sleep", "120"])
    shown = "echo run=$ASTRAEUS_RUN_NAME gpus=$CUDA_VISIBLE_DEVICES; id -u; id -G; exit 3"
    result = astra(lab, "exec", name, "--", "sh", "-c", shown, user=users[BOB])
    assert result.returncode == 3, result.stderr
    gpus = lab.json("show", name)["gpus"]
    lines = result.stdout.splitlines()
    assert lines[0] == f"run={name} gpus={','.join(str(g) for g in gpus)}"
    login = sorted(os.getgrouplist(bob.pw_name, bob.pw_gid))  # as `su - bob` gives them
    assert lines[1] == str(bob.pw_uid) and sorted(map(int, lines[2].split())) == login

    missing = astra(lab, "exec", name, "--", "no-such-program-ex", user=users[BOB])
    assert (missing.returncode, missing.stderr.strip()) == (
        127,
        "command not found: no-such-program-ex",
    )
    fed = lab.astra("exec", "-i", name, "--", "sh", "-c", "read a; echo got $a", input="x y\n")
    assert (fed.returncode, fed.stdout) == (0, "got x y\n")  # root: an admin may


def test_exec_starts_in_the_folder_the_run_started_in(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    """As `kubectl exec` lands in the container's working directory: it started in the
    owner's home before, wherever the run itself ran."""
    folder = Path(tempfile.mkdtemp(prefix="astra-ex-"))
    try:
        folder.chmod(0o755)
        name = submit(lab, users[BOB], ["sh", "-c", "pwd; sleep 120"], folder=str(folder))
        shown = astra(lab, "exec", name, "--", "pwd", user=users[BOB])
        assert (shown.returncode, shown.stdout) == (0, f"{folder}\n"), shown.stderr
        wait_for(lambda: lab.astra("logs", name).stdout == f"{folder}\n", 10, "its own pwd")
        lab.astra("delete", name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_only_the_owner_and_admins_may_exec_and_only_in_a_running_run(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = submit(lab, users[BOB], ["sleep", "120"])
    refused = astra(lab, "exec", name, "--", "true", user=users[ALICE])
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "403 FORBIDDEN: only the run's owner or an admin may run commands inside it"
    )
    assert astra(lab, "exec", name, "--", "true").returncode == 0  # root is an admin
    lab.astra("delete", name)
    wait_for(lambda: lab.json("show", name)["state"] == "Cancelled", 30, "cancelled")
    ended = astra(lab, "exec", name, "--", "true", user=users[BOB])
    assert (ended.returncode, ended.stderr.strip()) == (
        1, f"409 NOT_RUNNING: run {name} is Cancelled, not Running",
    )  # fmt: skip
    nothing = astra(lab, "exec", "no-such-run", "--", "true", user=users[BOB])
    assert nothing.stderr.strip() == "404 NOT_FOUND: no run no-such-run"


@needs_bwrap
def test_exec_sees_the_drive_where_the_worker_sees_it(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    mount = f"/tmp/astra-ex-mnt-{uuid.uuid4().hex[:6]}/data"  # made only in the sandbox
    name = submit(lab, users[BOB], ["sleep", "120"], mount=mount)
    result = astra(lab, "exec", name, "--", "cat", f"{mount}/marker.txt", user=users[BOB])
    assert (result.returncode, result.stdout) == (0, "on the drive\n"), result.stderr
    assert not Path(mount).exists(), "the host never gains the mount path"


def test_an_exec_ends_when_the_run_stops(lab: Served, users: dict[str, pwd.struct_passwd]) -> None:
    # the run's program outlives the stop's SIGTERM by a second, within the grace: its end
    # (and the worker's clean-up, which kills what is left with SIGKILL) comes after the
    # exec'd command has had its SIGTERM, however busy the machine
    program = ["sh", "-c", "trap 'sleep 1; exit 0' TERM; sleep 120 & wait"]
    name = submit(lab, users[BOB], program)
    command = [sys.executable, "-m", "astraeus_tui.cli.main", "exec", name, "--",
               "sh", "-c", "echo in; exec sleep 300"]  # fmt: skip
    session = subprocess.Popen(command, env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert session.stdout is not None
    assert read_until(session.stdout.fileno(), b"in\n", 30) == b"in\n"  # the command runs
    lab.astra("delete", name)
    session.wait(30)  # the command was ended with the run; astra exec returned
    # in the worker's cgroup, it gets the stop's SIGTERM with the run's processes; where
    # there is no cgroup, its keeper ends it with SIGKILL as the run stops
    from runner.executors.cgroups import probe

    ended_by = signal.SIGTERM if probe()[0] == "ok" else signal.SIGKILL
    assert session.returncode == 128 + ended_by


def test_a_terminal_for_exec_it(lab: Served, users: dict[str, pwd.struct_passwd]) -> None:
    name = submit(lab, users[BOB], ["sleep", "120"])
    shell_in_terminal(lab, name, b"$ ")  # the shell runs as bob


def test_attach_follows_output_and_state_and_ctrl_c_detaches(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = submit(lab, users[BOB], ["sh", "-c", "echo started; sleep 3; echo done; exit 5"])
    attached = astra(lab, "attach", name, user=users[BOB])
    assert attached.returncode == 5
    assert attached.stdout.splitlines()[:2] == ["started", "done"]
    assert attached.stdout.splitlines()[-1].startswith(f"{name}: Failed")

    long = submit(lab, users[BOB], ["sh", "-c", "echo up; sleep 120"])
    command = interruptible([sys.executable, "-m", "astraeus_tui.cli.main", "attach", long])
    follower = subprocess.Popen(
        command, env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert follower.stdout is not None
    assert b"up\n" in read_until(follower.stdout.fileno(), b"up\n", 30)  # attached
    follower.send_signal(signal.SIGINT)
    _out, err = follower.communicate(timeout=20)
    assert follower.returncode == 130
    assert f"{long}: detached; it goes on" in err.decode()
    assert lab.json("show", long)["state"] == "Running"


def test_an_interactive_run_waits_its_turn_then_gets_the_terminal(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    blocker = submit(lab, users[BOB], ["sleep", "10"])
    lab.astra("priority", blocker, "0")
    two = submit(lab, users[BOB], ["sleep", "10"])  # both GPUs held for a few seconds
    name = f"it-{uuid.uuid4().hex[:6]}"
    pid, fd = astra_in_terminal(lab, "run", "-it", "--name", name, "--workspace", "ex",
                                 "--gpus", "1", "--", "sh")  # fmt: skip
    waited = read_until(fd, b"# ", 60)
    assert f"{name}: Queued: ".encode() in waited, waited  # its reason while it waits
    assert lab.json("show", two)["state"] in ("Succeeded", "Running")
    os.write(fd, b"echo hi-$((1+2)); tty; exit 3\n")
    out = read_until(fd, None, 30)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3, waited + out
    assert b"hi-3\r\n/dev/pts/" in out
    assert f"{name}: Failed".encode() in out
    run = lab.json("show", name)
    assert (run["state"], run["exit_code"], run["restarts"]) == ("Failed", 3, 0)
    assert b"hi-3" in lab.astra("logs", name).stdout.encode()  # its log kept the terminal


def test_closing_the_terminal_cancels_a_waiting_interactive_run(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    for _ in range(2):
        submit(lab, users[BOB], ["sleep", "60"])
    name = f"it-{uuid.uuid4().hex[:6]}"
    pid, fd = astra_in_terminal(lab, "run", "-it", "--name", name, "--workspace", "ex",
                                 "--gpus", "1", "--", "sh")  # fmt: skip
    assert f"{name}: Queued".encode() in read_until(fd, f"{name}: Queued".encode(), 30)
    os.kill(pid, signal.SIGKILL)  # the terminal goes away, astra with it
    os.waitpid(pid, 0)
    os.close(fd)
    wait_for(lambda: lab.json("show", name)["state"] == "Cancelled", 30, "cancelled")


def test_only_an_interactive_run_has_a_terminal(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = submit(lab, users[BOB], ["sleep", "60"])
    pid, fd = astra_in_terminal(lab, "attach", name)
    os.kill(pid, signal.SIGINT)
    os.waitpid(pid, 0)
    os.close(fd)
    refused = astra(lab, "run", "-it", "--name", name, "--", "sh", user=users[BOB])
    assert refused.returncode == 1
    assert f"a run named {name} exists" in refused.stderr


def test_what_an_exec_starts_ends_with_it_even_in_a_session_of_its_own(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = submit(lab, users[BOB], ["sleep", "120"])
    marker = f"{uuid.uuid4().int % 10**6 + 3_000_000}"  # a sleep nobody else runs
    escape = f"setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo started"
    result = astra(lab, "exec", name, "--", "sh", "-c", escape, user=users[BOB])
    assert (result.returncode, result.stdout) == (0, "started\n"), result.stderr

    def running() -> list[str]:
        found = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
        return found.stdout.split()

    wait_for(lambda: not running(), 10, "what the exec left to be ended with it")
    assert lab.json("show", name)["state"] == "Running"  # the run itself goes on


def test_exec_commands_end_when_the_daemon_stops(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = submit(lab, users[BOB], ["sleep", "120"])
    marker = f"{uuid.uuid4().int % 10**6 + 4_000_000}"
    command = [sys.executable, "-m", "astraeus_tui.cli.main", "exec", name, "--",
               "sleep", marker]  # fmt: skip
    session = subprocess.Popen(command, env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def running() -> list[str]:
        found = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
        return found.stdout.split()

    wait_for(running, 20, "the exec's command")
    lab.stop()  # its workers go on (they are adopted after a restart); an exec does not
    wait_for(lambda: not running(), 20, "the exec's command ended with the daemon")
    session.wait(30)
