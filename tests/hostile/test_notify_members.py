"""Notifications as members set them: two real Unix users against one daemon.

Alice (vision) asks for a notification with a secret in its URL; bob (nlp) learns
nothing of it, neither the URL nor that it was sent. A member's refused URL is refused
in one line. The preemption of a member's run by another workspace's never names it.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from tests.support.harness import wait_for
from tests.support.notify import Receiver
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-nt", "astra-nt-a", "astra-nt-b"
CONFIG = two_tenants(GROUP, ALICE, BOB, nlp="max_priority = 10")


users = users_fixture(GROUP, ALICE, BOB)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


def run(name: str, argv: list[str], notify: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    task = {"image": "local", "command": argv[0], "args": argv[1:],
            "requested_resources": {"gpu_requests": {"count": spec.pop("gpus", 0)}}}  # fmt: skip
    return {"metadata": {"name": name}, "spec": {"task_template": task, "notify": notify, **spec}}


def test_a_members_url_stays_theirs(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd], receiver: Receiver
) -> None:
    lab = served(CONFIG, gpus=1)
    alice, bob = users[ALICE], users[BOB]
    url = f"{receiver.url}/SECRET-TOKEN"
    doc = run("alice-job", ["true"], [{"url": url, "events": ["started", "succeeded"]}])
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(doc))
    wait_for(lambda: receiver.events_of("alice-job") == ["started", "succeeded"])
    assert {n["workspace"] for n in receiver.notices()} == {"vision"}
    wait_for(lambda: "NOTIFIED" in json.dumps(lab.json("show", "alice-job")["events"]))
    mine = as_user(alice, lab.socket, lambda c: list(c.events(run="alice-job")))["ok"]
    delivered = [e["message"] for e in mine if e["code"] == "NOTIFIED"]
    assert delivered == [
        f"Notification (started) delivered to json://127.0.0.1:{receiver.port}",
        f"Notification (succeeded) delivered to json://127.0.0.1:{receiver.port}",
    ]
    assert "SECRET-TOKEN" not in json.dumps(mine)  # events show the scheme and host only
    seen = [
        as_user(bob, lab.socket, lambda c: msgspec.to_builtins(c.runs(all=1))),
        as_user(bob, lab.socket, lambda c: list(c.events())),
        as_user(bob, lab.socket, lambda c: c.show("alice-job")),
    ]
    assert "SECRET-TOKEN" not in json.dumps(seen) and "alice-job" not in json.dumps(seen)
    assert seen[2]["error"].startswith("403 FORBIDDEN")


def test_a_members_refused_url_in_one_line(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CONFIG, gpus=1)
    for url, why in (
        ("file:///etc/shadow", "scheme file:// is not allowed"),
        ("windows://", "scheme windows:// is not allowed"),
        ("json://h/" + "x" * 2000, "must be at most 1024 characters, got 2009"),
        # parameters that make the root daemon open a file or fetch a URL the member chose
        (
            "discord://1/t?template=/etc/shadow",
            "parameter 'template' is not allowed for discord://",
        ),
        ("slack://a/b/c?template=/root/x.json", "parameter 'template' is not allowed for slack://"),
        ("tgram://123:abc/456?template=/etc/x", "parameter 'template' is not allowed for tgram://"),
        (
            "ntfy://h/topic?attach=file:///etc/shadow",
            "parameter 'attach' is not allowed for ntfy://",
        ),
        ("ntfys://h/topic?click=http://x", "parameter 'click' is not allowed for ntfys://"),
        ("mailtos://u:p@h?pgpkey=/root/k.asc", "parameter 'pgpkey' is not allowed for mailtos://"),
        ("json://h/x?:message=/etc/shadow", "parameter ':message' must not name a path or a URL"),
        ("json://h/x?+X-Url=http://internal/", "parameter '+X-Url' must not name a path or a URL"),
    ):
        doc = run("bob-job", ["true"], [{"url": url}])
        answer = as_user(users[BOB], lab.socket, lambda c, d=doc: c.submit(d))
        assert answer["error"].startswith(f"422 INVALID_SPEC: spec.notify[0].url: {why}")
        assert "\n" not in answer["error"]
    assert lab.json("ls", "--all") == []
    fine = "json://127.0.0.1:9/hook?method=PUT&+X-Team=vision&-source=astra&:message=text"
    doc = run("bob-fine", ["true"], [{"url": fine}])
    assert "ok" in as_user(users[BOB], lab.socket, lambda c: c.submit(doc))


def test_a_preempted_members_notification_never_names_the_other_workspace(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd], receiver: Receiver
) -> None:
    lab = served(CONFIG, gpus=1)
    alice, bob = users[ALICE], users[BOB]
    doc = run("alice-long", ["sleep", "600"], [{"url": receiver.url, "events": ["preempted"]}],
              gpus=1)  # fmt: skip
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(doc))
    wait_for(lambda: lab.json("show", "alice-long")["state"] == "Running")
    urgent = run("bob-urgent", ["sleep", "600"], [], gpus=1, priority=10)
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(urgent))
    wait_for(lambda: receiver.events_of("alice-long") == ["preempted"], message="preempted")
    [notice] = receiver.notices()
    assert "bob-urgent" not in json.dumps(receiver.posts)
    assert "a job in another namespace" in notice["reason"]
