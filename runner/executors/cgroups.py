"""A cgroup for each process worker: what it asked for, and nothing more.

The process executor makes one cgroup per worker, named by its handle, before the worker
starts, and removes it once the worker is cleaned up. The command's child joins it before
it drops to the member and runs its first instruction (runner/executors/supervise.py), so
every process the command makes, one that calls ``setsid()`` or double-forks away
included, is in it; the supervisor never is. What is done with a group once made
(join, signal, kill, read) is runner/executors/cgroupfs.py's. In it:

- memory: ``memory.max`` with ``memory.swap.max = 0`` (v2), ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes`` where the kernel has it (v1): past what it asked, the
  kernel's OOM killer ends a process of this worker, no one else's; its ``oom_kill``
  count says so afterwards;
- CPU: ``cpu.max`` (v2) or ``cpu.cfs_quota_us`` (v1): its share of cores, not pinned;
- processes: ``pids.max``, a bound on a fork bomb;
- a stop: SIGTERM to every process in it; at the grace's end ``cgroup.kill`` (v2), or
  frozen, SIGKILLed, thawed (v1), so no process forks away while it is killed.

Two layouts: cgroup v2 (``/sys/fs/cgroup/cgroup.controllers`` exists: the unified
hierarchy), with the workers under ``astraeus.slice/<instance>/``; and cgroup v1 (one
hierarchy per controller, ``/sys/fs/cgroup/memory`` …), with the workers under
``astraeus/<instance>/`` in each. Where neither can be written (not root, a read-only
cgroupfs, a container without delegation) nothing is enforced and ``detect`` says
why: the executor then stops workers by walking ``/proc`` (runner/executors/tree.py) and
``astra doctor`` says what is not enforced. The root folder is a parameter, so the v2 and
v1 code runs in tests over a folder laid out as cgroupfs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.executors.cgroupfs import WorkerGroup, _read, write_cgroup

__all__ = ["CPU_PERIOD", "PIDS_MAX", "Cgroups", "Limits", "WorkerGroup", "detect", "write_cgroup"]

ROOT = Path("/sys/fs/cgroup")
V2_SLICE = "astraeus.slice"
V1_PARENT = "astraeus"
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")  # cpuacct: its CPU time
CPU_PERIOD = 100_000  # microseconds
PIDS_MAX = 16_384  # processes and threads of one worker: a fork bomb ends here


@dataclass(frozen=True, slots=True)
class Limits:
    """What a worker asked: bytes of memory, thousandths of cores (0: not asked)."""

    memory: int = 0
    cpu_milli: int = 0
    pids: int = PIDS_MAX
    cpus: str = ""  # cores of its own (a cpuset, "4-7"); "": a share of every core


class Cgroups:
    """Where workers' cgroups are made: a v2 slice, or a folder in each v1 hierarchy."""

    def __init__(
        self, version: int, parents: tuple[Path, ...], controllers: tuple[str, ...] = (),
        cpuset: Path | None = None,
    ) -> None:  # fmt: skip
        self.version = version
        self.parents = parents  # v2: the slice's folder for this daemon; v1: one per controller
        self.controllers = controllers  # v1: each parent's controller
        self.cpuset = cpuset  # where pinned workers' cpusets go (v1: its own hierarchy)

    def describe(self) -> str:
        """``cgroup v1: memory, CPU and processes enforced; stops reach every process``."""
        return f"cgroup v{self.version}: {', '.join(self.enforces())} enforced"

    def enforces(self) -> list[str]:
        if self.version == 2:
            text = _read(self.parents[0] / "cgroup.subtree_control") or ""
            wanted = {word.lstrip("+") for word in text.split()}
            return [n for n, c in (("memory", "memory"), ("CPU", "cpu"), ("processes", "pids"))
                    if c in wanted]  # fmt: skip
        names = set(self.controllers)
        return [n for n, c in (("memory", "memory"), ("CPU", "cpu"), ("processes", "pids"))
                if c in names]  # fmt: skip

    def forget(self) -> None:
        """Remove this daemon's folders where no worker's group is left in them."""
        for parent in self.parents:
            with contextlib.suppress(OSError):
                parent.rmdir()

    def group(self, name: str) -> WorkerGroup:
        return WorkerGroup(self.version, tuple(p / name for p in self.parents), self.controllers)

    def make(self, name: str, limits: Limits) -> WorkerGroup:
        """A new group ``name`` with ``limits`` written (one left by an earlier start of
        the same name is emptied and made again)."""
        group = self.group(name)
        if limits.cpus and self.version == 1 and self.cpuset is not None:
            group = WorkerGroup(1, (*group.folders, self.cpuset / name),
                                (*group.controllers, "cpuset"))  # fmt: skip
        group.remove()
        for folder in group.folders:
            folder.mkdir(mode=0o755, exist_ok=True)
        try:
            self._limit(group, limits)
        except OSError:
            group.remove()
            raise
        return group

    def find(self, name: str) -> WorkerGroup | None:
        """The group of a worker started before (adoption after a daemon restart)."""
        group = self.group(name)
        return group if all(f.is_dir() for f in group.folders) else None

    def pinned(self) -> set[int]:
        """The cores pinned workers of this daemon hold now."""
        if self.cpuset is None:
            return set()
        held: set[int] = set()
        for child in _children(self.cpuset):  # v2: unpinned groups' cpuset.cpus is empty
            held |= cpu_list(_read(child / "cpuset.cpus") or "")
        return held

    def cores(self) -> set[int]:
        """The cores this daemon's workers may have."""
        where = self.cpuset if self.cpuset is not None else self.parents[0]
        for folder in (where, *where.parents):
            text = _read(folder / "cpuset.cpus.effective") or _read(folder / "cpuset.cpus")
            if text and text.strip():
                return cpu_list(text)
        return set(range(os.cpu_count() or 1))

    def _limit(self, group: WorkerGroup, limits: Limits) -> None:
        if limits.cpus:
            self._pin(group, limits.cpus)
        if self.version == 2:
            folder = group.folders[0]
            if limits.memory:
                write_cgroup(folder / "memory.max", str(limits.memory))
                if (folder / "memory.swap.max").exists():
                    write_cgroup(folder / "memory.swap.max", "0")
            if limits.cpu_milli:
                write_cgroup(folder / "cpu.max", f"{_quota(limits.cpu_milli)} {CPU_PERIOD}")
            if limits.pids and "processes" in self.enforces():
                write_cgroup(folder / "pids.max", str(limits.pids))
            return
        memory, cpu, pids = (group._in(c) for c in ("memory", "cpu", "pids"))
        if memory is not None and limits.memory:
            write_cgroup(memory / "memory.limit_in_bytes", str(limits.memory))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():  # memory and swap together: no swap beyond the memory
                write_cgroup(swap, str(limits.memory))
        if cpu is not None and limits.cpu_milli:
            write_cgroup(cpu / "cpu.cfs_period_us", str(CPU_PERIOD))
            write_cgroup(cpu / "cpu.cfs_quota_us", str(_quota(limits.cpu_milli)))
        if pids is not None and limits.pids:
            write_cgroup(pids / "pids.max", str(limits.pids))

    def _pin(self, group: WorkerGroup, cpus: str) -> None:
        folder = group._in("cpuset") if self.version == 1 else group.folders[0]
        if folder is None or self.cpuset is None:
            return
        if self.version == 1:  # a v1 cpuset takes no process until it has memory nodes
            write_cgroup(
                folder / "cpuset.mems", (_read(self.cpuset / "cpuset.mems") or "0").strip()
            )
        write_cgroup(folder / "cpuset.cpus", cpus)


