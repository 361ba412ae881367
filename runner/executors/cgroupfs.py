"""A worker's cgroup as its supervisor, its ``astra exec`` keeper and the executor use it:
join it, signal or kill what is in it, read what it used. Lean on purpose (no dataclasses,
nothing but ``os``): the supervisor imports it on every start. Making the groups, and
finding where they go, is runner/executors/cgroups.py's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

KILL_ROUNDS = 20
# how a worker's error begins when the kernel ended it for memory past what it asked
OUT_OF_MEMORY = "ran out of memory"


def write_cgroup(path: Path, value: str) -> None:
    """Write one cgroup file (made where missing: cgroupfs makes its own, a folder laid
    out as one in a test does not)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _number(path: Path) -> int | None:
    text = _read(path)
    try:
        return None if text is None else int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _keyed(path: Path, key: str) -> int | None:
    """``key N`` in a flat-keyed file (``memory.events``, ``memory.oom_control``)."""
    for line in (_read(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return None


class WorkerGroup:
    """One worker's cgroup: a folder per hierarchy (one on v2). ``controllers``: under v1,
    each folder's controller (memory, cpu, cpuacct, pids, freezer, cpuset: those mounted)."""

    __slots__ = ("controllers", "folders", "version")

    def __init__(
        self, version: int, folders: tuple[Path, ...], controllers: tuple[str, ...] = ()
    ) -> None:
        self.version, self.folders, self.controllers = version, folders, controllers

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkerGroup) and (
            (self.version, self.folders, self.controllers)
            == (other.version, other.folders, other.controllers)
        )

    def __hash__(self) -> int:
        return hash((self.version, self.folders, self.controllers))

    def __repr__(self) -> str:
        return f"WorkerGroup({self.version}, {self.folders!r}, {self.controllers!r})"

    def _in(self, controller: str) -> Path | None:
        if self.version == 2:
            return self.folders[0]
        found = (f for f, c in zip(self.folders, self.controllers, strict=True) if c == controller)
        return next(found, None)

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "folders": [str(f) for f in self.folders],
                "controllers": list(self.controllers)}  # fmt: skip

    @staticmethod
    def from_json(data: object) -> WorkerGroup | None:
        """The group ``to_json`` wrote (in ``launch.json`` and ``meta.json``); None if not one."""
        if not isinstance(data, dict):
            return None
        version, folders, controllers = (data.get(k) for k in ("version", "folders",
                                                                "controllers"))  # fmt: skip
        if version not in (1, 2) or not isinstance(folders, list) or not folders:
            return None
        if not isinstance(controllers, list):
            return None
        return WorkerGroup(int(str(version)), tuple(Path(str(f)) for f in folders),
                           tuple(str(c) for c in controllers))  # fmt: skip

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (0: the caller) into the group, in every hierarchy."""
        for folder in self.folders:
            write_cgroup(folder / "cgroup.procs", str(pid or os.getpid()))

    def pids(self) -> list[int]:
        """Every process in it (on v1, as the memory hierarchy counts them)."""
        folder = self._in("memory") or self.folders[0]
        text = _read(folder / "cgroup.procs") or ""
        return [int(p) for p in text.split() if p.isdigit()]

    def signal(self, signum: int, spare: int | None = None) -> list[str]:
        """Send ``signum`` to every process in it (but ``spare``); what refused, a line each."""
        refused = []
        for pid in self.pids():
            if pid == spare:
                continue
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                continue
            except PermissionError as exc:
                refused.append(f"process {pid}: {exc.strerror}")
        return refused

    def kill(self) -> list[str]:
        """SIGKILL to every process in it, none able to fork away meanwhile."""
        if self.version == 2 and (self.folders[0] / "cgroup.kill").exists():
            write_cgroup(self.folders[0] / "cgroup.kill", "1")
            return []
        freezer = self._freezer()
        if freezer is not None:
            with contextlib.suppress(OSError):
                write_cgroup(freezer, "1" if self.version == 2 else "FROZEN")
        refused: list[str] = []
        try:
            for _ in range(KILL_ROUNDS):  # a process forked before the freeze is in the list
                left = self.pids()
                if not left:
                    break
                refused = self.signal(signal.SIGKILL)
                if refused:
                    break
        finally:
            if freezer is not None:  # killed processes die only once thawed
                with contextlib.suppress(OSError):
                    write_cgroup(freezer, "0" if self.version == 2 else "THAWED")
        return refused

    def _freezer(self) -> Path | None:
        if self.version == 2:
            path = self.folders[0] / "cgroup.freeze"
        else:
            folder = self._in("freezer")
            path = folder / "freezer.state" if folder is not None else Path("/nonexistent")
        return path if path.exists() else None

    def oom_kills(self) -> int:
        """How many of its processes the OOM killer ended."""
        if self.version == 2:
            return _keyed(self.folders[0] / "memory.events", "oom_kill") or 0
        folder = self._in("memory")
        if folder is None:
            return 0
        kills = _keyed(folder / "memory.oom_control", "oom_kill")
        if kills is not None:
            return kills
        return 1 if (_number(folder / "memory.failcnt") or 0) > 0 and self._at_limit() else 0

    def _at_limit(self) -> bool:
        folder = self._in("memory")
        if folder is None:
            return False
        peak, limit = (_number(folder / n) for n in ("memory.max_usage_in_bytes",
                                                      "memory.limit_in_bytes"))  # fmt: skip
        return peak is not None and limit is not None and peak >= limit

    def memory_now(self) -> int | None:
        """The memory it holds now, as its limit counts it (page cache included)."""
        if self.version == 2:
            return _number(self.folders[0] / "memory.current")
        folder = self._in("memory")
        return None if folder is None else _number(folder / "memory.usage_in_bytes")

    def cpu_seconds(self) -> float | None:
        """The CPU time all its processes have used, in seconds."""
        if self.version == 2:
            used = _keyed(self.folders[0] / "cpu.stat", "usage_usec")
            return None if used is None else used / 1e6
        folder = self._in("cpuacct") or self._in("cpu")
        used = None if folder is None else _number(folder / "cpuacct.usage")
        return None if used is None else used / 1e9

    def memory_peak(self) -> int | None:
        """The most memory it held at once, in bytes."""
        if self.version == 2:
            return _number(self.folders[0] / "memory.peak")
        folder = self._in("memory")
        return None if folder is None else _number(folder / "memory.max_usage_in_bytes")

    def remove(self) -> None:
        """Remove its folders (once empty; what is left in it is killed first)."""
        if self.pids():
            self.kill()
        for folder in self.folders:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.02)  # its last processes are still being reaped
