"""Schedules, replica groups, sweeps and dependencies on a real daemon (process executor)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from runner.config.load import load_config
from runner.service.runs import ServiceError
from tests.integration.group_docs import WORKSPACE, group_doc
from tests.support.harness import PY, Harness, sleeper, spec, wait_for

EVERY_2S = "* * * * * */2"  # croniter: a sixth field is seconds


def quick(code: int = 0, seconds: float = 0.2) -> list[str]:
    return [PY, "-c", f"import time, sys; time.sleep({seconds}); sys.exit({code})"]


def group_events(h: Harness, name: str) -> list[tuple[str, str]]:
    return [(e.kind, e.message.render()) for e in h.daemon.store.events.all(grp=name)]


def runs_of(h: Harness, name: str) -> list[str]:
    return [r.name for r in h.daemon.store.runs.of_group(name)]


@pytest.fixture
def h(make_daemon: Callable[..., Harness]) -> Harness:
    return make_daemon(WORKSPACE, gpus=2)


# ------------------------------------------------------------------ schedules


def test_a_schedule_fires_on_its_cron_again_and_again(h: Harness) -> None:
    template = spec("nightly", quick(), workspace="vision")
    h.daemon.groups.create(group_doc("schedule", "nightly", template, cron=EVERY_2S), h.root)
    runs = wait_for(lambda: len(runs_of(h, "nightly")) >= 2 and runs_of(h, "nightly"), 20)
    assert all(n.startswith("nightly-") and len(n) == len("nightly-20261129-123456") for n in runs)
    for name in runs[:2]:
        assert h.wait_state(name, "Succeeded").grp == "nightly"
    fired = [m for k, m in group_events(h, "nightly") if k == "Fired"]
    assert fired[:2] == [f"Submitted {runs[0]}", f"Submitted {runs[1]}"]


def test_skip_policy_leaves_a_running_run_alone(h: Harness) -> None:
    template = spec("sk", sleeper(), workspace="vision")
    h.daemon.groups.create(group_doc("schedule", "sk", template, cron=EVERY_2S), h.root)
    first = wait_for(lambda: runs_of(h, "sk"), 10)[0]
    h.wait_state(first, "Running")
    wait_for(lambda: any(k == "Skipped" for k, _ in group_events(h, "sk")), 10)
    skipped = next(m for k, m in group_events(h, "sk") if k == "Skipped")
    assert skipped.endswith(f": {first} is still Running")
    assert runs_of(h, "sk") == [first]


def test_replace_policy_stops_the_previous_run(h: Harness) -> None:
    template = spec("rp", sleeper(), workspace="vision")
    doc = group_doc("schedule", "rp", template, cron=EVERY_2S, policy="replace")
    h.daemon.groups.create(doc, h.root)
    first = wait_for(lambda: runs_of(h, "rp"), 10)[0]
    h.wait_state(first, "Running")
    second = wait_for(lambda: runs_of(h, "rp")[1:], 10)[0]
    assert h.wait_state(first, "Cancelled").reason is not None
    assert any(f"Replaced by {second} (schedule rp)" in m for m in h.events(first))
    h.wait_state(second, "Running", "Cancelled")


def test_queue_policy_queues_another_behind_the_running_one(h: Harness) -> None:
    template = spec("qu", sleeper(), gpus=2, workspace="vision")
    doc = group_doc("schedule", "qu", template, cron=EVERY_2S, policy="queue")
    h.daemon.groups.create(doc, h.root)
    first = wait_for(lambda: runs_of(h, "qu"), 10)[0]
    h.wait_state(first, "Running")
    second = wait_for(lambda: runs_of(h, "qu")[1:], 10)[0]
    h.wait_state(second, "Queued")
    assert h.state(first) == "Running"
    h.daemon.groups.set_paused("qu", True, h.root)
    count = len(runs_of(h, "qu"))
    time.sleep(2.5)
    assert len(runs_of(h, "qu")) == count  # paused: no more firings


def test_the_cap_is_checked_at_create_and_again_at_each_run(h: Harness) -> None:
    too_high = spec("cap", quick(), priority=11, workspace="vision")
    with pytest.raises(ServiceError) as refused:
        h.daemon.groups.create(group_doc("schedule", "cap", too_high, cron=EVERY_2S), h.root)
    assert str(refused.value) == (
        "403 PRIORITY_NOT_ALLOWED: priority 11 is above namespace vision's maximum of 10"
    )
    assert h.daemon.store.groups.get("cap") is None
    template = spec("cap", quick(), priority=5, workspace="vision")
    h.daemon.groups.create(group_doc("schedule", "cap", template, cron=EVERY_2S), h.root)
    wait_for(lambda: runs_of(h, "cap"), 10)
    path = h.daemon.home / "config.toml"
    path.write_text(path.read_text().replace("max_priority = 10", "max_priority = 0"))
    h.daemon.apply_config(load_config(path))
    count = len(runs_of(h, "cap"))
    wait_for(lambda: any(k == "Refused" for k, _ in group_events(h, "cap")), 10)
    refusal = next(m for k, m in group_events(h, "cap") if k == "Refused")
    assert refusal.endswith(
        ": 403 PRIORITY_NOT_ALLOWED: priority 5 is above namespace vision's maximum of 0"
    )
    assert len(runs_of(h, "cap")) <= count + 1  # at most one fired before the change landed


# ------------------------------------------------------------------- replicas


def test_replicas_are_restarted_when_they_exit_and_scaled(h: Harness) -> None:
    template = spec("pool", quick(seconds=0.5), workspace="vision")
    h.daemon.groups.create(group_doc("replicas", "pool", template, replicas=2), h.root)
    assert runs_of(h, "pool") == ["pool-0", "pool-1"]  # written with the group

    def restarts() -> int:
        return sum("Replica restarted" in m for m in h.events("pool-0"))

    wait_for(lambda: restarts() >= 2, 30, "pool-0 restarted twice")
    assert any("quick exit 1 in a row" in m for m in h.events("pool-0"))
    h.daemon.groups.scale("pool", 3, h.root)
    wait_for(lambda: "pool-2" in runs_of(h, "pool"), 10)
    h.daemon.groups.scale("pool", 1, h.root)
    finished = ("Succeeded", "Failed", "Cancelled")
    for name in ("pool-1", "pool-2"):  # stopped if live, or left as they ended
        wait_for(lambda n=name: h.state(n) in finished, 15, f"{name} ended")  # type: ignore[misc]
    ended = {n: h.run(n).finished_at for n in ("pool-1", "pool-2")}
    time.sleep(3)
    assert {n: h.run(n).finished_at for n in ended} == ended  # scaled away: not restarted
    wait_for(lambda: restarts() >= 3, 20, "pool-0 still kept going")
    outcomes = h.daemon.groups.delete("pool", h.root)
    assert sum(outcomes.values()) == 3
    assert h.daemon.store.groups.get("pool") is None


def test_each_replica_is_preempted_alone(h: Harness) -> None:
    template = spec("svc", sleeper(), gpus=1, workspace="vision")
    h.daemon.groups.create(group_doc("replicas", "svc", template, replicas=2), h.root)
    for name in ("svc-0", "svc-1"):
        h.wait_state(name, "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=5, workspace="vision"))
    h.wait_state("urgent", "Running")
    states = sorted(h.state(n) for n in ("svc-0", "svc-1"))
    assert states == ["Queued", "Running"]
    paused = next(n for n in ("svc-0", "svc-1") if h.state(n) == "Queued")
    assert h.run(paused).preemptions == 1


# --------------------------------------------------------------------- sweeps


def test_a_sweep_makes_runs_in_order_each_preempted_alone(h: Harness) -> None:
    program = [PY, "-c", "import os, time; print('A=' + os.environ['A'], 'B=' + os.environ['B'],"
               " 'I=' + os.environ['ASTRAEUS_SWEEP_INDEX'], flush=True); time.sleep(600)",
               "{A}-{B}"]  # fmt: skip
    template = spec("sw", program, gpus=1, workspace="vision")
    doc = group_doc("sweep", "sw", template, grid={"A": [1, 2], "B": ["x", "y"]})
    h.daemon.groups.create(doc, h.root)
    assert runs_of(h, "sw") == ["sw-0", "sw-1", "sw-2", "sw-3"]
    h.wait_state("sw-0", "Running")
    h.wait_state("sw-1", "Running")
    assert h.state("sw-2") == "Queued" and h.state("sw-3") == "Queued"
    wait_for(lambda: "A=1 B=y I=1" in h.log("sw-1"), 10)
    assert h.daemon.backend.specs.get(h.run("sw-3")).task.args[-1] == "2-y"
    h.submit(spec("hot", sleeper(), gpus=1, priority=5, workspace="vision"))
    h.wait_state("hot", "Running")
    running = [n for n in runs_of(h, "sw") if h.state(n) == "Running"]
    assert len(running) == 1  # one run of the sweep made room, not the sweep
    outcomes = h.daemon.groups.delete("sw", h.root)
    assert outcomes == {"stopping": 1, "cancelled": 3}
    for name in ("sw-0", "sw-1", "sw-2", "sw-3"):
        h.wait_state(name, "Cancelled")


# --------------------------------------------------------------- dependencies


def test_a_dependency_chain_runs_in_order(h: Harness) -> None:
    h.submit(spec("a", quick(seconds=1), workspace="vision"))
    b = spec("b", quick(), workspace="vision")
    b["spec"]["after"] = ["a"]
    h.submit(b)
    c = spec("c", quick(), workspace="vision")
    c["spec"]["after"] = ["b"]
    h.submit(c)
    wait_for(lambda: h.reason("b") == "Waits for a to succeed", 10)
    # c was submitted after b: the loop may not have looked at it yet
    wait_for(lambda: h.reason("c") == "Waits for b to succeed", 10)
    assert h.daemon.backend.status.plan is not None
    assert "b" not in h.daemon.backend.status.plan.positions  # not in the order: never the head
    for name in ("a", "b", "c"):
        h.wait_state(name, "Succeeded", timeout=20)
    a, b_row, c_row = h.run("a"), h.run("b"), h.run("c")
    assert a.finished_at is not None and b_row.started_at is not None
    assert b_row.started_at >= a.finished_at
    assert c_row.started_at is not None and b_row.finished_at is not None
    assert c_row.started_at >= b_row.finished_at


def test_a_failed_dependency_fails_its_dependents_clearly(h: Harness) -> None:
    h.submit(spec("x", quick(code=3), restart_limit=0, workspace="vision"))
    y = spec("y", quick(), workspace="vision")
    y["spec"]["after"] = ["x"]
    h.submit(y)
    z = spec("z", quick(), workspace="vision")
    z["spec"]["after"] = ["y"]
    h.submit(z)
    assert h.wait_state("y", "Failed").reason is not None
    assert h.reason("y") == "Dependency x failed"
    h.wait_state("z", "Failed")
    assert h.reason("z") == "Dependency y failed"
    late = spec("late", quick(), workspace="vision")
    late["spec"]["after"] = ["x"]
    with pytest.raises(ServiceError) as refused:
        h.submit(late)
    assert str(refused.value) == (
        "409 DEPENDENCY_FAILED: spec.after: run x is Failed, so this run could never start"
    )
    late["spec"]["after"] = ["nope"]
    with pytest.raises(ServiceError) as unknown:
        h.submit(late)
    assert str(unknown.value) == "422 INVALID_SPEC: spec.after: no run nope"
    assert h.daemon.store.runs.get("late") is None


# --------------------------- a group's name, its forgotten runs, its template, its failures


def test_a_deleted_groups_runs_are_not_taken_over_by_a_new_group_of_its_name(
    make_daemon: Callable[..., Harness],
) -> None:
    h = make_daemon(WORKSPACE + '[workspaces.nlp]\nmembers = ["root"]\n', gpus=2)
    template = spec("exp", sleeper(), gpus=1, workspace="vision")
    h.daemon.groups.create(group_doc("sweep", "exp", template, list=[{"A": 1}, {"A": 2}]), h.root)
    h.wait_state("exp-0", "Running")
    h.daemon.groups.delete("exp", h.root)
    for name in ("exp-0", "exp-1"):
        h.wait_state(name, "Cancelled")
    assert h.daemon.store.runs.of_group("exp") == []  # the name is free, the runs are not
    other = spec("exp", sleeper(), workspace="nlp")
    with pytest.raises(ServiceError, match="409 NAME_IN_USE: a run named exp-0 exists"):
        h.daemon.groups.create(group_doc("replicas", "exp", other, replicas=2), h.root)
    h.daemon.groups.create(group_doc("replicas", "exp", other, replicas=0), h.root)
    h.daemon.groups.scale("exp", 2, h.root)
    wait_for(lambda: sum(k == "Refused" for k, _ in group_events(h, "exp")) == 2, 10)
    time.sleep(1.5)
    refusals = [m for k, m in group_events(h, "exp") if k == "Refused"]
    assert refusals == [
        f"Replica exp-{i} not started: a run named exp-{i} exists outside the group" for i in (0, 1)
    ]  # once each, not on every tick
    assert {h.run(n).workspace for n in ("exp-0", "exp-1")} == {"vision"}
    assert {h.state(n) for n in ("exp-0", "exp-1")} == {"Cancelled"}


def test_a_succeeded_dependency_forgotten_later_changes_nothing(h: Harness) -> None:
    h.submit(spec("blocker", sleeper(), gpus=2, workspace="vision"))
    h.wait_state("blocker", "Running")
    h.submit(spec("prep", quick(), workspace="vision"))
    h.wait_state("prep", "Succeeded")
    train = spec("train", quick(), gpus=1, workspace="vision")
    train["spec"]["after"] = ["prep"]
    h.submit(train)
    wait_for(lambda: h.run("train").deps_met, 10, "the dependency met")
    assert h.daemon.service.delete("prep", h.root) == "forgotten"
    time.sleep(1)
    assert h.state("train") == "Queued"  # waits for GPUs, not failed
    h.daemon.service.delete("blocker", h.root)
    h.wait_state("train", "Succeeded")


def test_the_template_keeps_the_workspace_it_was_made_in(h: Harness) -> None:
    template = spec("ws", quick())  # no metadata.workspace: the owner's default
    group = h.daemon.groups.create(group_doc("schedule", "ws", template, cron="0 3 * * *"), h.root)
    assert group.document()["template"]["metadata"]["workspace"] == group.workspace


def test_a_group_that_fails_in_the_tick_is_set_aside_and_the_others_go_on(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One group's failure is its own: the tick sets it aside (one event) and goes on."""
    control = h.daemon.backend.groups.__self__
    handle = control._replicas

    def broken(group: Any, now: float) -> bool:
        if group.name == "broken":
            raise RuntimeError("injected")
        return bool(handle(group, now))

    monkeypatch.setattr(control, "_replicas", broken)
    for name in ("broken", "fine"):
        doc = {"kind": "replicas", "name": name, "replicas": 1, "template": spec(name, sleeper())}
        h.daemon.groups.create(doc, h.root)
    wait_for(lambda: [r.state for r in h.daemon.store.runs.of_group("fine")] == ["Running"])
    h.submit(spec("plain", sleeper()))
    h.wait_state("plain", "Running")
    aside = [e for e in h.daemon.store.events.all(grp="broken") if e.kind == "SetAside"]
    assert len(aside) == 1  # once, not once a tick
    assert aside[0].message.code.value == "SET_ASIDE"
