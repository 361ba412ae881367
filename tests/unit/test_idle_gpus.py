"""Idle GPUs: the tracker on a clock moved by hand, what one sample says of a run's GPUs
(held whole, shared, per process), the simulation following its runs, the config keys,
and the loop's step (the event, the mark, the stop policy) on the engine's fakes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.config.idle import IdlePolicy
from runner.config.load import ConfigError, parse_config
from runner.engine.idle import IdleSettings, IdleWatch
from runner.model import RunState, StopReason
from runner.reasons import ReasonCode
from runner.telemetry.gpus import GpuProcess, GpuReading, read_nvml, simulate
from runner.telemetry.idle import IdleTracker, gpu_use
from runner.telemetry.procs import TreeUsage
from runner.telemetry.workers import LiveWorker
from tests.unit.engine_fakes import Engine
from tests.unit.nvml_fakes import StubNvml


def _gpu(index: int, util: int | None) -> GpuReading:
    return GpuReading(index, f"GPU-{index}", "x", util, 0, 80 << 30, 40, 60.0, False)


def _worker(run: str, gpus: tuple[int, ...], root: int | None = 1) -> LiveWorker:
    return LiveWorker(run, f"uid-{run}", "ws", gpus, root)


def _tree(*pids: int, cpu: float = 0.0) -> TreeUsage:
    return TreeUsage(cpu, 1 << 20, frozenset(pids))


# ------------------------------------------------------------------ the tracker


def test_a_stretch_starts_at_the_first_idle_sample_and_ends_when_busy() -> None:
    tracker = IdleTracker(5.0)
    tracker.observe({"a": 0.0, "b": 90.0}, 100.0)
    tracker.observe({"a": 5.0, "b": 90.0}, 110.0)  # at the threshold: still idle
    (found,) = tracker.stretches().items()
    assert found[0] == "a" and (found[1].since, found[1].last, found[1].seconds) == (100, 110, 10)
    tracker.observe({"a": 5.5, "b": 0.0}, 120.0)  # over it: a's stretch ends, b's starts
    assert {u: s.since for u, s in tracker.stretches().items()} == {"b": 120.0}
    tracker.observe({"a": 0.0, "b": 1.0}, 130.0)
    assert {u: s.since for u, s in tracker.stretches().items()} == {"a": 130.0, "b": 120.0}


def test_an_unknown_sample_ends_the_stretch_and_a_run_gone_is_dropped() -> None:
    tracker = IdleTracker(5.0)
    tracker.observe({"a": 0.0, "b": 0.0}, 0.0)
    tracker.observe({"a": None, "b": 0.0}, 10.0)  # not measured: never idle on a guess
    assert set(tracker.stretches()) == {"b"}
    tracker.observe({"a": 0.0}, 20.0)  # b no longer holds GPUs
    assert {u: s.since for u, s in tracker.stretches().items()} == {"a": 20.0}


def test_a_threshold_of_zero_counts_only_a_gpu_at_zero() -> None:
    tracker = IdleTracker(0.0)
    tracker.observe({"a": 0.0, "b": 1.0}, 0.0)
    assert set(tracker.stretches()) == {"a"}


# ------------------------------------------------------------------ one sample


def test_a_gpu_held_whole_is_read_by_its_own_utilisation() -> None:
    workers = [_worker("a", (0, 1)), _worker("b", (2,))]
    gpus = [_gpu(0, 0), _gpu(1, 3), _gpu(2, 97), _gpu(3, 0)]
    use = gpu_use(workers, gpus, None, {"0": _tree(10), "1": _tree(20)})
    assert use == {"uid-a": 3.0, "uid-b": 97.0}  # the busiest of its GPUs; GPU 3 is no one's


def test_a_gpu_shared_without_per_process_shares_is_unknown() -> None:
    workers = [_worker("a", (0,)), _worker("b", (0,)), _worker("c", (1,))]
    use = gpu_use(workers, [_gpu(0, 0), _gpu(1, 0)], None, {})
    assert use == {"uid-a": None, "uid-b": None, "uid-c": 0.0}


def test_per_process_shares_decide_where_nvml_gives_them() -> None:
    workers = [_worker("a", (0,)), _worker("b", (0,)), _worker("c", (1,))]
    trees = {"0": _tree(10, 11), "1": _tree(20), "2": _tree(30)}
    processes = [GpuProcess(10, 0, None, 1), GpuProcess(11, 0, None, 2),
                 GpuProcess(20, 0, None, 70)]  # fmt: skip
    use = gpu_use(workers, [_gpu(0, 73), _gpu(1, 0)], processes, trees)
    assert use == {"uid-a": 3.0, "uid-b": 70.0, "uid-c": 0.0}  # c: held whole, no shares


def test_per_process_shares_without_the_runs_tree_are_unknown() -> None:
    processes = [GpuProcess(10, 0, None, 0)]
    assert gpu_use([_worker("a", (0,), None)], [_gpu(0, 0)], processes, {}) == {"uid-a": None}


def test_a_run_holding_no_gpu_is_left_out_and_an_unread_gpu_is_unknown() -> None:
    workers = [_worker("cpu", ()), _worker("a", (0, 1))]
    assert gpu_use(workers, [_gpu(0, 0), _gpu(1, None)], None, {}) == {"uid-a": None}
    assert gpu_use(workers, [_gpu(0, 0)], None, {}) == {"uid-a": None}  # GPU 1 not read


class ShareNvml(StubNvml):
    """NVML with per-process utilisation samples."""

    def __init__(self, samples: dict[int, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.samples = samples

    def nvmlDeviceGetProcessUtilization(self, h: int, last_seen: int) -> Any:
        if self.samples.get(h) is None:
            raise self.NVMLError("Not Found")
        return self.samples[h]


def test_nvml_per_process_utilisation_reaches_each_process() -> None:
    processes = {0: [SimpleNamespace(pid=10, usedGpuMemory=1), SimpleNamespace(pid=11,
                                                                              usedGpuMemory=1)],
                 1: [SimpleNamespace(pid=20, usedGpuMemory=1)]}  # fmt: skip
    samples = {0: [SimpleNamespace(pid=10, smUtil=30), SimpleNamespace(pid=10, smUtil=45)],
               1: None}  # fmt: skip
    _, found = read_nvml(ShareNvml(samples, processes=processes))
    assert [(p.pid, p.gpu, p.utilization) for p in found] == [
        (10, 0, 45), (11, 0, 0), (20, 1, None),  # 11: no sample, nothing done; GPU 1: unknown
    ]  # fmt: skip
    _, plain = read_nvml(StubNvml(processes=processes))  # no per-process query at all
    assert {p.utilization for p in plain} == {None}


# ------------------------------------------------------------------ the simulation


def test_simulated_gpus_follow_their_runs_cpu() -> None:
    holders = {0: "sleeper", 1: "worker", 2: "unmeasured"}
    activity: dict[str, float | None] = {"sleeper": 0.4, "worker": 55.0, "unmeasured": None}
    for second in range(1_800_000_000, 1_800_000_030):
        idle, busy, unknown, free = simulate((0, 1, 2, 3), holders, second + 0.5, activity)
        assert idle.utilization == 0 and idle.memory_used  # holds its memory, does nothing
        assert busy.utilization is not None and 80 <= busy.utilization <= 100
        assert unknown.utilization is not None and 80 <= unknown.utilization <= 100
        assert (free.utilization, free.memory_used) == (0, 0)
        assert idle.power_watts is not None and busy.power_watts is not None
        assert idle.power_watts < busy.power_watts


# ------------------------------------------------------------------ the config


def _config(text: str) -> Any:
    return parse_config("[machine]\n" + text, source="c.toml", env={}).machine.idle


def test_the_idle_keys_default_to_half_an_hour_five_percent_and_warn() -> None:
    idle = _config("")
    assert (idle.after, idle.threshold, idle.policy) == (1800.0, 5.0, IdlePolicy.WARN)
    idle = _config('idle_gpu_after = "2s"\nidle_gpu_threshold = 0\nidle_gpu_policy = "stop"')
    assert (idle.after, idle.threshold, idle.policy) == (2.0, 0.0, IdlePolicy.STOP)
    assert _config('idle_gpu_after = "1h30m"').after == 5400.0
    assert _config('idle_gpu_after = "off"').after is None
    assert _config("idle_gpu_after = 0").after is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("idle_gpu_after = 30", 'machine.idle_gpu_after: must be a duration such as "30m"'),
        ('idle_gpu_after = "soon"', "machine.idle_gpu_after: must be a duration"),
        ('idle_gpu_after = "31d"', "machine.idle_gpu_after: must be at most 30d, got '31d'"),
        ("idle_gpu_threshold = 100", "machine.idle_gpu_threshold: must be a percentage"),
        ("idle_gpu_threshold = -1", "machine.idle_gpu_threshold: must be a percentage"),
        ("idle_gpu_threshold = true", "machine.idle_gpu_threshold: must be a percentage"),
        ('idle_gpu_policy = "kill"', 'machine.idle_gpu_policy: must be "warn" or "stop"'),
    ],
)
def test_a_bad_idle_key_is_one_line_naming_it(text: str, what: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(text)
    assert str(caught.value).startswith(f"c.toml: {what}")


# ------------------------------------------------------------------ the loop's step


def _engine(tmp: Path, policy: IdlePolicy, after: float = 60.0) -> tuple[Engine, IdleTracker]:
    e = Engine(tmp / "home", gpus=2, grace=30)
    tracker = IdleTracker(5.0)
    e.loop.idle = IdleWatch(e.store, tracker, IdleSettings(after, 5.0, policy))
    e.loop.status.idle = e.loop.idle.marks
    return e, tracker


def _events(e: Engine, name: str) -> list[tuple[str, str, str]]:
    return [(x.kind, x.code.value, x.message.render()) for x in e.store.events.all(name)]


def test_an_idle_run_gets_one_event_and_its_mark_until_it_works_again(tmp_path: Path) -> None:
    e, tracker = _engine(tmp_path, IdlePolicy.WARN)
    e.submit("lazy", gpus=1)
    e.tick()
    e.tick()
    uid = e.run("lazy").run_uid
    assert e.state("lazy") == RunState.RUNNING
    start, wall = e.clock.mono(), e.clock.wall()
    for i in range(13):  # a sample every 5 s, all at 0 %: the 13th makes a minute
        tracker.observe({uid: 0.0}, e.clock.mono())
        e.tick(5.0)
        if i == 11:  # 55 s: not yet
            assert e.loop.status.idle == {} and "GpuIdle" not in [x[0] for x in _events(e, "lazy")]
    assert e.clock.mono() - start == 65
    idle = [x for x in _events(e, "lazy") if x[0] == "GpuIdle"]
    assert idle == [("GpuIdle", "GPU_IDLE", "GPUs idle for 1m (under 5 % utilisation)")]
    assert e.loop.status.idle == {uid: wall}  # since its first idle sample, on the wall clock
    assert e.state("lazy") == RunState.RUNNING and e.executor.ops("lazy") == ["launch"]
    for _ in range(5):  # idle on: no second event
        tracker.observe({uid: 1.0}, e.clock.mono())
        e.tick(5.0)
    assert [x[0] for x in _events(e, "lazy")].count("GpuIdle") == 1
    tracker.observe({uid: 88.0}, e.clock.mono())  # it works again
    e.tick()
    assert e.loop.status.idle == {}
    kinds = [(x[0], x[1]) for x in _events(e, "lazy")]
    assert kinds[-1] == ("GpuBusy", "GPU_BUSY")
    assert _events(e, "lazy")[-1][2].startswith("GPUs in use again after ")


def test_a_run_under_the_time_is_not_idle_and_a_busy_run_never_is(tmp_path: Path) -> None:
    e, tracker = _engine(tmp_path, IdlePolicy.STOP)
    e.submit("short-naps", gpus=1)
    e.submit("worker", gpus=1)
    e.tick()
    e.tick()
    naps, worker = e.run("short-naps").run_uid, e.run("worker").run_uid
    for i in range(40):  # naps: idle 50 s at a time, then a busy sample
        tracker.observe({naps: 90.0 if i % 10 == 9 else 0.0, worker: 95.0}, e.clock.mono())
        e.tick(5.0)
    assert e.loop.status.idle == {}
    assert not [x for n in ("short-naps", "worker") for x in _events(e, n) if "GPU" in x[1]]
    assert e.state("short-naps") == e.state("worker") == RunState.RUNNING


def test_the_stop_policy_stops_an_idle_run_with_the_grace_and_it_fails(tmp_path: Path) -> None:
    e, tracker = _engine(tmp_path, IdlePolicy.STOP, after=30.0)
    e.submit("lazy", gpus=1, restart_limit=3)
    e.tick()
    e.tick()
    uid = e.run("lazy").run_uid
    for _ in range(8):
        tracker.observe({uid: 0.0}, e.clock.mono())
        e.tick(5.0)
    run = e.run("lazy")
    assert run.state == RunState.STOPPING and run.stop_request == StopReason.IDLE
    assert run.reason is not None and run.reason.code is ReasonCode.IDLE_STOPPED
    assert e.reason("lazy") == "Stopping: its GPUs were idle for 30s (idle_gpu_policy)"
    assert e.executor.ops("lazy") == ["launch", "stop"]  # SIGTERM: the grace runs
    (worker,) = e.workers("lazy")
    assert worker.stop_reason == StopReason.IDLE and worker.stop_deadline is not None
    idle = [x for x in _events(e, "lazy") if x[0] == "GpuIdle"]
    assert idle == [("GpuIdle", "GPU_IDLE", "GPUs idle for 30s (under 5 % utilisation); "
                     "stopping it (idle_gpu_policy)")]  # fmt: skip
    e.executor.exit("lazy", 143)  # it ends within its grace, on SIGTERM
    e.tick()
    run = e.run("lazy")
    assert run.state == RunState.FAILED and run.restarts == 0  # not restarted, not requeued
    assert run.reason is not None and run.reason.code is ReasonCode.IDLE_STOPPED
    assert e.reason("lazy") == "Stopped: its GPUs were idle for 30s (idle_gpu_policy)"
    assert _events(e, "lazy")[-1] == (
        "Failed",
        "FAILED",
        "Stopped: its GPUs were idle for 30s (idle_gpu_policy)",
    )
    tracker.observe({}, e.clock.mono())  # the next sample: it holds no GPU any more
    e.tick()
    assert e.loop.status.idle == {}  # the mark goes with the run's GPUs
    (record,) = e.store.usage.records(0.0)
    assert record.outcome == RunState.FAILED


def test_an_idle_stop_written_but_not_sent_is_sent_by_the_next_tick(tmp_path: Path) -> None:
    """The daemon died between writing the stop and sending SIGTERM: the loop sends it."""
    e, tracker = _engine(tmp_path, IdlePolicy.STOP, after=10.0)
    e.submit("lazy", gpus=1)
    e.tick()
    e.tick()
    uid = e.run("lazy").run_uid
    assert e.loop.idle is not None
    watch, e.loop.idle = e.loop.idle, None  # the loop's own step, driven by hand here
    for _ in range(3):
        tracker.observe({uid: 0.0}, e.clock.mono())
        e.clock.advance(5.0)
        watch.tick(e.clock.now(), lambda *args: None)  # written, then the crash: no SIGTERM
    assert e.run("lazy").stop_request == StopReason.IDLE
    assert e.executor.ops("lazy") == ["launch"]
    e.tick()
    assert e.executor.ops("lazy") == ["launch", "stop"]
    (worker,) = e.workers("lazy")
    assert worker.stop_reason == StopReason.IDLE
