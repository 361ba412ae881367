"""What GPUs this machine has: NVML through pynvml, or simulated GPUs.

Simulated GPUs stand in twice:

* the config says ``gpus = N``: N simulated GPUs, whatever the hardware;
* the config says ``gpus = "auto"`` and NVML cannot be used (pynvml missing, no
  driver library, no device access): ``$ASTRAEUS_SIM_GPUS`` simulated GPUs,
  default 2 (:data:`DEFAULT_SIM_GPUS`) — enough to try gangs, backfill and
  preemption on a laptop. :attr:`Inventory.source` then says why
  (``simulated: NVML not available (Driver Not Loaded)``) so nobody mistakes them
  for hardware. Set ``ASTRAEUS_SIM_GPUS=0`` for a CPU-only machine.

NVML's PIDs are those of the host's PID namespace: a daemon inside a container
with its own PID namespace sees every GPU process as foreign.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.model import GIB

SIM_GPUS_ENV = "ASTRAEUS_SIM_GPUS"
DEFAULT_SIM_GPUS = 2
MAX_SIM_GPUS = 1024
SIM_MEMORY = 80 * GIB
SIM_NAME = "Simulated GPU"
NVML_SOURCE = "nvml"

_PROC = Path("/proc")
_MAX_ANCESTRY = 4096  # /proc parent links followed from one PID, at most


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as last read. ``utilization`` in percent and ``temperature`` in °C
    are ``None`` when unknown (simulated, or not supported by the device)."""

    index: int
    uuid: str
    name: str
    memory_total: int
    memory_used: int
    utilization: int | None
    temperature: int | None
    pids: tuple[int, ...]
    simulated: bool


@dataclass(frozen=True, slots=True)
class Inventory:
    """The machine's GPUs; ``source`` is ``"nvml"`` or says why they are simulated."""

    gpus: tuple[GpuInfo, ...]
    simulated: bool
    source: str
    driver_version: str | None

    @property
    def count(self) -> int:
        return len(self.gpus)


def simulated_inventory(count: int, source: str) -> Inventory:
    gpus = tuple(
        GpuInfo(
            index=i,
            uuid=f"SIM-GPU-{i}",
            name=SIM_NAME,
            memory_total=SIM_MEMORY,
            memory_used=0,
            utilization=None,
            temperature=None,
            pids=(),
            simulated=True,
        )
        for i in range(count)
    )
    return Inventory(gpus=gpus, simulated=True, source=source, driver_version=None)


def read_inventory(
    configured: int | None,
    *,
    nvml: ModuleType | None = None,
    env: Mapping[str, str] | None = None,
) -> Inventory:
    """The GPUs to schedule: ``configured`` simulated ones, or NVML's (``None``).

    ``nvml`` replaces ``import pynvml`` (tests); ``env`` (default os.environ) is
    read for ASTRAEUS_SIM_GPUS when NVML is not available. A bad
    ASTRAEUS_SIM_GPUS raises ValueError.
    """
    if configured is not None:
        return simulated_inventory(configured, f"simulated: gpus = {configured} in config")
    module = nvml
    if module is None:
        try:
            module = importlib.import_module("pynvml")
        except ImportError as error:
            return _fallback(f"pynvml cannot be imported: {error}", env)
    errors = (getattr(module, "NVMLError", OSError), OSError)
    try:
        module.nvmlInit()
    except errors as error:
        return _fallback(_describe(error), env)
    try:
        count = int(module.nvmlDeviceGetCount())
        gpus = tuple(_read_gpu(module, index, errors) for index in range(count))
        version = _optional(module.nvmlSystemGetDriverVersion, errors)
    except errors as error:
        return _fallback(_describe(error), env)
    finally:
        with suppress(Exception):  # nothing useful to do when shutdown fails
            module.nvmlShutdown()
    driver = None if version is None else _text(version)
    return Inventory(gpus=gpus, simulated=False, source=NVML_SOURCE, driver_version=driver)


_Errors = tuple[type[BaseException], ...]


def _read_gpu(nvml: Any, index: int, errors: _Errors) -> GpuInfo:
    """One device; utilization, temperature and processes may be unsupported."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
    utilization = _optional(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu, errors)
    temperature = _optional(lambda: nvml.nvmlDeviceGetTemperature(handle, sensor), errors)
    return GpuInfo(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=_text(nvml.nvmlDeviceGetName(handle)),
        memory_total=int(memory.total),
        memory_used=int(memory.used),
        utilization=None if utilization is None else int(utilization),
        temperature=None if temperature is None else int(temperature),
        pids=_pids(nvml, handle, errors),
        simulated=False,
    )


def _pids(nvml: Any, handle: object, errors: _Errors) -> tuple[int, ...]:
    """PIDs of the device's compute and graphics processes."""
    pids: set[int] = set()
    for function in (
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
    ):
        call = getattr(nvml, function, None)
        processes = None if call is None else _optional(partial(call, handle), errors)
        pids.update(int(p.pid) for p in processes or () if getattr(p, "pid", None))
    return tuple(sorted(pids))


def _optional(call: Callable[[], Any], errors: _Errors) -> Any:
    """``call()``, or None when NVML says it cannot answer."""
    try:
        return call()
    except errors:
        return None


def _text(value: object) -> str:
    """pynvml returns bytes in older versions, str in newer ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def _fallback(why: str, env: Mapping[str, str] | None) -> Inventory:
    text = (os.environ if env is None else env).get(SIM_GPUS_ENV, "").strip()
    if not text:
        count = DEFAULT_SIM_GPUS
    elif text.isdigit() and int(text) <= MAX_SIM_GPUS:
        count = int(text)
    else:
        raise ValueError(
            f"{SIM_GPUS_ENV}: must be a whole number between 0 and {MAX_SIM_GPUS}, got {text!r}"
        )
    return simulated_inventory(count, f"simulated: NVML not available ({why})")


# ------------------------------------------------------------------ foreign work


def foreign_processes(
    inventory: Inventory, known_pids: AbstractSet[int]
) -> dict[int, tuple[int, ...]]:
    """GPU index -> PIDs on it that the scheduler did not start (capacity lost to them).

    A PID is the scheduler's when it, or any ancestor, is in ``known_pids`` (the
    process executor's children, a container's init PID). GPUs without foreign
    processes are left out. A process that ends while its ancestry is read counts
    as foreign this once; the next inventory no longer lists it.
    """
    verdicts: dict[int, bool] = {}
    found: dict[int, tuple[int, ...]] = {}
    for gpu in inventory.gpus:
        foreign = tuple(p for p in gpu.pids if not _is_known(p, known_pids, verdicts))
        if foreign:
            found[gpu.index] = foreign
    return found


def _is_known(pid: int, known: AbstractSet[int], verdicts: dict[int, bool]) -> bool:
    """Whether ``pid`` descends from a known PID; remembers the verdict for its chain."""
    chain: list[int] = []
    current: int | None = pid
    verdict = False
    while current is not None and current > 0 and len(chain) < _MAX_ANCESTRY:
        if current in verdicts:
            verdict = verdicts[current]
            break
        if current in known:
            verdict = True
            break
        chain.append(current)
        current = parent_pid(current)
    verdicts.update(dict.fromkeys(chain, verdict))
    return verdict


def parent_pid(pid: int) -> int | None:
    """The parent's PID from /proc/<pid>/stat, or None when it cannot be read."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        return int(stat[stat.rindex(")") + 1 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None
