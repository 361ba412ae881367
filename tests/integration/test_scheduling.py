"""The scheduling scenarios of docs/scheduling.md, end to end: a real daemon, real processes."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.harness import Harness, sleeper, spec, wait_for

Make = Callable[..., Harness]

TWO_WORKSPACES = """
[workspaces.vision]
members = ["root"]
max_priority = 10
quota = { gpus = 4 }

[workspaces.nlp]
members = ["root"]
quota = { gpus = 4 }
"""


def test_priority_orders_the_queue(make_daemon: Make) -> None:
    h = make_daemon(gpus=2)
    h.submit(spec("blocker", sleeper(), gpus=2))
    h.wait_state("blocker", "Running")
    h.submit(spec("low", sleeper(), gpus=2, priority=-5))
    h.submit(spec("high", sleeper(), gpus=2, priority=0))
    wait_for(lambda: "Next to run (priority 0)" in h.reason("high"))
    assert h.reason("low") == "Queued behind high, which waits for running work to end"
    h.daemon.service.delete("blocker", h.root)
    h.wait_state("high", "Running")
    assert h.state("low") == "Queued"


def test_fair_share_between_two_workspaces(make_daemon: Make) -> None:
    h = make_daemon(
        TWO_WORKSPACES.replace(
            "quota = { gpus = 4 }\n\n[workspaces.nlp]", "quota = { gpus = 8 }\n\n[workspaces.nlp]"
        ),
        gpus=4,
    )
    h.submit(spec("v-1", sleeper(), gpus=1, workspace="vision"))  # vision: 1 of 8
    h.submit(spec("n-1", sleeper(), gpus=2, workspace="nlp"))  # nlp: 2 of 4
    h.submit(spec("blocker", sleeper(), gpus=1))
    for name in ("v-1", "n-1", "blocker"):
        h.wait_state(name, "Running")
    h.submit(spec("n-2", sleeper(), gpus=1, workspace="nlp"))  # submitted first
    h.submit(spec("v-2", sleeper(), gpus=1, workspace="vision"))
    wait_for(lambda: h.reason("n-2").startswith("Queued behind v-2"))
    h.daemon.service.delete("blocker", h.root)
    h.wait_state("v-2", "Running")  # the smaller share goes first
    assert h.state("n-2") == "Queued"


def test_head_is_protected_from_a_stream_of_small_runs(make_daemon: Make) -> None:
    h = make_daemon(gpus=4)
    h.submit(spec("busy", sleeper(), gpus=2))
    h.wait_state("busy", "Running")
    h.submit(spec("big", sleeper(), gpus=4))
    for i in range(4):
        h.submit(spec(f"small-{i}", sleeper(), gpus=1))
    wait_for(lambda: h.reason("small-3").startswith("Queued behind big"))
    assert h.reason("big") == "Next to run (priority 0): waits for running work to end"
    assert all(h.state(f"small-{i}") == "Queued" for i in range(4))
    h.daemon.service.delete("busy", h.root)
    h.wait_state("big", "Running")


def test_backfill_with_a_time_limit_and_none_without(make_daemon: Make) -> None:
    h = make_daemon(gpus=4)
    h.submit(spec("busy", sleeper(), gpus=2, limit=3600))
    h.wait_state("busy", "Running")
    h.submit(spec("big", sleeper(), gpus=4))
    h.submit(spec("no-limit", sleeper(), gpus=1))
    h.submit(spec("short", sleeper(), gpus=1, limit=600))
    h.wait_state("short", "Running")
    [started] = [e for e in h.events("short") if e.startswith("Backfilled")]
    assert ": its time limit ends it before big starts (by " in started
    assert h.state("no-limit") == "Queued"
    assert h.reason("no-limit").startswith("Queued behind big, which starts by ")
    assert "as running work ends." in h.reason("big")


def test_cpu_only_run_beside_promised_gpus(make_daemon: Make) -> None:
    h = make_daemon(gpus=4)
    h.submit(spec("busy", sleeper(), gpus=2, cpus=2))
    h.wait_state("busy", "Running")
    h.submit(spec("big", sleeper(), gpus=4, cpus=2))
    h.submit(spec("cpu-only", sleeper(), cpus=4))
    h.wait_state("cpu-only", "Running")
    assert h.state("big") == "Queued"


def test_quota_waits_and_records_the_event_once(make_daemon: Make) -> None:
    h = make_daemon(TWO_WORKSPACES, gpus=8)
    h.submit(spec("v-1", sleeper(), gpus=3, workspace="vision"))
    h.wait_state("v-1", "Running")
    h.submit(spec("v-2", sleeper(), gpus=2, workspace="vision"))
    h.submit(spec("v-huge", sleeper(), gpus=6, workspace="vision"))
    h.submit(spec("n-1", sleeper(), gpus=2, workspace="nlp"))
    h.wait_state("n-1", "Running")
    wait_for(lambda: h.reason("v-2") == "Waits for namespace quota: gpus 3 in use + 2 asked > 4")
    assert h.reason("v-huge") == (
        "Waits for more than the namespace's quota allows at all (gpus 6 > 4): "
        "raise the quota or ask for less."
    )
    h.daemon.backend.poke()
    wait_for(lambda: h.daemon.backend.status.ticks > 5)
    quota_events = [e for e in h.events("v-2") if e.startswith("Quota reached")]
    assert quota_events == ["Quota reached: gpus 3 in use + 2 asked > 4"]
    huge_events = [e for e in h.events("v-huge") if e.startswith("Quota reached")]
    assert huge_events == ["Quota reached: gpus 6 asked > 4 (more than the quota allows at all)"]


def _within(config: str) -> str:
    """``config`` with vision's runs over its quota preempting its own lower-priority work."""
    return config.replace("max_priority = 10\n", "max_priority = 10\npreempt_within_quota = true\n")


