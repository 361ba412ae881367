"""The telemetry history through a real daemon: ``?history=<duration>`` from the store,
one run's telemetry (``GET /v1/runs/{name}/telemetry``) for who may read its details,
``usage`` in ``astra show --json``, and the history kept across a restart."""

from __future__ import annotations

import http.client  # noqa: F401 (loaded before as_user's child drops root's rights)
import pwd
import sys
import time
from collections.abc import Callable

import msgspec

from astraeus_tui.cli.fast.show import show_lines
from astraeus_tui.client import Client
from tests.integration.telemetry_runs import ANON, WORK, spec
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

GROUP, ALICE, BOB = "astra-th", "astra-th-alice", "astra-th-bob"
CONFIG = two_tenants(GROUP, ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


def _sampled(client: Client, count: int) -> bool:
    runs = client.telemetry().runs
    return len(runs) == count and all(r.memory_bytes and r.memory_bytes > 32 << 20 for r in runs)


def test_history_and_a_runs_telemetry_follow_the_run_views_rules(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CONFIG, gpus=2, machine="telemetry_seconds = 0.3")
    alice, bob = users[ALICE], users[BOB]
    assert "ok" in as_user(
        alice, lab.socket, lambda c: c.submit(spec("th-alice", "vision", WORK))
    )  # works: busy GPU
    assert "ok" in as_user(bob, lab.socket, lambda c: c.submit(spec("th-bob", "nlp")))
    admin = Client(lab.socket)
    wait_for(lambda: _sampled(admin, 2), 30, "both runs measured")
    time.sleep(1.0)  # a few samples more

    # past the rings' hour: the store's history, the same names and anonymity
    seen = as_user(alice, lab.socket, lambda c: c.telemetry(history="2h"))["ok"]
    # (2 hours in at most 2000 points: 3.6-second means of the 0.3-second samples)
    assert len(seen["gpus"]) == 2 and all(g["history"] for g in seen["gpus"])
    by_workspace = {r["workspace"]: r for r in seen["runs"]}
    mine, other = by_workspace["vision"], by_workspace["nlp"]
    assert mine["name"] == "th-alice" and mine["history"]
    assert mine["history"][-1]["memory_bytes"] > 32 << 20
    assert (other["name"], other["uid"], other["visible"]) == (ANON, None, False)
    assert "th-bob" not in str(seen) and other["history"]  # the load, not whose it is
    times = [s["time"] for s in mine["history"]]
    assert times == sorted(times)

    # one run's telemetry: its owner's workspace reads it, another's is refused
    theirs = as_user(alice, lab.socket, lambda c: c.run_telemetry("th-alice"))["ok"]
    assert theirs["name"] == "th-alice" and theirs["workspace"] == "vision"
    assert len(theirs["history"]) >= 3 and theirs["usage"]["samples"] >= 3
    assert theirs["usage"]["peak"]["memory_bytes"] > 32 << 20
    refused = as_user(bob, lab.socket, lambda c: c.run_telemetry("th-alice"))
    assert "403" in refused["error"] and "th-alice" not in str(refused["error"]).split(":", 1)[0]
    missing = as_user(bob, lab.socket, lambda c: c.run_telemetry("no-such-run"))
    assert "404" in missing["error"]
    bad = lab.astra("ls")  # the daemon still answers after the refusals
    assert bad.returncode == 0
    wrong = as_user(alice, lab.socket, lambda c: c.telemetry(history="forever"))
    assert "422" in wrong["error"] and "history" in wrong["error"]

    # astra show --json: the run's use now, and its mean and peak
    usage = lab.json("show", "th-alice")["usage"]
    assert usage["now"]["memory_bytes"] > 32 << 20 and usage["now"]["gpu_util"] >= 80
    assert usage["samples"] >= 3 and usage["since"] <= usage["until"]
    assert usage["peak"]["memory_bytes"] >= usage["mean"]["memory_bytes"] > 32 << 20
    assert usage["peak"]["gpu_memory_bytes"] > 0
    theirs_shown = as_user(alice, lab.socket, lambda c: show_lines(c.show("th-alice")))["ok"]
    text = "\n".join(theirs_shown)
    assert "usage:" in text and "peak" in text and "GPU mem" in text, text
    assert (
        "usage"
        in as_user(alice, lab.socket, lambda c: msgspec.to_builtins(c.show("th-alice")))["ok"]
    )
    hidden = as_user(bob, lab.socket, lambda c: c.show("th-alice"))
    assert "403" in hidden["error"]  # its use is in its details: private as they are


def test_a_finished_runs_usage_and_the_history_outlive_a_restart(
    served: Callable[..., Served],
) -> None:
    lab = served(gpus=1, machine="telemetry_seconds = 0.2")
    code = "b = bytearray(40 << 20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(2)"
    started = lab.astra("run", "--name", "brief", "--gpus", "1", "--", sys.executable, "-c", code)
    assert started.returncode == 0, started.stderr
    assert lab.astra("wait", "brief").returncode == 0
    before = lab.json("show", "brief")["usage"]
    assert before["now"] is None and before["samples"] >= 3  # finished: no "now"
    assert before["peak"]["memory_bytes"] > 32 << 20
    gpu_before = Client(lab.socket).telemetry(history=True).gpus[0].history
    assert isinstance(gpu_before, list) and len(gpu_before) >= 5

    lab.stop()
    lab.restart()
    after = lab.json("show", "brief")["usage"]
    assert after == before
    gpu_after = Client(lab.socket).telemetry(history=True).gpus[0].history
    assert isinstance(gpu_after, list)
    kept = [s.time for s in gpu_after if s.time <= gpu_before[-1].time]
    assert kept[-len(gpu_before) :] == [s.time for s in gpu_before]  # the rings came back
    stored = Client(lab.socket).run_telemetry("brief")
    assert len(stored.history) == before["samples"]
