"""The event log tells a member nothing of another workspace's runs.

An event says who submitted a run, who changed its priority, its GPUs and its exit
code. Real Unix users against one daemon: bob's runs in nlp, alice in vision. Alice's
event log, listed, followed or through `astra events`, holds her own runs' events
only; asking for the events of bob's run answers as its details do. Admins see all.
"""

from __future__ import annotations

import json
import os
import pwd
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from astraeus_tui.client import Client
from tests.support.harness import spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, cli_as, two_tenants, users_fixture
from tests.support.users import fork_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-h6", "astra-h6-a", "astra-h6-b"
SLEEP = ["sleep", "600"]  # the users cannot run this checkout's interpreter
PRIVATE = "403 FORBIDDEN: a job in another namespace: details are private"
CONFIG = two_tenants(GROUP, ALICE, BOB, vision="max_priority = 10", nlp="quota = { workers = 1 }")


users = users_fixture(GROUP, ALICE, BOB)


@pytest.fixture
def lab(served: Callable[..., Served], users: dict[str, pwd.struct_passwd]) -> Served:
    return served(CONFIG, gpus=2)


@pytest.fixture
def flag() -> Iterator[Path]:
    """A file whose appearance ends bob's run (in a folder bob can read)."""
    folder = Path(tempfile.mkdtemp(prefix="astra-h6-"))
    folder.chmod(0o755)
    yield folder / "go"
    (folder / "go").unlink(missing_ok=True)
    folder.rmdir()


def follower(entry: pwd.struct_passwd, socket: Path, until: str) -> Callable[[], list[Any]]:
    """``GET /v1/events?follow=1`` as ``entry``, from now until an event of run ``until``
    arrives; call the result to collect the events read."""
    read, write = os.pipe()
    pid = fork_as(entry)
    if pid == 0:
        os.close(read)
        try:
            seen: list[Any] = []
            for e in Client(socket, timeout=120).events(follow=True):
                seen.append(e)
                if e.run == until:
                    break
            os.write(write, json.dumps(msgspec.to_builtins(seen)).encode())
        finally:
            os._exit(0)
    os.close(write)

    def collect() -> list[Any]:
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        os.close(read)
        os.waitpid(pid, 0)
        return json.loads(b"".join(chunks) or b"null")

    return collect


def cli_events(lab: Served, *args: str, user: pwd.struct_passwd | None = None) -> list[Any]:
    """`astra events ARGS --json` (as ``user``, else root): its JSON objects in turn."""
    if user is None:
        result = lab.astra("events", *args, "--json")
        code, text, err = result.returncode, result.stdout, result.stderr
    else:
        code, text, err = cli_as(user, lab.socket, "events", *args, "--json")
    assert code == 0, err
    decoder, found, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        value, pos = decoder.raw_decode(text, pos)
        found.append(value)
    return found


def test_a_member_reads_no_event_of_another_workspace_s_run(
    lab: Served, users: dict[str, pwd.struct_passwd], flag: Path
) -> None:
    alice, bob = users[ALICE], users[BOB]
    collect = follower(alice, lab.socket, until="alice-mark")
    wait_until_flag = f"while [ ! -e {flag} ]; do sleep 0.05; done; exit 7"
    bobs = spec("bob-secret", ["sh", "-c", wait_until_flag], gpus=1, workspace="nlp",
                restart_limit=0)  # fmt: skip
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(bobs))
    wait_for(lambda: lab.json("show", "bob-secret")["state"] == "Running")
    assert "ok" in as_user(bob, lab.socket, lambda c: c.set_priority("bob-secret", -3))
    flag.touch()
    wait_for(lambda: lab.json("show", "bob-secret")["state"] == "Failed")
    told = " ".join(e["message"] for e in cli_events(lab, "bob-secret"))  # the admin's
    for secret in (f"by {BOB}", "GPUs 0", "exited with code 7"):
        assert secret in told  # the control: these are what must not reach alice
    mark = spec("alice-mark", ["true"], workspace="vision")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(mark))
    followed = collect()
    listed = as_user(alice, lab.socket, lambda c: list(c.events()))["ok"]
    printed = cli_events(lab, user=alice)
    for events in (followed, listed, printed):
        assert events and {e["run"] for e in events} == {"alice-mark"}
        assert {e["workspace"] for e in events} == {"vision"}
        text = json.dumps(events)
        assert "Priority" not in {e["kind"] for e in events}
        for secret in (BOB, "bob-secret", "code 7", "GPUs 0", "nlp"):
            assert secret not in text
    assert {e["run"] for e in cli_events(lab)} == {"bob-secret", "alice-mark"}  # admin: all


