"""pynvml as the tests give it: devices made up (``FakeNVML``, ``two_gpus``) for the GPU
inventory, and two devices' readings (``StubNvml``) for the telemetry sampler."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

from runner.model import GIB


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeDevice:
    uuid: str
    name: str
    total: int
    used: int
    utilization: int | None = 0  # None: NVML says "not supported"
    temperature: int | None = 40
    compute: tuple[int, ...] = ()
    graphics: tuple[int, ...] = ()


@dataclass
class FakeNVML:
    """The few pynvml functions gpus.py calls, over a list of devices."""

    devices: list[FakeDevice]
    init_error: str | None = None
    lost: str | None = None  # a failing nvmlDeviceGetMemoryInfo (a GPU fell off the bus)
    as_bytes: bool = False
    calls: list[str] = field(default_factory=list)

    def module(self) -> ModuleType:
        module = ModuleType("pynvml")
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(module, name, getattr(self, name))
        module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]  # a stub module
        module.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
        return module

    def _str(self, text: str) -> str | bytes:
        return text.encode() if self.as_bytes else text

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self._str("550.54.15")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        return self.devices[index]

    def nvmlDeviceGetUUID(self, handle: FakeDevice) -> str | bytes:
        return self._str(handle.uuid)

    def nvmlDeviceGetName(self, handle: FakeDevice) -> str | bytes:
        return self._str(handle.name)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeDevice) -> SimpleNamespace:
        if self.lost:
            raise FakeNVMLError(self.lost)
        return SimpleNamespace(
            total=handle.total, free=handle.total - handle.used, used=handle.used
        )

    def nvmlDeviceGetUtilizationRates(self, handle: FakeDevice) -> SimpleNamespace:
        if handle.utilization is None:
            raise FakeNVMLError("Not Supported")
        return SimpleNamespace(gpu=handle.utilization, memory=0)

    def nvmlDeviceGetTemperature(self, handle: FakeDevice, sensor: int) -> int:
        assert sensor == 0
        if handle.temperature is None:
            raise FakeNVMLError("Not Supported")
        return handle.temperature

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeDevice) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=GIB) for p in handle.compute]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeDevice) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=GIB) for p in handle.graphics]


def two_gpus(**kwargs: Any) -> FakeNVML:
    return FakeNVML(
        [
            FakeDevice("GPU-aaa", "NVIDIA H100 80GB HBM3", 80 * GIB, 3 * GIB, 97, 71, (4242,), ()),
            FakeDevice("GPU-bbb", "NVIDIA H100 80GB HBM3", 80 * GIB, 0, 0, 35, (7, 9), (9, 5)),
        ],
        **kwargs,
    )


class NVMLError(Exception):
    pass


class StubNvml:
    """pynvml's calls the sampler makes, for two devices; ``broken`` names calls that
    raise NVMLError, ``missing`` calls the module lacks (an older pynvml)."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, broken: set[str] = frozenset(), processes: Any = None) -> None:  # type: ignore[assignment]
        self.broken = broken
        self.processes = processes or {0: [], 1: []}
        self.inits = self.shutdowns = 0

    def _check(self, name: str) -> None:
        if name in self.broken:
            raise NVMLError(f"{name}: Not Supported")

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        self._check("memory")
        return SimpleNamespace(total=80 * GIB, used=(h + 1) * 10 * GIB)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        self._check("util")
        return SimpleNamespace(gpu=40 + h, memory=10)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        self._check("temperature")
        return 61 + h

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._check("power")
        return 250_500 + h * 1000  # milliwatts

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return f"GPU-{h}".encode()

    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        self._check("processes")
        return self.processes[h]
