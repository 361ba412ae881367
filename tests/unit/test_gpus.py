"""GPU inventory through a stub pynvml, simulated GPUs, and foreign-process detection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import replace

import pytest

from runner.gpus import (
    DEFAULT_SIM_GPUS,
    SIM_MEMORY,
    GpuInfo,
    Inventory,
    foreign_processes,
    parent_pid,
    read_inventory,
)
from runner.model import GIB
from tests.unit.nvml_fakes import FakeDevice, FakeNVML, two_gpus

NO_PID = 999_999_999  # above any kernel's pid_max: never a live process


EXPECTED = (
    GpuInfo(0, "GPU-aaa", "NVIDIA H100 80GB HBM3", 80 * GIB, 3 * GIB, 97, 71, (4242,), False),
    GpuInfo(1, "GPU-bbb", "NVIDIA H100 80GB HBM3", 80 * GIB, 0, 0, 35, (5, 7, 9), False),
)


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_nvml_inventory_matches_the_devices(as_bytes: bool) -> None:
    nvml = two_gpus(as_bytes=as_bytes)
    inventory = read_inventory(None, nvml=nvml.module(), env={})
    assert inventory == Inventory(
        EXPECTED, simulated=False, source="nvml", driver_version="550.54.15"
    )
    assert inventory.count == 2
    assert nvml.calls == ["init", "shutdown"]


def test_unsupported_readings_are_unknown_not_fatal() -> None:
    nvml = FakeNVML([FakeDevice("GPU-c", "Tesla T4", 16 * GIB, GIB, None, None)])
    (gpu,) = read_inventory(None, nvml=nvml.module(), env={}).gpus
    assert (gpu.utilization, gpu.temperature, gpu.pids) == (None, None, ())
    assert (gpu.uuid, gpu.memory_total, gpu.simulated) == ("GPU-c", 16 * GIB, False)


def test_nvml_without_devices_is_a_real_empty_inventory() -> None:
    inventory = read_inventory(None, nvml=FakeNVML([]).module(), env={"ASTRAEUS_SIM_GPUS": "4"})
    assert (inventory.gpus, inventory.simulated, inventory.source) == ((), False, "nvml")


def test_nvml_error_at_init_gives_simulated_gpus_with_the_reason() -> None:
    nvml = two_gpus(init_error="Driver Not Loaded")
    inventory = read_inventory(None, nvml=nvml.module(), env={})
    assert inventory.simulated
    assert inventory.source == "simulated: NVML not available (Driver Not Loaded)"
    assert inventory.count == DEFAULT_SIM_GPUS
    assert all(g.simulated for g in inventory.gpus)
    assert nvml.calls == ["init"]


def test_nvml_error_while_reading_falls_back_and_still_shuts_down() -> None:
    nvml = two_gpus(lost="GPU is lost")
    inventory = read_inventory(None, nvml=nvml.module(), env={"ASTRAEUS_SIM_GPUS": "3"})
    assert inventory.source == "simulated: NVML not available (GPU is lost)"
    assert inventory.count == 3
    assert nvml.calls == ["init", "shutdown"]


def test_missing_pynvml_gives_simulated_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    inventory = read_inventory(None, env={"ASTRAEUS_SIM_GPUS": "0"})
    assert inventory.simulated and inventory.count == 0
    assert inventory.source.startswith("simulated: NVML not available (pynvml cannot be imported")


@pytest.mark.parametrize("value", ["-1", "two", "1.5", "1025"])
def test_bad_sim_gpus_env_is_refused(value: str) -> None:
    nvml = two_gpus(init_error="Driver Not Loaded").module()
    with pytest.raises(ValueError, match=r"^ASTRAEUS_SIM_GPUS: must be a whole number"):
        read_inventory(None, nvml=nvml, env={"ASTRAEUS_SIM_GPUS": value})


@pytest.mark.parametrize("count", [0, 1, 4])
def test_configured_count_is_simulated_without_asking_nvml(count: int) -> None:
    nvml = two_gpus()
    inventory = read_inventory(count, nvml=nvml.module(), env={})
    assert nvml.calls == []
    assert inventory.source == f"simulated: gpus = {count} in config"
    assert inventory.simulated and inventory.driver_version is None
    assert [g.uuid for g in inventory.gpus] == [f"SIM-GPU-{i}" for i in range(count)]
    assert [g.index for g in inventory.gpus] == list(range(count))
    for gpu in inventory.gpus:
        assert (gpu.name, gpu.memory_total, gpu.memory_used) == ("Simulated GPU", SIM_MEMORY, 0)
        assert (gpu.pids, gpu.utilization, gpu.simulated) == ((), None, True)


# ------------------------------------------------------------------ foreign processes


def inventory_with(*pids_per_gpu: tuple[int, ...]) -> Inventory:
    gpus = tuple(replace(EXPECTED[0], index=i, pids=p) for i, p in enumerate(pids_per_gpu))
    return Inventory(gpus, simulated=False, source="nvml", driver_version=None)


def test_foreign_processes_are_those_not_known() -> None:
    me = os.getpid()
    inventory = inventory_with((me,), (me, NO_PID), ())
    assert foreign_processes(inventory, {me}) == {1: (NO_PID,)}
    assert foreign_processes(inventory, set()) == {0: (me,), 1: (me, NO_PID)}


def test_an_unrelated_live_process_is_foreign() -> None:
    me = os.getpid()
    assert me != 1
    assert foreign_processes(inventory_with((1, me)), {me}) == {0: (1,)}


@pytest.fixture
def grandchild() -> Iterator[tuple[int, int]]:
    """(child, grandchild) PIDs: a shell that started a sleep."""
    child = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    sleeper = int(child.stdout.readline())
    try:
        yield child.pid, sleeper
    finally:
        with suppress(ProcessLookupError):
            os.kill(sleeper, signal.SIGKILL)
        child.kill()
        child.wait()


def test_descendants_of_known_processes_are_known(grandchild: tuple[int, int]) -> None:
    child, sleeper = grandchild
    assert parent_pid(sleeper) == child
    assert parent_pid(child) == os.getpid()
    inventory = inventory_with((sleeper,), (child, NO_PID))
    assert foreign_processes(inventory, {os.getpid()}) == {1: (NO_PID,)}
    assert foreign_processes(inventory, {child}) == {1: (NO_PID,)}
    assert foreign_processes(inventory, {sleeper}) == {1: (child, NO_PID)}


def test_parent_pid_of_a_missing_process_is_none() -> None:
    assert parent_pid(os.getpid()) == os.getppid()
    assert parent_pid(NO_PID) is None


def test_each_gpu_s_device_node_is_nvml_s_minor_number() -> None:
    nvml = two_gpus()
    module = nvml.module()
    minors = {"GPU-aaa": 1, "GPU-bbb": 0}  # the driver numbered the nodes the other way
    module.nvmlDeviceGetMinorNumber = lambda h: minors[h.uuid]  # type: ignore[attr-defined]
    inventory = read_inventory(None, nvml=module, env={})
    assert inventory.minors == {0: 1, 1: 0}
    assert read_inventory(None, nvml=two_gpus().module(), env={}).minors == {}  # not said
