"""What GPUs this machine has: NVML through pynvml, or simulated GPUs.

Simulated GPUs stand in twice:

* the config says ``gpus = N``: N simulated GPUs, whatever the hardware;
* the config says ``gpus = "auto"`` and NVML cannot be used (pynvml missing, no
  driver library, no device access): ``$ASTRAEUS_SIM_GPUS`` simulated GPUs,
  default 2 (:data:`DEFAULT_SIM_GPUS`) — enough to try gangs, backfill and
  preemption on a laptop. :attr:`Inventory.source` then says why
  (``simulated: NVML not available (Driver Not Loaded)``) so nobody mistakes them
  for hardware. Set ``ASTRAEUS_SIM_GPUS=0`` for a CPU-only machine.

With simulated GPUs, ``$ASTRAEUS_SIM_DEVICES`` may name a folder of device nodes that
stands for ``/dev`` (``nvidia0`` …, ``nvidiactl``): local runs see only their own GPUs'
nodes of it, as they see only their own of ``/dev`` on a machine with GPUs.

A GPU NVML reports in MIG mode is not scheduled whole: each of its MIG instances
is a GPU of its own size, numbered on from the GPUs before it and labelled as
nvidia-smi numbers it (``0:1``: GPU 0's instance 1). On such a machine every GPU is
named by its UUID (``MIG-…`` or ``GPU-…``) in ``CUDA_VISIBLE_DEVICES`` and in Docker's
device requests (:attr:`Inventory.devices`); on any other machine by its index, as
before.

NVML's PIDs are those of the host's PID namespace: a daemon inside a container
with its own PID namespace sees every GPU process as foreign.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.model import GIB
from runner.oneline import one_line

SIM_GPUS_ENV = "ASTRAEUS_SIM_GPUS"
# simulated GPUs only: a folder of device nodes standing for /dev (nvidia<n>, nvidiactl…),
# hidden from runs as real ones are (tests make them as tests/slurm/setup.sh does)
SIM_DEVICES_ENV = "ASTRAEUS_SIM_DEVICES"
DEFAULT_SIM_GPUS = 2
MAX_SIM_GPUS = 1024
SIM_MEMORY = 80 * GIB
SIM_NAME = "Simulated GPU"
NVML_SOURCE = "nvml"
NVML_MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE: nvmlDeviceGetMigMode's current mode
MAX_MIG_INSTANCES = 64  # MIG instances looked for on one GPU, at most

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
    mig: str | None = None  # a MIG instance: "GPU:instance" as nvidia-smi numbers it
    device: str = ""  # what CUDA and Docker name it by; "": its index
    minor: int | None = None  # its device node, /dev/nvidia<minor> (a MIG instance: its GPU's)
    numa: int | None = None  # the NUMA node its PCI bus is on; None: not known

    @property
    def label(self) -> str:
        """How people see it: its index, or a MIG instance's ``0:1``."""
        return str(self.index) if self.mig is None else self.mig

    @property
    def device_name(self) -> str:
        """Its name in ``CUDA_VISIBLE_DEVICES`` and Docker's ``device_ids``."""
        return self.device or str(self.index)


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

    @property
    def devices(self) -> dict[int, str]:
        """GPU index -> the name CUDA and Docker know it by, for the GPUs not named by
        their index (all of them on a machine with a GPU in MIG mode; else none)."""
        return {g.index: g.device for g in self.gpus if g.device}

    @property
    def minors(self) -> dict[int, int]:
        """GPU index -> the number of its device node (``/dev/nvidia<n>``), where NVML
        said it; a GPU it did not say is taken to be the node of its index."""
        return {g.index: g.minor for g in self.gpus if g.minor is not None}

    @property
    def numa(self) -> dict[int, int]:
        """GPU index -> the NUMA node it is on, where the machine says."""
        return {g.index: g.numa for g in self.gpus if g.numa is not None}


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
    wrapped = Nvml(module)
    try:
        module.nvmlInit()
    except wrapped.errors as error:
        return _fallback(one_line(error), env)
    try:
        devices = list(wrapped.devices())
        gpus = tuple(_read_gpu(wrapped, d) for d in devices)
        if any(d.mig is not None or d.index != d.position for d in devices):
            gpus = tuple(replace(g, device=g.uuid) for g in gpus)  # indexes are not CUDA's
        version = wrapped.optional(module.nvmlSystemGetDriverVersion)
    except wrapped.errors as error:
        return _fallback(one_line(error), env)
    finally:
        with suppress(Exception):  # nothing useful to do when shutdown fails
            module.nvmlShutdown()
    driver = None if version is None else text(version)
    return Inventory(gpus=gpus, simulated=False, source=NVML_SOURCE, driver_version=driver)


@dataclass(frozen=True, slots=True)
class NvmlDevice:
    """One GPU to schedule as NVML knows it: a whole GPU, or a MIG instance of one
    (``mig`` ``"0:1"``, ``parent`` the whole GPU's handle). ``handle`` is None for a
    device whose handle could not be read (only with ``skip_lost``)."""

    index: int
    handle: Any
    position: int  # NVML's index of the whole GPU
    mig: str | None = None
    parent: Any = None

    @property
    def whole(self) -> Any:
        """The whole GPU's handle: its own, or a MIG instance's parent's."""
        return self.handle if self.parent is None else self.parent


