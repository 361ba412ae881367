"""Start forecasts learned from another namespace's runs never name those runs or say
how long they took.

Real Unix users against one daemon: bob (nlp) has a history of finished runs and one
running with no time limit; alice (vision) waits behind it. Her run's forecast is shaped
by bob's lengths, as a bound is shaped by his time limits; what she reads of the queue,
`why` and `show` names none of his runs, and his runs carry no forecast for her.
"""

from __future__ import annotations

import http.client  # noqa: F401 (the client's, loaded before a child drops to a user)
import json
import os
import pwd
from collections.abc import Callable
from typing import Any

import pytest

from runner.reasons import ANONYMOUS_RUN
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, cli_as, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
GROUP, ALICE, BOB = "astra-fp", "astra-fp-a", "astra-fp-b"
CONFIG = two_tenants(GROUP, ALICE, BOB)
FORECAST = ("likely_start", "likely_start_90", "learned_from")

users = users_fixture(GROUP, ALICE, BOB)


def run(name: str, workspace: str, seconds: int, gpus: int) -> dict[str, Any]:
    task = {"image": "local", "command": "sleep", "args": [str(seconds)],
            "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
    return {"metadata": {"name": name, "workspace": workspace}, "spec": {"task_template": task}}


def test_a_forecast_from_another_namespaces_runs_names_none_of_them(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    d = served(CONFIG, gpus=2)
    alice, bob = users[ALICE], users[BOB]
    for i in range(5):
        made = as_user(bob, d.socket, lambda c, i=i: c.submit(run(f"bob-secret-{i}", "nlp", 1, 1)))
        assert "ok" in made, made
    wait_for(lambda: all(d.json("show", f"bob-secret-{i}")["state"] == "Succeeded"
                         for i in range(5)), 30)  # fmt: skip
    as_user(bob, d.socket, lambda c: c.submit(run("bob-secret-9", "nlp", 60, 2)))
    wait_for(lambda: d.json("show", "bob-secret-9")["state"] == "Running")
    as_user(bob, d.socket, lambda c: c.submit(run("bob-next", "nlp", 1, 2)))
    as_user(alice, d.socket, lambda c: c.submit(run("alice-wait", "vision", 1, 2)))
    wait_for(lambda: "likely_start" in d.json("show", "alice-wait"), 20, "alice's forecast")

    listed = as_user(alice, d.socket, lambda c: c.runs())["ok"]
    mine = next(r for r in listed if r["name"] == "alice-wait")
    assert mine["learned_from"] == 5 and mine["likely_start"] and mine["likely_start_90"]
    others = [r for r in listed if r["workspace"] == "nlp"]
    assert others and all(r["name"] == ANONYMOUS_RUN for r in others)
    assert all(key not in r for r in others for key in FORECAST), others
    why = as_user(alice, d.socket, lambda c: c.why("alice-wait"))["ok"]
    assert why["estimate"]["learned_from"] == 5
    shown = as_user(alice, d.socket, lambda c: c.show("alice-wait"))["ok"]
    seen = json.dumps([listed, why, shown])
    for i in (*range(5), 9):
        assert f"bob-secret-{i}" not in seen
    assert "bob-next" not in seen
    for args in (("ls",), ("why", "alice-wait"), ("show", "alice-wait")):
        code, out, err = cli_as(alice, d.socket, *args)
        assert code == 0 and "bob-" not in out + err, (args, out, err)
    # bob's own run behind his runs has its forecast (his to see)
    own = as_user(bob, d.socket, lambda c: c.runs())["ok"]
    assert next(r for r in own if r["name"] == "bob-next")["learned_from"] == 5
    for name in ("bob-secret-9", "bob-next", "alice-wait"):
        d.astra("delete", name)
