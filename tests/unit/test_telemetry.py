"""Telemetry (runner/telemetry): NVML's readings through a stubbed pynvml, the simulation
of held GPUs, psutil over a real process tree, and the sampler's rings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import psutil
import pytest

from runner.gpus import SIM_MEMORY
from runner.telemetry.gpus import read_nvml, simulate
from runner.telemetry.procs import TreeMeter
from runner.telemetry.sampler import Sampler, run_readings
from runner.telemetry.workers import LiveWorker
from tests.unit.nvml_fakes import StubNvml

GIB = 1 << 30


def test_nvml_readings_of_each_device() -> None:
    gpus, processes = read_nvml(StubNvml())
    assert [(g.index, g.uuid, g.utilization, g.temperature, g.power_watts) for g in gpus] == [
        (0, "GPU-0", 40, 61, 250.5),
        (1, "GPU-1", 41, 62, 251.5),
    ]
    assert [(g.memory_used, g.memory_total) for g in gpus] == [(10 * GIB, 80 * GIB),
                                                               (20 * GIB, 80 * GIB)]  # fmt: skip
    assert not any(g.simulated for g in gpus) and processes == []


@pytest.mark.parametrize(
    ("broken", "field"),
    [("util", "utilization"), ("temperature", "temperature"), ("power", "power_watts")],
)
def test_a_field_nvml_cannot_read_is_none_and_the_others_stay(broken: str, field: str) -> None:
    gpus, _ = read_nvml(StubNvml(broken={broken}))
    assert all(getattr(g, field) is None for g in gpus)
    kept = {"utilization", "temperature", "power_watts", "memory_used"} - {field}
    assert all(getattr(g, f) is not None for g in gpus for f in kept)


def test_memory_nvml_cannot_read_is_none() -> None:
    gpus, _ = read_nvml(StubNvml(broken={"memory"}))
    assert [(g.memory_used, g.memory_total, g.utilization) for g in gpus] == [
        (None, None, 40), (None, None, 41)]  # fmt: skip


def test_an_older_pynvml_without_power_reads_none() -> None:
    class Old(StubNvml):
        nvmlDeviceGetPowerUsage = None  # type: ignore[assignment]

    gpus, _ = read_nvml(Old())
    assert [g.power_watts for g in gpus] == [None, None]
    assert [g.utilization for g in gpus] == [40, 41]


def _worker(run: str, gpus: tuple[int, ...], root: int | None, workspace: str = "ws") -> LiveWorker:
    return LiveWorker(run, f"uid-{run}", workspace, gpus, root)


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    """A real tree: a shell whose child holds 64 MiB and spins a little."""
    child = (
        "import time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]);"
        "t = time.time()\nwhile time.time() - t < 0.3: pass\ntime.sleep(60)"
    )
    proc = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "{child}"; :'])
    time.sleep(0.6)  # the child has allocated
    yield proc
    for child in psutil.Process(proc.pid).children(recursive=True):
        child.kill()
    proc.kill()
    proc.wait()


def test_psutil_measures_the_whole_tree(tree: subprocess.Popen[bytes]) -> None:
    meter = TreeMeter()
    first = meter.measure({"a": tree.pid})["a"]
    assert len(first.pids) == 2 and tree.pid in first.pids
    assert first.memory_bytes > 64 << 20  # the child's 64 MiB counted
    assert first.cpu_percent == 0.0  # first seen: the count starts
    time.sleep(0.2)
    again = meter.measure({"a": tree.pid, "gone": 2**22 + 12345})
    assert set(again) == {"a"} and again["a"].pids == first.pids
    assert again["a"].cpu_percent >= 0.0


def test_per_process_gpu_memory_is_mapped_to_the_run_whose_tree_holds_the_pid(
    tree: subprocess.Popen[bytes],
) -> None:
    child = max(TreeMeter().measure({"a": tree.pid})["a"].pids)
    processes = {0: [SimpleNamespace(pid=child, usedGpuMemory=3 * GIB),
                     SimpleNamespace(pid=os.getpid(), usedGpuMemory=5 * GIB)],  # not a run's
                 1: [SimpleNamespace(pid=child, usedGpuMemory=None)]}  # fmt: skip
    gpus, found = read_nvml(StubNvml(processes=processes))
    assert [(p.gpu, p.memory_used) for p in found] == [(0, 3 * GIB), (0, 5 * GIB), (1, None)]
    workers = [_worker("a", (0,), tree.pid), _worker("b", (1,), None)]
    runs = {r.run: r for r in run_readings(workers, gpus, found, TreeMeter())}
    assert runs["a"].gpu_memory_bytes == 3 * GIB
    assert runs["a"].gpu_util == 40.0 and runs["a"].memory_bytes is not None
    assert runs["b"].gpu_memory_bytes is None and runs["b"].cpu_percent is None  # not measured
    assert runs["b"].gpu_util == 41.0


def test_a_process_list_nvml_cannot_read_maps_nothing() -> None:
    _, found = read_nvml(StubNvml(broken={"processes"}))
    assert found == []


def test_simulated_gpus_are_busy_while_held_and_idle_otherwise() -> None:
    for second in range(1_800_000_000, 1_800_000_050):
        held, idle = simulate((0, 1), {0: "run-uid"}, second + 0.5)
        assert held.simulated and idle.simulated
        assert held.utilization is not None and 80 <= held.utilization <= 100
        assert (
            held.memory_used is not None
            and 0.6 * SIM_MEMORY <= held.memory_used <= 0.9 * SIM_MEMORY
        )
        assert (idle.utilization, idle.memory_used) == (0, 0)
        assert held.power_watts is not None and idle.power_watts is not None
        assert held.power_watts > idle.power_watts
    assert simulate((0,), {0: "u"}, 5.0) == simulate((0,), {0: "u"}, 5.9)  # deterministic
    values = {simulate((0,), {0: "u"}, float(s))[0].utilization for s in range(40)}
    assert len(values) > 1  # and it moves with time


def test_the_sampler_keeps_an_hour_and_drops_runs_that_ended() -> None:
    live = [_worker("a", (0,), None), _worker("a", (1,), None, "ws")]
    clock = iter(float(t) for t in range(1000, 100_000))
    sampler = Sampler(60.0, (0, 1, 2), True, lambda: live, wall=lambda: next(clock))
    for _ in range(100):
        sample = sampler.sample_once()
    (run,) = sample.runs
    assert run.gpus == (0, 1) and run.gpu_util is not None and run.gpu_util >= 80
    assert run.gpu_memory_bytes is not None and run.gpu_memory_bytes >= 1.2 * SIM_MEMORY
    assert len(sampler.gpu_history(0)) == 61  # an hour at one a minute, and the newest
    assert len(sampler.run_history("uid-a")) == 61
    assert sampler.gpu_history(2)[-1][1].utilization == 0
    live.clear()
    assert sampler.sample_once().runs == ()
    assert sampler.run_history("uid-a") == []


def test_the_sampler_reads_nvml_once_initialised_and_shuts_it_down() -> None:
    nvml = StubNvml()
    sampler = Sampler(0.2, (0, 1), False, list, nvml=nvml).start()
    deadline = time.monotonic() + 10
    while sampler.latest() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.stop()
    latest = sampler.latest()
    assert latest is not None and [g.utilization for g in latest.gpus] == [40, 41]
    assert (nvml.inits, nvml.shutdowns) == (1, 1) and not sampler.running


def test_the_wire_shape_keeps_its_key_order_and_leaves_out_history_unless_asked() -> None:
    import msgspec

    from runner import schema

    gpu = schema.TelemetryGpu(index=0, utilization=None)
    run = schema.TelemetryRun(name="a job in another namespace", visible=False, workspace="nlp")
    body = msgspec.json.encode(schema.Telemetry(gpus=[gpu], runs=[run]))
    assert body == (
        b'{"time":null,"interval_seconds":null,"simulated":false,"gpus":[{"index":0,"uuid":"",'
        b'"name":"","simulated":false,"utilization":null,"memory_used":null,'
        b'"memory_total":null,"temperature":null,"power_watts":null}],"runs":[{"uid":null,'
        b'"name":"a job in another namespace","visible":false,"workspace":"nlp","gpus":[],'
        b'"cpu_percent":null,"memory_bytes":null,"gpu_memory_bytes":null,"gpu_util":null}]}'
    )
    assert msgspec.json.decode(body, type=schema.Telemetry).runs == [run]
    with_history = schema.TelemetryGpu(index=1, history=[schema.TelemetryGpuSample(time=1.0)])
    assert b'"history":[{"time":1.0,"utilization":null' in msgspec.json.encode(with_history)