class Nvml:
    """The one wrapper of NVML (a ``pynvml`` module, or the tests' stub) that the
    inventory and the telemetry read through: its errors, a query that may not be
    answered, the devices to schedule. NVML must be initialised."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.errors: tuple[type[BaseException], ...] = (
            getattr(module, "NVMLError", OSError),
            OSError,
        )
        self.temperature_sensor = getattr(module, "NVML_TEMPERATURE_GPU", 0)

    def optional(self, call: Callable[..., Any], *args: object) -> Any:
        """``call(*args)``, or None when NVML says it cannot answer."""
        try:
            return call(*args)
        except self.errors:
            return None

    def ask(self, name: str, handle: object, *args: object) -> Any:
        """NVML's ``name(handle, *args)``; None when it cannot answer or this pynvml has
        no such query (an older one)."""
        call = getattr(self.module, name, None)
        return None if call is None else self.optional(call, handle, *args)

    def temperature(self, device: NvmlDevice) -> Any:
        """A device's temperature; a MIG instance reads none, so its GPU's."""
        sensor = self.temperature_sensor
        temperature = self.ask("nvmlDeviceGetTemperature", device.handle, sensor)
        if temperature is None and device.parent is not None:
            temperature = self.ask("nvmlDeviceGetTemperature", device.parent, sensor)
        return temperature

    def devices(self, *, skip_lost: bool = False) -> Iterator[NvmlDevice]:
        """The devices to schedule, numbered from 0: each GPU, or each MIG instance of a
        GPU in MIG mode. Without MIG, index ``i`` is NVML's GPU ``i``.

        A handle that cannot be read raises NVML's error, or with ``skip_lost`` is
        yielded as None (a whole GPU: its number is kept, so the others keep theirs)."""
        nvml = self.module
        index = 0
        for position in range(int(nvml.nvmlDeviceGetCount())):
            if skip_lost:
                handle = self.optional(nvml.nvmlDeviceGetHandleByIndex, position)
            else:
                handle = nvml.nvmlDeviceGetHandleByIndex(position)
            instances = [] if handle is None else self._mig_instances(handle, position)
            if instances is None:
                yield NvmlDevice(index, handle, position)
                index += 1
                continue
            for label, instance in instances:
                yield NvmlDevice(index, instance, position, label, handle)
                index += 1

    def _mig_instances(self, handle: object, position: int) -> list[tuple[str, Any]] | None:
        """A GPU in MIG mode: its instances' labels and handles (maybe none); else None.

        A GPU or a pynvml that knows no MIG (NVMLError_NotSupported, a missing call) is
        a whole GPU."""
        mode = self.ask("nvmlDeviceGetMigMode", handle)
        if not mode or int(mode[0]) != NVML_MIG_ENABLED:
            return None
        count = self.ask("nvmlDeviceGetMaxMigDeviceCount", handle)
        if getattr(self.module, "nvmlDeviceGetMigDeviceHandleByIndex", None) is None or not count:
            return []
        found = []
        for slot in range(min(int(count), MAX_MIG_INSTANCES)):
            instance = self.ask("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if instance is not None:  # NotFound: a gap
                found.append((f"{position}:{slot}", instance))
        return found

    def pids(self, handle: object) -> tuple[int, ...]:
        """PIDs of the device's compute and graphics processes."""
        pids: set[int] = set()
        for query in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ):
            processes = self.ask(query, handle)
            pids.update(int(p.pid) for p in processes or () if getattr(p, "pid", None))
        return tuple(sorted(pids))


def text(value: object) -> str:
    """pynvml returns bytes in older versions, str in newer ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _read_gpu(nvml: Nvml, device: NvmlDevice) -> GpuInfo:
    """One device; utilization, temperature and processes may be unsupported (a MIG
    instance reads no utilization; its temperature is its GPU's)."""
    module, handle = nvml.module, device.handle
    memory = module.nvmlDeviceGetMemoryInfo(handle)
    rates = nvml.ask("nvmlDeviceGetUtilizationRates", handle)
    utilization = None if rates is None else rates.gpu
    temperature = nvml.temperature(device)
    minor = nvml.ask("nvmlDeviceGetMinorNumber", device.whole)
    pci = nvml.ask("nvmlDeviceGetPciInfo", device.whole)
    return GpuInfo(
        index=device.index,
        uuid=text(module.nvmlDeviceGetUUID(handle)),
        name=text(module.nvmlDeviceGetName(handle)),
        memory_total=int(memory.total),
        memory_used=int(memory.used),
        utilization=None if utilization is None else int(utilization),
        temperature=None if temperature is None else int(temperature),
        pids=nvml.pids(handle),
        simulated=False,
        mig=device.mig,
        minor=None if minor is None else int(minor),
        numa=None if pci is None else numa_node(text(getattr(pci, "busId", ""))),
    )


def numa_node(bus_id: str, sysfs: str = "/sys/bus/pci/devices") -> int | None:
    """The NUMA node of the PCI device NVML calls ``00000000:3B:00.0``; None: not known."""
    domain, _, rest = bus_id.partition(":")
    if not rest:
        return None
    try:
        with open(os.path.join(sysfs, f"{domain[-4:]}:{rest}".lower(), "numa_node")) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


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
