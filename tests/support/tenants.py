"""Two workspaces on one daemon, each with its own member, as real Unix users: vision
(``ALICE``, priority capped at 10) and nlp (``BOB``); ``CAROL`` is in the socket's group
and in no workspace. The tests about who may see and change what start from here.

``users`` is a module-scoped fixture: a test module imports it (``from
tests.support.tenants import users as users``) to make the users once for its tests.
``as_user`` makes a request in a forked child that has dropped to the user's uid, gid
and groups, so SO_PEERCRED reports that user to the daemon; ``cli_as`` runs ``astra``
there.

A module with users of its own (names no other module makes, so that modules run at the
same time never share a user) builds the same from its names: ``users_fixture`` for the
fixture, ``two_tenants`` for a workspace each, ``one_workspace`` for members who share one.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from astraeus_tui.cli.main import app
from astraeus_tui.client import ApiError, Client
from tests.support.users import fork_as, unix_users

GROUP, ALICE, BOB, CAROL = "astra-t", "astra-alice", "astra-bob", "astra-carol"


def users_fixture(group: str, *names: str, name: str = "users", **options: Any) -> Any:
    """A module-scoped fixture (``name``, ``users`` unless told) that makes the real Unix
    users ``names`` in the socket's group ``group`` once for a module's tests and yields
    them by name; ``options`` as ``unix_users`` takes them (a home, a group of their own,
    a shell). A module takes it as ``users = users_fixture(GROUP, ALICE, BOB)``."""

    @pytest.fixture(scope="module", name=name)
    def made() -> Iterator[dict[str, pwd.struct_passwd]]:
        if os.geteuid() != 0:
            pytest.skip("creating Unix users needs root")
        with unix_users(group, *names, **options) as entries:
            yield entries

    return made


users = users_fixture(GROUP, ALICE, BOB, CAROL)


def two_tenants(
    group: str, alice: str, bob: str, *, vision: str = "", nlp: str = "",
    names: tuple[str, str] = ("vision", "nlp"),
) -> str:  # fmt: skip
    """The config of two workspaces with a member each, the socket's group ``group``:
    vision with ``alice``, nlp with ``bob`` (``names``: the workspaces' names, if others);
    ``vision`` and ``nlp``: lines more for each (its priority cap, its quota)."""
    first, second = names
    return f"""
[api]
socket_group = "{group}"

[workspaces.{first}]
members = ["{alice}"]
{vision}
[workspaces.{second}]
members = ["{bob}"]
{nlp}"""


def one_workspace(group: str, workspace: str, *members: str) -> str:
    """The config of one workspace, ``workspace``, whose members are ``members``, the
    socket's group ``group``; a test adds its drives after it."""
    listed = json.dumps(list(members))
    return f'[api]\nsocket_group = "{group}"\n[workspaces.{workspace}]\nmembers = {listed}\n'


def as_user(entry: pwd.struct_passwd, socket: Path, call: Callable[[Client], Any]) -> Any:
    """Run ``call`` in a child that is really ``entry`` (uid, gid, groups)."""
    read, write = os.pipe()
    pid = fork_as(entry)
    if pid == 0:  # the child: the user, talks to the daemon and reports back
        os.close(read)
        try:
            result: Any = {"ok": call(Client(socket))}
        except ApiError as e:
            result = {"error": str(e)}
        except BaseException as e:
            result = {"error": f"{type(e).__name__}: {e}"}
        os.write(write, json.dumps(msgspec.to_builtins(result), default=str).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


def spec(name: str, workspace: str, priority: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "workspace": workspace},
        "spec": {
            "priority": priority,
            "task_template": {
                "image": "local", "command": "sleep", "args": ["120"],
                "requested_resources": {"gpu_requests": {"count": 1}},
            },
        },
    }  # fmt: skip


CONFIG = two_tenants(GROUP, ALICE, BOB, vision="max_priority = 10")


def cli_as(entry: pwd.struct_passwd, socket: Path, *args: str) -> tuple[int, str, str]:
    """`astra ARGS` run by ``entry`` (the CLI's own code, in a child that is the user):
    exit code, stdout, stderr."""

    def call(_: Client) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, list(args), env={"ASTRAEUS_SOCKET": str(socket)})
        return result.exit_code, result.stdout, result.stderr

    code, out, err = as_user(entry, socket, call)["ok"]
    return code, out, err
