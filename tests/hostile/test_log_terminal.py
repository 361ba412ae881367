"""A run's output never acts on its reader's terminal: ``astra logs`` and ``astra attach``
on a terminal show a title change, a screen clear and a clipboard write escaped, colour
kept; piped or ``--raw``, the bytes are exact. A real daemon; the run is one member's,
the reader another member of its workspace, each a real Unix user."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable

import pytest

from tests.hostile.helpers import astra_as
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, one_workspace, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, WRITER, READER = "astra-lt-g", "astra-lt-w", "astra-lt-r"
# printf makes the bytes: a spec's args may not hold control characters themselves
PRINTF = r"\033]0;pwned\007\033[2J\033]52;c;aGk=\007\033[31mred\033[0m\r50%%\tok\n"
RAW = b"\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\r50%\tok\n"
ESCAPED = b"\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;aGk=\\x07\x1b[31mred\x1b[0m\r50%\tok\n"


users = users_fixture(GROUP, WRITER, READER, home=True, own_group=True, shell="/bin/sh", fresh=True)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(one_workspace(GROUP, "lt", WRITER, READER), gpus=1)


def finished_run(lab: Served, writer: pwd.struct_passwd) -> str:
    task = {"image": "local", "command": "printf", "args": [PRINTF]}
    document = {"metadata": {"name": "loud", "workspace": "lt"},
                "spec": {"restart_limit": 0, "task_template": task}}  # fmt: skip
    assert "ok" in as_user(writer, lab.socket, lambda c: c.submit(document))
    wait_for(lambda: lab.json("show", "loud")["state"] == "Succeeded", 30, "loud to finish")
    return "loud"


def test_logs_on_a_terminal_escape_all_but_colour(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    name = finished_run(lab, users[WRITER])
    reader = users[READER]
    assert astra_as(lab, reader, ["logs", name], terminal=True) == ESCAPED
    assert astra_as(lab, reader, ["attach", name], terminal=True).startswith(ESCAPED)
    assert astra_as(lab, reader, ["logs", "--raw", name], terminal=True) == RAW
    assert astra_as(lab, reader, ["logs", name], terminal=False) == RAW  # piped: exact
    assert astra_as(lab, reader, ["attach", name], terminal=False).startswith(RAW)
