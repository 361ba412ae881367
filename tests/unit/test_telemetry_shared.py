"""Simulated GPUs shared by memory: a shared GPU's memory follows its runs' shares."""

from __future__ import annotations

from runner.gpus import SIM_MEMORY
from runner.telemetry.gpus import simulate
from runner.telemetry.sampler import Sampler
from runner.telemetry.workers import LiveWorker

GiB = 1 << 30


def test_a_shared_gpu_uses_60_to_90_percent_of_each_share_summed() -> None:
    shares = {2: [("uid-a", 20 * GiB), ("uid-b", 30 * GiB)]}
    for second in range(1_800_000_000, 1_800_000_050):
        whole, idle, shared = simulate((0, 1, 2), {0: "uid-w", 2: "uid-b"}, second, None, shares)
        assert shared.memory_used is not None and whole.memory_used is not None
        assert 0.6 * 50 * GiB <= shared.memory_used <= 0.9 * 50 * GiB  # not of the 80 GiB
        assert shared.utilization is not None and 80 <= shared.utilization <= 100
        assert 0.6 * SIM_MEMORY <= whole.memory_used <= 0.9 * SIM_MEMORY  # unchanged
        assert (idle.utilization, idle.memory_used) == (0, 0)
    assert simulate((2,), {}, 7.0, None, shares) == simulate((2,), {}, 7.9, None, shares)


def test_a_shared_gpu_never_reports_more_than_its_memory() -> None:
    shares = {0: [(f"uid-{i}", 30 * GiB) for i in range(4)]}  # 120 GiB asked of 80
    for second in range(100):
        (gpu,) = simulate((0,), {}, float(second), None, shares)
        assert gpu.memory_used is not None and 0.6 * 80 * GiB <= gpu.memory_used <= SIM_MEMORY


def test_a_shared_gpu_is_idle_only_while_none_of_its_runs_works() -> None:
    shares = {0: [("uid-a", 20 * GiB), ("uid-b", 30 * GiB)]}
    (waiting,) = simulate((0,), {}, 5.0, {"uid-a": 0.0, "uid-b": 1.0}, shares)
    (one_works,) = simulate((0,), {}, 5.0, {"uid-a": 0.0, "uid-b": 90.0}, shares)
    assert waiting.utilization == 0 and waiting.memory_used is not None
    assert waiting.memory_used >= 0.6 * 50 * GiB  # a waiting run still holds its memory
    assert one_works.utilization is not None and one_works.utilization >= 80


def test_the_sampler_hands_each_runs_share_to_the_simulation() -> None:
    live = [
        LiveWorker("eval-a", "uid-a", "ws", (1,), None, 20 * GiB),
        LiveWorker("eval-b", "uid-b", "ws", (1,), None, 30 * GiB),
        LiveWorker("train", "uid-t", "ws", (0,), None),
    ]
    sampler = Sampler(5.0, (0, 1), True, lambda: live, wall=lambda: 1_800_000_000.0)
    sample = sampler.sample_once()
    whole, shared = sample.gpus
    assert shared.memory_used is not None and shared.memory_used <= 0.9 * 50 * GiB
    assert whole.memory_used is not None and whole.memory_used >= 0.6 * SIM_MEMORY
    runs = {r.run_uid: r for r in sample.runs}
    a, b = runs["uid-a"].gpu_memory_bytes, runs["uid-b"].gpu_memory_bytes
    assert a is not None and 0.6 * 20 * GiB <= a <= 0.9 * 20 * GiB  # its share, not the GPU's
    assert b is not None and 0.6 * 30 * GiB <= b <= 0.9 * 30 * GiB
    assert a + b == shared.memory_used
