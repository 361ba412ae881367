"""The change stream names no run of another workspace, and its ids stay one run's.

Real Unix users against one daemon: alice in vision follows ``GET /v1/stream`` as the
dashboard does (``AsyncClient.changes``) while bob's run in nlp is deleted. She sees
his run under an opaque id, never its name or owner, and its removal carries that
same id, so her dashboard drops the row it showed.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp  # noqa: F401 (loaded here: the user cannot read this checkout's files)
import msgspec
import pytest

from astraeus_tui.client import AsyncClient
from runner.schema import Change, Snapshot
from tests.support.harness import spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture
from tests.support.users import fork_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-h9", "astra-h9-a", "astra-h9-b"
SLEEP = ["sleep", "600"]  # the users cannot run this checkout's interpreter
ANONYMOUS = "a job in another namespace"
CONFIG = two_tenants(GROUP, ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(CONFIG, gpus=2)


def stream_as(entry: pwd.struct_passwd, socket: Path) -> Iterator[dict[str, Any]]:
    """The stream's messages as ``entry`` reads them, one at a time, until one removes a
    run (each as ``{"event", "data", "raw"}``, ``raw`` its encoded JSON)."""
    read, write = os.pipe()
    pid = fork_as(entry)
    if pid == 0:
        os.close(read)
        try:
            asyncio.run(_follow(socket, write))
        except BaseException as e:
            os.write(write, (json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n").encode())
        finally:
            os._exit(0)
    os.close(write)
    lines = os.fdopen(read)
    try:
        for line in lines:
            yield json.loads(line)
    finally:
        lines.close()
        os.waitpid(pid, 0)


async def _follow(socket: Path, out: int) -> None:
    client = AsyncClient(socket)
    try:
        async with asyncio.timeout(60):
            async for event, data in client.changes():
                raw = msgspec.json.encode(data).decode()
                message = {"event": event, "data": msgspec.to_builtins(data), "raw": raw}
                os.write(out, (json.dumps(message) + "\n").encode())
                if isinstance(data, Change) and data.remove:
                    return
                assert isinstance(data, Snapshot | Change)
    finally:
        await client.close()


def test_a_member_s_stream_hides_another_workspace_s_run_and_removes_it_by_its_id(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    mine = spec("alice-own", SLEEP, gpus=1, workspace="vision")
    secret = spec("bob-secret", SLEEP, gpus=1, workspace="nlp")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(mine))
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(secret))
    wait_for(lambda: lab.json("show", "bob-secret")["state"] == "Running")

    messages = stream_as(alice, lab.socket)
    first = next(messages)
    assert first.get("event") == "snapshot", first
    runs = {r["workspace"]: r for r in first["data"]["runs"]}
    assert runs["vision"]["name"] == "alice-own" and runs["vision"]["id"] == "alice-own"
    hidden = runs["nlp"]
    assert hidden["id"].startswith("hidden-")
    assert (hidden["name"], hidden["visible"], hidden["owner"]) == (ANONYMOUS, False, None)

    assert lab.astra("delete", "bob-secret").returncode == 0
    later = list(messages)
    assert later and all(m["event"] == "change" for m in later)
    assert later[-1]["data"]["remove"] == [hidden["id"]]  # the id the snapshot gave it
    for m in later:
        for run in m["data"]["upsert"]:
            assert run["id"] in (hidden["id"], "alice-own")
    assert not [m for m in [first, *later] if "bob-secret" in m["raw"] or BOB in m["raw"]]
