"""Two workspaces on one daemon, each with its own member, as real Unix users: vision
(``ALICE``, priority capped at 10) and nlp (``BOB``); ``CAROL`` is in the socket's group
and in no workspace. The tests about who may see and change what start from here.

``users`` is a module-scoped fixture: a test module imports it (``from
tests.support.tenants import users as users``) to make the users once for its tests.
``as_user`` makes a request in a forked child that has dropped to the user's uid, gid
and groups, so SO_PEERCRED reports that user to the daemon.
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

from astraeus_tui.client import ApiError, Client
from tests.support.users import fork_as, unix_users

GROUP, ALICE, BOB, CAROL = "astra-t", "astra-alice", "astra-bob", "astra-carol"


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, pwd.struct_passwd]]:
    with unix_users(GROUP, ALICE, BOB, CAROL) as made:
        yield made


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


CONFIG = f"""
[api]
socket_group = "{GROUP}"

[workspaces.vision]
members = ["{ALICE}"]
max_priority = 10

[workspaces.nlp]
members = ["{BOB}"]
"""