def _children(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir()]
    except OSError:
        return []


def cpu_list(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}."""
    found: set[int] = set()
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        if first.strip().isdigit():
            end = last.strip() if last.strip().isdigit() else first.strip()
            found.update(range(int(first), int(end) + 1))
    return found


def cpu_text(cores: list[int]) -> str:
    """{4, 5, 6, 7, 9} -> ``4-7,9``."""
    parts: list[str] = []
    for core in sorted(cores):
        if parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == core - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{core}"
        elif parts and "-" not in parts[-1] and int(parts[-1]) == core - 1:
            parts[-1] = f"{parts[-1]}-{core}"
        else:
            parts.append(str(core))
    return ",".join(parts)


def _quota(cpu_milli: int) -> int:
    """Microseconds of CPU per period for ``cpu_milli`` thousandths of a core (1 ms at least)."""
    return max(1000, cpu_milli * CPU_PERIOD // 1000)


@dataclass(frozen=True)
class Detected:
    """What this machine's cgroups allow: the place to make workers' groups, or why none."""

    cgroups: Cgroups | None
    why_not: str = ""


def detect(instance: str, root: Path = ROOT, cpuset: bool = False) -> Detected:
    """The cgroups the executor can make workers' groups in, for daemon ``instance``;
    ``cpuset``: with the cpuset controller too, to pin workers to cores."""
    if os.geteuid() != 0 and root == ROOT:
        return Detected(None, "the daemon does not run as root")
    if (root / "cgroup.controllers").exists():
        return _v2(instance, root, cpuset)
    if (root / "memory" / "memory.limit_in_bytes").exists():
        return _v1(instance, root, cpuset)
    return Detected(None, f"no cgroup v1 or v2 hierarchy at {root}")


def _v2(instance: str, root: Path, cpuset: bool = False) -> Detected:
    available = set((_read(root / "cgroup.controllers") or "").split())
    wanted = [c for c in ("memory", "cpu", "pids", *(("cpuset",) if cpuset else ()))
              if c in available]  # fmt: skip
    folders = [root / V2_SLICE, root / V2_SLICE / (instance or "default")]
    try:
        parent = root
        for folder in folders:
            folder.mkdir(exist_ok=True)
            _enable(parent, wanted)
            parent = folder
        _enable(parent, wanted)
    except OSError as exc:
        return Detected(None, f"cannot write cgroup v2 at {root}: {exc.strerror or exc}")
    pinning = folders[-1] if cpuset and "cpuset" in wanted else None
    return Detected(Cgroups(2, (folders[-1],), cpuset=pinning))


def _enable(folder: Path, controllers: Sequence[str]) -> None:
    """The controllers given to ``folder``'s children (``cgroup.subtree_control``)."""
    text = _read(folder / "cgroup.subtree_control") or ""
    enabled = {word.lstrip("+") for word in text.split()}
    missing = [c for c in controllers if c not in enabled]
    if missing:
        write_cgroup(folder / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))


