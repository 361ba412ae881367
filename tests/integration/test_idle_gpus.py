"""Idle GPUs through a real daemon on simulated GPUs: a run that holds a GPU and sleeps
is idle (its simulated GPU follows its CPU), one that works is not. With the policy
"warn" the idle run gets the event and the mark (`astra ls`, both faces, `--json`, `show`);
with "stop" it is stopped with the grace and fails with its stop reason."""

from __future__ import annotations

import json
import pwd
from collections.abc import Callable
from typing import Any

import msgspec

from astraeus_tui.client import Client
from runner.reasons import ANONYMOUS_RUN
from tests.support.harness import PY, sleeper, spec, spinner, wait_for
from tests.support.served import Served, indented
from tests.support.tenants import ALICE, BOB, CONFIG, as_user, users

__all__ = ["users"]  # the module fixture: real Unix users

# holds its GPU, does nothing, and ignores SIGTERM: only the grace's SIGKILL ends it
STUBBORN = [PY, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " time.sleep(600)"]  # fmt: skip
FAST = 'telemetry_seconds = 0.2\nidle_gpu_after = "2s"'


def submit(d: Served, name: str, argv: list[str]) -> None:
    out = d.astra("run", "--name", name, "--gpus", "1", "--", *argv)
    assert out.returncode == 0, out.stderr


def by_name(d: Served) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in d.json("ls")}


def events(d: Served, name: str) -> list[dict[str, Any]]:
    out = d.astra("events", name, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def _same_but_usage(one: str, other: str) -> bool:
    """The same bytes but for ``usage``, which the sampler moves on between two reads."""
    a, b = json.loads(one), json.loads(other)
    a.pop("usage", None), b.pop("usage", None)
    return json.dumps(a) == json.dumps(b)


def line_of(table: str, name: str) -> str:
    (line,) = [x for x in table.splitlines() if f"  {name}  " in f"  {x}  "]
    return line


def test_a_sleeping_run_is_marked_idle_and_a_working_one_is_not(
    served: Callable[..., Served],
) -> None:
    d = served(gpus=2, machine=FAST)
    submit(d, "napper", sleeper())
    submit(d, "worker", spinner())
    wait_for(lambda: "idle_since" in by_name(d).get("napper", {}), 30, "napper marked idle")
    runs = by_name(d)
    assert runs["napper"]["state"] == runs["worker"]["state"] == "Running"
    assert runs["napper"]["idle_since"].endswith("Z")
    assert "idle_since" not in runs["worker"]  # the key is there only while idle
    assert d.json("show", "napper")["idle_since"] == runs["napper"]["idle_since"]
    raw = Client(d.socket, timeout=30).answer("GET", "/v1/runs/napper")
    shown = d.astra("show", "napper", "--json").stdout
    assert shown == indented(raw) or _same_but_usage(shown, indented(raw))  # byte for byte
    since = f"{'idle_since:':<20}{runs['napper']['idle_since']}"
    assert since in d.astra("show", "napper").stdout.splitlines()
    assert "idle_since" not in d.astra("show", "worker").stdout

    (idle,) = [e for e in events(d, "napper") if e["code"] == "GPU_IDLE"]
    assert idle["kind"] == "GpuIdle"
    assert idle["message"].startswith("GPUs idle for ")
    assert idle["message"].endswith("s (under 5 % utilisation)")
    assert not [e for e in events(d, "worker") if e["code"] in ("GPU_IDLE", "GPU_BUSY")]

    fast = d.astra("ls")  # the fast path
    assert fast.returncode == 0, fast.stderr
    assert "Running (idle " in line_of(fast.stdout, "napper")
    assert "idle" not in line_of(fast.stdout, "worker")
    d.env["ASTRAEUS_CLI_FAST"] = "0"  # the typer face
    try:
        typed = d.astra("ls")
        typed_json = d.json("ls")
    finally:
        del d.env["ASTRAEUS_CLI_FAST"]
    assert typed.returncode == 0, typed.stderr
    assert "Running (idle " in line_of(typed.stdout, "napper")
    assert "idle" not in line_of(typed.stdout, "worker")
    assert {r["name"]: "idle_since" in r for r in typed_json} == {"napper": True, "worker": False}

    assert by_name(d)["napper"]["state"] == "Running"  # warn: it runs on
    assert d.astra("delete", "worker").returncode == 0


def test_with_the_stop_policy_an_idle_run_is_stopped_with_the_grace_and_fails(
    served: Callable[..., Served],
) -> None:
    d = served(gpus=2, grace=2, machine=FAST + '\nidle_gpu_policy = "stop"')
    submit(d, "stubborn", STUBBORN)
    submit(d, "worker", spinner())
    stopping = wait_for(
        lambda: (r := by_name(d)["stubborn"])["state"] == "Stopping" and r, 30, "stubborn stops"
    )
    assert stopping["reason_code"] == "IDLE_STOPPED"
    assert stopping["reason"].startswith("Stopping: its GPUs were idle for ")
    assert stopping["stop_deadline"] is not None  # the grace counts down
    done = wait_for(
        lambda: (r := d.json("show", "stubborn"))["state"] == "Failed" and r, 30, "it fails"
    )
    assert done["reason"] == "Stopped: its GPUs were idle for 2s (idle_gpu_policy)"
    assert done["reason_code"] == "IDLE_STOPPED" and done["restarts"] == 0
    assert "idle_since" not in done
    (attempt,) = done["workers_history"]
    assert attempt["stop_reason"] == "idle-gpus" and attempt["killed"]  # SIGTERM ignored
    codes = [e["code"] for e in events(d, "stubborn")]
    assert "GPU_IDLE" in codes and "KILLED" in codes and codes[-1] == "FAILED"
    assert d.json("show", "worker")["state"] == "Running"  # the busy one runs on
    history = d.json("history")["runs"]
    assert [(u["name"], u["outcome"]) for u in history] == [("stubborn", "Failed")]
    assert d.astra("delete", "worker").returncode == 0


def test_another_workspace_sees_the_mark_but_neither_the_run_nor_its_events(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CONFIG, gpus=2, machine=FAST)
    alice, bob = users[ALICE], users[BOB]
    document = spec("secret-napper", ["sleep", "600"], gpus=1, workspace="vision")
    assert "ok" in as_user(alice, lab.socket, lambda c: c.submit(document))
    wait_for(lambda: "idle_since" in by_name(lab).get("secret-napper", {}), 30, "marked idle")

    theirs = as_user(bob, lab.socket, lambda c: [msgspec.to_builtins(r) for r in c.runs()])
    (seen,) = theirs["ok"]
    assert (seen["name"], seen["uid"], seen["visible"]) == (ANONYMOUS_RUN, None, False)
    assert "idle_since" in seen  # how the machine is used is no secret; whose run it is, is
    bobs = as_user(bob, lab.socket, lambda c: [e.code for e in c.events(None)])["ok"]
    assert "GPU_IDLE" not in bobs
    alices = as_user(alice, lab.socket, lambda c: [msgspec.to_builtins(e) for e in c.events(None)])
    (idle,) = [e for e in alices["ok"] if e["code"] == "GPU_IDLE"]
    assert idle["run"] == "secret-napper" and "secret" not in idle["message"]
