"""A member against ``astra exec``: a command that closes its output must neither outlive
its run nor hold the daemon's shared threads. A real daemon, real Unix users."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp  # noqa: F401  (imported here: a child that became a user cannot read it)
import pytest

from astraeus_tui.cli.main import app
from astraeus_tui.client import AsyncClient
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace, users_fixture
from tests.support.users import fork_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-rx-g", "astra-rx-a", "astra-rx-b"
# the command closes its output and goes on: the daemon sees its output end, not its exit
QUIET = "exec >/dev/null 2>&1 </dev/null; exec sleep {}"


users = users_fixture(GROUP, ALICE, BOB, home=True, own_group=True, shell="/bin/sh", fresh=True)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(one_workspace(GROUP, "rx", ALICE, BOB), gpus=2)


@pytest.fixture
def forked() -> Iterator[list[int]]:
    """The pids of the ``astra exec`` children a test started, ended after it."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def submit(lab: Served, who: pwd.struct_passwd, env: dict[str, str] | None = None) -> str:
    name = f"rx-{uuid.uuid4().hex[:6]}"
    task: dict[str, Any] = {"image": "local", "command": "sleep", "args": ["120"],
                            "requested_resources": {"gpu_requests": {"count": 1}},
                            "env": env or {}}  # fmt: skip
    document = {"metadata": {"name": name, "workspace": "rx"},
                "spec": {"restart_limit": 0, "task_template": task}}  # fmt: skip
    answer = as_user(who, lab.socket, lambda c: c.submit(document))
    assert "ok" in answer, answer
    wait_for(lambda: lab.json("show", name)["state"] == "Running", 30, f"{name} to run")
    return name


def exec_as(lab: Served, who: pwd.struct_passwd, *args: str) -> int:
    """``astra exec ARGS`` in a child that is really ``who``, left running; its pid."""
    pid = fork_as(who, [grp.getgrnam(GROUP).gr_gid])
    if pid == 0:  # the child never returns into the test
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            os.environ.update(lab.env)
            app(["exec", *args], prog_name="astra")
        finally:
            os._exit(0)
    return pid


def sleeping(who: pwd.struct_passwd, seconds: str) -> list[int]:
    """The pids of ``who``'s ``sleep SECONDS`` processes."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if not entry.isdigit() or os.stat(f"/proc/{entry}").st_uid != who.pw_uid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                    found.append(int(entry))
        except OSError:
            continue
    return found


def end(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_an_exec_that_closed_its_output_ends_with_its_run(
    lab: Served, users: dict[str, pwd.struct_passwd], forked: list[int]
) -> None:
    bob, seconds = users[BOB], "3011"
    name = submit(lab, bob)
    forked.append(exec_as(lab, bob, name, "--", "sh", "-c", QUIET.format(seconds)))
    try:
        wait_for(lambda: len(sleeping(bob, seconds)) == 1, 20, "the exec's command")
        assert lab.astra("delete", name).returncode == 0
        wait_for(lambda: lab.json("show", name)["state"] == "Cancelled", 30, "cancelled")
        wait_for(lambda: not sleeping(bob, seconds), 20, "the exec to end with its run")
    finally:
        end(sleeping(bob, seconds))


def test_quiet_execs_do_not_hold_the_daemon_from_other_members(
    lab: Served, users: dict[str, pwd.struct_passwd], forked: list[int]
) -> None:
    """Each member holds the most exec sessions allowed, every command silent and alive:
    the daemon still answers everyone at once."""
    seconds = "3012"
    runs = {who: submit(lab, users[who]) for who in (ALICE, BOB)}
    for who, name in runs.items():
        for _ in range(8):
            forked.append(exec_as(lab, users[who], name, "--", "sh", "-c", QUIET.format(seconds)))
    everyone = lambda: [p for who in runs for p in sleeping(users[who], seconds)]  # noqa: E731
    try:
        wait_for(lambda: len(everyone()) == 16, 60, "16 exec commands, every member's answered")
        start = time.monotonic()
        cancel = subprocess.run(
            [sys.executable, "-m", "astraeus_tui.cli.main", "delete", runs[ALICE]],
            env=lab.env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert cancel.returncode == 0, cancel.stderr
        assert time.monotonic() - start < 30
    finally:
        end(everyone())


def resize_then_leave(socket: Path, name: str, size: object, seconds: str) -> str:
    """Open an exec of a silent ``sleep SECONDS``, send the resize ``size``, go away."""

    async def run() -> str:
        client = AsyncClient(socket)
        try:
            async with client.exec(name, ["sleep", seconds]) as channel:
                await asyncio.sleep(1.0)  # the command has started
                await channel._ws.send_str(json.dumps({"resize": size}))
                await channel._ws.send_str(json.dumps(["not", "an", "object"]))
                await asyncio.sleep(0.5)
        finally:
            await client.close()
        return "left"

    return asyncio.run(run())


@pytest.mark.parametrize("size", [[70000, 80], [24, -1], ["x", 80]])
def test_an_odd_resize_does_not_keep_the_command_past_its_client(
    lab: Served, users: dict[str, pwd.struct_passwd], size: object
) -> None:
    bob, seconds = users[BOB], "3013"
    name = submit(lab, bob)
    try:
        left = as_user(
            bob, lab.socket, lambda c: resize_then_leave(lab.socket, name, size, seconds)
        )
        assert left == {"ok": "left"}
        wait_for(lambda: not sleeping(bob, seconds), 15, "the command to end with its client")
    finally:
        end(sleeping(bob, seconds))


def _command_lines_hold(who: pwd.struct_passwd, secret: str) -> bool:
    """Whether ``who``, reading every process's command line, finds ``secret``."""
    read, write = os.pipe()
    pid = fork_as(who)
    if pid == 0:
        found = b"0"
        with contextlib.suppress(BaseException):
            for entry in os.listdir("/proc"):
                with contextlib.suppress(OSError):
                    if entry.isdigit():
                        with open(f"/proc/{entry}/cmdline", "rb") as f:
                            if secret.encode() in f.read():
                                found = b"1"
        os.write(write, found)
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    return answer == b"1"


def test_an_exec_shows_its_run_s_environment_to_no_other_user(
    lab: Served, users: dict[str, pwd.struct_passwd], forked: list[int]
) -> None:
    """Bob's run holds a token in its environment; while his exec runs, Alice reads
    every process's command line and finds it nowhere."""
    secret = f"tok-{uuid.uuid4().hex}"
    name = submit(lab, users[BOB], env={"API_TOKEN": secret})
    forked.append(exec_as(lab, users[BOB], name, "--", "sleep", "77"))
    wait_for(lambda: sleeping(users[BOB], "77"), 30, "the exec's command")
    assert not _command_lines_hold(users[ALICE], secret)