def _v1(instance: str, root: Path, cpuset: bool = False) -> Detected:
    parents, controllers = [], []
    for controller in V1_CONTROLLERS:
        mount = root / controller
        if not mount.is_dir():
            if controller == "memory":
                return Detected(None, f"no memory hierarchy at {mount}")
            continue
        folder = mount / V1_PARENT / (instance or "default")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if controller == "memory":
                return Detected(None, f"cannot write cgroup v1 at {mount}: {exc.strerror}")
            continue
        if controller == "memory":
            with contextlib.suppress(OSError):  # children counted in their parents' use
                write_cgroup(folder.parent / "memory.use_hierarchy", "1")
        parents.append(folder)
        controllers.append(controller)
    pinning = _v1_cpuset(root / "cpuset", instance) if cpuset else None
    return Detected(Cgroups(1, tuple(parents), tuple(controllers), pinning))


def _v1_cpuset(mount: Path, instance: str) -> Path | None:
    """The v1 cpuset folder for pinned workers, its cores and memory nodes its parent's
    (a v1 cpuset starts with none); None where it cannot be made."""
    if not (mount / "cpuset.cpus").exists():
        return None
    folder = mount / V1_PARENT / (instance or "default")
    try:
        for made in (folder.parent, folder):
            made.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if not (_read(made / name) or "").strip():
                    write_cgroup(made / name, (_read(made.parent / name) or "").strip())
    except OSError:
        return None
    return folder


def probe(root: Path = ROOT) -> tuple[str, str]:
    """What ``astra doctor`` says of this machine's cgroups, writing nothing: ``("ok",
    "cgroup v1: …")``, or ``("warn", why asks would not be enforced)``."""
    if (root / "cgroup.controllers").exists():
        version, where = 2, root
        available = set((_read(root / "cgroup.controllers") or "").split())
        controllers = [n for n, c in (("memory", "memory"), ("CPU", "cpu"),
                                      ("processes", "pids")) if c in available]  # fmt: skip
    elif (root / "memory" / "memory.limit_in_bytes").exists():
        version, where = 1, root / "memory"
        controllers = [n for n, c in (("memory", "memory"), ("CPU", "cpu"),
                                      ("processes", "pids")) if (root / c).is_dir()]  # fmt: skip
    else:
        return "warn", f"no cgroup v1 or v2 hierarchy at {root}: memory and CPU asks not enforced"
    if os.geteuid() != 0 or not os.access(where, os.W_OK):
        return "warn", (f"cgroup v{version} at {where} is not writable here: memory and CPU asks"
                        " not enforced (the daemon must run as root)")  # fmt: skip
    return "ok", f"cgroup v{version}: {', '.join(controllers)} enforced for local runs"