def test_by_default_a_run_over_its_quota_waits_and_preempts_nothing(make_daemon: Make) -> None:
    h = make_daemon(TWO_WORKSPACES.replace("gpus = 4 }", "gpus = 2 }", 1), gpus=4)
    for name in ("sweep-0", "sweep-1"):
        h.submit(spec(name, sleeper(), gpus=1, workspace="vision"))
        h.wait_state(name, "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision"))
    wait_for(lambda: h.reason("urgent") == "Waits for namespace quota: gpus 2 in use + 1 asked > 2")
    assert h.state("sweep-0") == h.state("sweep-1") == "Running"
    assert not any(e.startswith("Preempting") for e in h.events("urgent"))


def test_full_quota_urgent_run_preempts_its_own_sweep(make_daemon: Make) -> None:
    # vision's quota (2 GPUs) is full of its own sweep; 2 GPUs of the machine are free;
    # vision's runs preempt its own lower-priority work within the quota.
    h = make_daemon(_within(TWO_WORKSPACES.replace("gpus = 4 }", "gpus = 2 }", 1)), gpus=4)
    for name in ("sweep-0", "sweep-1"):
        h.submit(spec(name, sleeper(), gpus=1, workspace="vision"))
        h.wait_state(name, "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="vision"))
    h.wait_state("urgent", "Running")
    swept = h.wait_state("sweep-1", "Queued")
    assert h.state("sweep-0") == "Running"
    assert swept.preemptions == 1 and swept.restarts == 0
    assert h.reason("sweep-1").startswith(
        "Preempted by higher-priority work (urgent); waiting to run again."
    )
    assert any(
        e.startswith("Preempting 1 lower-priority worker(s) of sweep-1") for e in h.events("urgent")
    )
    assert "Preempted by urgent; queued again" in h.events("sweep-1")


def test_urgent_run_behind_the_head_preempts_its_own_sweep(make_daemon: Make) -> None:
    # 4 GPUs: vision's sweep fills its quota (2); nlp's blocker holds the other 2.
    # nlp's big run asks for all 4, cannot preempt its way in, and is the head.
    # vision's urgent run comes behind it, ends long before the head's start, and
    # so preempts its own sweep; the head keeps waiting for running work to end.
    h = make_daemon(_within(TWO_WORKSPACES.replace("gpus = 4 }", "gpus = 2 }", 1).replace(
        "gpus = 4 }", "gpus = 8 }")), gpus=4)  # fmt: skip
    for name in ("sweep-0", "sweep-1"):
        h.submit(spec(name, sleeper(), gpus=1, priority=-5, limit=7200, workspace="vision"))
        h.wait_state(name, "Running")
    h.submit(spec("blocker", sleeper(), gpus=2, limit=3600, workspace="nlp"))
    h.wait_state("blocker", "Running")
    h.submit(spec("big", sleeper(), gpus=4, workspace="nlp"))
    wait_for(lambda: h.reason("big").startswith("Next to run (priority 0): starts by"))
    h.submit(spec("urgent", sleeper(), gpus=1, limit=600, workspace="vision"))
    h.wait_state("urgent", "Running")
    swept = h.wait_state("sweep-1", "Queued")
    assert h.state("sweep-0") == "Running" and swept.preemptions == 1
    assert any(
        e.startswith("Preempting 1 lower-priority worker(s) of sweep-1") for e in h.events("urgent")
    )
    assert h.state("big") == "Queued"
    assert h.reason("big").startswith("Next to run (priority 0): starts by")
