"""Each GPU's readings: NVML through pynvml, or a simulation driven by the runs holding
simulated GPUs.

NVML is given as a module (``import pynvml`` by default) so that tests pass a stub. A
field NVML cannot answer (unsupported, or an error) is None; the others stay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.gpus import SIM_MEMORY, Nvml, text

SIM_IDLE_TEMPERATURE = 34
SIM_IDLE_POWER = 62.0  # watts
SIM_BUSY_POWER = 180.0  # watts at 0 %, plus up to 2.2 W a point of utilisation
SIM_BUSY_CPU = 10.0  # percent of a core: a run using less leaves its simulated GPUs at 0 %


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one time. ``memory_*`` in bytes, ``power_watts`` in W, ``temperature``
    in °C; None where unknown."""

    index: int
    uuid: str
    name: str
    utilization: int | None
    memory_used: int | None
    memory_total: int | None
    temperature: int | None
    power_watts: float | None
    simulated: bool


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process on a GPU, as NVML's per-process query reports it."""

    pid: int
    gpu: int
    memory_used: int | None
    # its share of the GPU's time (NVML's per-process SM utilisation, %); None where NVML
    # cannot say (no per-process accounting on this GPU or driver)
    utilization: int | None = None


def read_nvml(module: Any) -> tuple[list[GpuReading], list[GpuProcess]]:
    """Every device's readings and its compute processes; NVML must be initialised.
    Numbered as the inventory numbers them (runner.gpus.Nvml.devices): a MIG
    instance is a device of its own.

    Raises NVML's error when the device count cannot be read."""
    nvml = Nvml(module)
    readings: list[GpuReading] = []
    processes: list[GpuProcess] = []
    for device in nvml.devices(skip_lost=True):
        index, handle = device.index, device.handle
        if handle is None:
            continue
        memory = nvml.ask("nvmlDeviceGetMemoryInfo", handle)
        rates = nvml.ask("nvmlDeviceGetUtilizationRates", handle)
        util = None if rates is None else getattr(rates, "gpu", None)
        temp = nvml.temperature(device)
        power = nvml.ask("nvmlDeviceGetPowerUsage", handle)  # milliwatts
        uuid = nvml.ask("nvmlDeviceGetUUID", handle)
        name = nvml.ask("nvmlDeviceGetName", handle)
        readings.append(
            GpuReading(
                index=index,
                uuid="" if uuid is None else text(uuid),
                name="" if name is None else text(name),
                utilization=None if util is None else int(util),
                memory_used=None if memory is None else int(memory.used),
                memory_total=None if memory is None else int(memory.total),
                temperature=None if temp is None else int(temp),
                power_watts=None if power is None else int(power) / 1000,
                simulated=False,
            )
        )
        running = nvml.ask("nvmlDeviceGetComputeRunningProcesses", handle)
        shares = _process_utilization(nvml.ask("nvmlDeviceGetProcessUtilization", handle, 0))
        for p in running or ():
            pid = getattr(p, "pid", None)
            if isinstance(pid, int) and pid > 0:
                used = getattr(p, "usedGpuMemory", None)
                share = None if shares is None else shares.get(pid, 0)
                processes.append(
                    GpuProcess(
                        pid, index, used if isinstance(used, int) and used >= 0 else None, share
                    )
                )
    return readings, processes


def _process_utilization(samples: object) -> dict[int, int] | None:
    """NVML's per-process samples (``nvmlDeviceGetProcessUtilization``) as pid -> SM %,
    the highest of its samples; None when NVML gave none (not supported, no samples).
    A process absent from answered samples did nothing on the GPU in their window."""
    if not isinstance(samples, list | tuple):
        return None
    found: dict[int, int] = {}
    for sample in samples:
        pid, sm = getattr(sample, "pid", None), getattr(sample, "smUtil", None)
        if isinstance(pid, int) and pid > 0 and isinstance(sm, int) and 0 <= sm <= 100:
            found[pid] = max(found.get(pid, 0), sm)
    return found


def _fraction(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``: the same run, GPU and time, the same value."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _works(activity: Mapping[str, float | None] | None, uid: str) -> bool:
    """Whether run ``uid`` works: at least SIM_BUSY_CPU, or not measured."""
    cpu = None if activity is None else activity.get(uid)
    return cpu is None or cpu >= SIM_BUSY_CPU


def share_used(uid: str, index: int, second: int, share: int) -> int:
    """The simulated memory run ``uid`` uses of its ``share`` bytes on GPU ``index``:
    60–90 % of it, fixed by the run, the GPU and the whole second."""
    return int(share * (0.6 + 0.3 * _fraction(uid, index, second, "memory")))


def simulate(
    indexes: tuple[int, ...],
    holders: Mapping[int, str],
    now: float,
    activity: Mapping[str, float | None] | None = None,
    shares: Mapping[int, Sequence[tuple[str, int]]] | None = None,
) -> list[GpuReading]:
    """Simulated GPUs: one held by a run (``holders``: GPU index -> run uid) has 60–90 % of
    its 80 GiB in use and is busy, 80–100 %, while the run works; a free one is at 0 %.

    ``shares``: GPU index -> the runs sharing it by memory, each (run uid, the bytes it
    asked on that GPU). Such a GPU has 60–90 % of each share in use, summed and never above
    its memory, and is busy while any of its runs works; ``holders`` is not read for it.

    ``activity``: each run's CPU use (percent of a core, over its process tree): a run at
    under SIM_BUSY_CPU (a ``sleep``) leaves its GPUs at 0 %, as a real program that holds
    GPUs and waits would. A run without a measure (not in ``activity``, or None) is busy.

    Deterministic: the run's uid, the GPU and the whole second ``now`` fix each value."""
    readings = []
    second = int(now)
    for index in indexes:
        uid = holders.get(index)
        parts = () if shares is None else shares.get(index, ())
        if parts:
            works = [_works(activity, u) for u, _ in parts]
            busy = [u for (u, _), w in zip(parts, works, strict=True) if w]
            util = 80 + int(_fraction(busy[0], index, second, "util") * 21) if busy else 0
            used = min(SIM_MEMORY, sum(share_used(u, index, second, b) for u, b in parts))
            temperature = 55 + util // 4
            power = SIM_BUSY_POWER + 2.2 * util
        elif uid is None:
            util, used = 0, 0
            temperature, power = SIM_IDLE_TEMPERATURE, SIM_IDLE_POWER
        else:
            working = _works(activity, uid)
            util = 80 + int(_fraction(uid, index, second, "util") * 21) if working else 0
            used = int(SIM_MEMORY * (0.6 + 0.3 * _fraction(uid, index, second, "memory")))
            temperature = 55 + util // 4
            power = SIM_BUSY_POWER + 2.2 * util
        readings.append(
            GpuReading(
                index=index,
                uuid=f"SIM-GPU-{index}",
                name="Simulated GPU",
                utilization=util,
                memory_used=used,
                memory_total=SIM_MEMORY,
                temperature=temperature,
                power_watts=round(power, 1),
                simulated=True,
            )
        )
    return readings