def test_the_events_of_another_workspace_s_run_answer_as_its_details(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    bobs = spec("bob-secret", SLEEP, workspace="nlp")
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(bobs))
    details = as_user(alice, lab.socket, lambda c: c.show("bob-secret"))["error"]
    events = as_user(alice, lab.socket, lambda c: list(c.events("bob-secret")))["error"]
    followed = as_user(alice, lab.socket, lambda c: list(c.events("bob-secret", follow=True)))
    followed = followed["error"]
    assert details == events == followed == PRIVATE
    code, out, err = cli_as(alice, lab.socket, "events", "bob-secret")
    assert (code, out, err) == (1, "", PRIVATE + "\n")
    missing = as_user(alice, lab.socket, lambda c: list(c.events("no-such-run")))
    assert missing["error"] == "404 NOT_FOUND: no run no-such-run"
    own = as_user(bob, lab.socket, lambda c: list(c.events("bob-secret")))["ok"]
    assert [e["kind"] for e in own][:1] == ["Submitted"]  # its own workspace reads them
    assert cli_events(lab, "bob-secret")[0]["message"] == f"Submitted by {BOB}"


def test_the_quota_event_of_a_preempted_run_names_no_preemptor(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, bob = users[ALICE], users[BOB]
    first = spec("bob-first", SLEEP, gpus=1, workspace="nlp", priority=-1)
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(first))
    wait_for(lambda: lab.json("show", "bob-first")["state"] == "Running")
    urgent = spec("alice-urgent", SLEEP, gpus=2, priority=5, workspace="vision")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(urgent))
    wait_for(lambda: lab.json("show", "alice-urgent")["state"] == "Running")
    wait_for(lambda: lab.json("show", "bob-first")["preemptions"] == 1)
    # ahead of bob-first in the order, it takes nlp's one worker (behind bob-first as the
    # head it would not: the head's quota is kept for it)
    second = spec("bob-second", SLEEP, workspace="nlp")
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(second))

    def quota_events() -> list[str]:
        return [e["message"] for e in cli_events(lab, "bob-first") if e["kind"] == "QuotaReached"]

    expected = ["Quota reached: workers 1 in use + 1 asked > 1"]
    assert wait_for(quota_events) == expected  # the admin's
    bobs = as_user(bob, lab.socket, lambda c: list(c.events("bob-first")))["ok"]
    assert [e["message"] for e in bobs if e["kind"] == "QuotaReached"] == expected
    assert "alice-urgent" not in json.dumps(bobs)
    reason = as_user(bob, lab.socket, lambda c: c.show("bob-first"))["ok"]["reason"]
    assert reason == (
        "Preempted by higher-priority work (a job in another namespace); waiting to run"
        " again. Waits for namespace quota: workers 1 in use + 1 asked > 1"
    )
    alices = as_user(alice, lab.socket, lambda c: list(c.events()))["ok"]
    assert {e["run"] for e in alices} == {"alice-urgent"}


def test_an_error_of_another_workspace_s_run_is_not_shown_in_its_reason(
    lab: Served, users: dict[str, pwd.struct_passwd]
) -> None:
    """A run's failure names its program and exit; a start failure, paths. The queue shows
    another workspace's run, but its error's details stay in its workspace."""
    doc = spec("bob-fails", ["sh", "-c", "exit 3"], workspace="nlp", restart_limit=0)
    assert "ok" in as_user(users[BOB], lab.socket, lambda c: c.submit(doc))
    own = wait_for(
        lambda: (
            (r := as_user(users[BOB], lab.socket, lambda c: c.show("bob-fails"))["ok"])
            and r["state"] == "Failed"
            and r
        ),
        30,
        "bob's run to fail",
    )
    assert "exited with code 3" in own["reason"]
    listed = as_user(users[ALICE], lab.socket, lambda c: c.runs(all=1))["ok"]
    (theirs,) = [r for r in listed if r["workspace"] == "nlp"]
    assert (theirs["name"], theirs["reason"]) == (
        "a job in another namespace",
        "details are private",
    )
