"""A shared GPU's shares name another namespace's run to nobody but admins.

Real Unix users against one daemon: alice in vision and bob in nlp share GPU 0 by
memory. `GET /v1/gpus` (and `astra gpus`) tells alice her own run's share by name and
bob's as `a job in another namespace`, with its memory: what is free on the GPU is
hers to know, whose it is not.
"""

from __future__ import annotations

import http.client  # noqa: F401 (the client's, loaded before a child drops to a user)
import os
import pwd
from collections.abc import Callable
from typing import Any

import pytest

from runner.reasons import ANONYMOUS_RUN
from tests.support.harness import spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, cli_as, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-hs", "astra-hs-a", "astra-hs-b"
CONFIG = two_tenants(GROUP, ALICE, BOB)


def shared(name: str, gib: int, workspace: str) -> dict[str, Any]:
    doc = spec(name, ["sleep", "600"], workspace=workspace)
    doc["spec"]["task_template"]["requested_resources"]["gpu_requests"] = {
        "count": 1, "memory_bytes": gib * 1024**3}  # fmt: skip
    return doc


users = users_fixture(GROUP, ALICE, BOB)


def test_another_namespaces_share_is_anonymous(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    d = served(CONFIG, gpus=1)
    alice, bob = users[ALICE], users[BOB]
    made = as_user(bob, d.socket, lambda c: c.submit(shared("bob-secret", 30, "nlp")))
    assert "ok" in made, made
    made = as_user(alice, d.socket, lambda c: c.submit(shared("alice-eval", 20, "vision")))
    assert "ok" in made, made
    for name in ("bob-secret", "alice-eval"):
        wait_for(lambda name=name: d.json("show", name)["state"] == "Running")  # type: ignore[misc]
    seen = as_user(alice, d.socket, lambda c: c.gpus())["ok"]
    shares = sorted((s["run"], s["bytes"]) for s in seen["gpus"][0]["shares"])
    assert shares == sorted([("alice-eval", 20 * 1024**3), (ANONYMOUS_RUN, 30 * 1024**3)])
    code, out, _ = cli_as(alice, d.socket, "gpus")
    assert code == 0 and "bob-secret" not in out and "30GiB free" in out
    admin = d.json("gpus")["gpus"][0]["shares"]
    assert {s["run"] for s in admin} == {"alice-eval", "bob-secret"}
    for name in ("bob-secret", "alice-eval"):
        d.astra("delete", name)


def test_shared_runs_cannot_pass_a_gpus_quota(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    """vision's ``quota gpus = 2``: four 50 GiB runs on four GPUs, each alone on its GPU,
    start two; the others wait for the quota, and the workspace shows 2 GPUs used."""
    capped = two_tenants(GROUP, ALICE, BOB, vision="quota = { gpus = 2 }")
    d = served(capped, gpus=4)
    alice = users[ALICE]
    for i in range(4):
        made = as_user(alice, d.socket, lambda c, i=i: c.submit(shared(f"big-{i}", 50, "vision")))
        assert "ok" in made, made
    wait_for(lambda: sum(d.json("show", f"big-{i}")["state"] == "Running" for i in range(4)) == 2)
    waiting = [d.json("show", f"big-{i}") for i in range(4)]
    waiting = [r for r in waiting if r["state"] == "Queued"]
    assert len(waiting) == 2
    assert all("Waits for namespace quota: gpus 2 in use + 1 asked > 2" in r["reason"]
               for r in waiting), [r["reason"] for r in waiting]  # fmt: skip
    [vision] = [w for w in as_user(alice, d.socket, lambda c: c.workspaces())["ok"]
                if w["name"] == "vision"]  # fmt: skip
    assert vision["usage"]["gpus"] == 2 and vision["dominant_share"] == 1.0
