"""A worker's CPU and memory: from its cgroup where it has one (the process executor's:
runner/executors/cgroups.py; exact and one read each), else psutil over its process tree
(its root and every descendant).

A cgroup's CPU percent is the CPU time its processes used between two samples over the
time between them (its first sample counts 0 %); its memory is what its limit counts.

CPU percent is measured between two samples: a :class:`TreeMeter` keeps each process's
``psutil.Process`` from one sample to the next (a pid is kept with its start time, so a
recycled pid is a new process); a process first seen counts 0 % this once. The trees
are read from one pass over ``/proc`` per sample (runner/executors/tree.py's stat).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from runner.executors.cgroupfs import WorkerGroup
from runner.executors.tree import read_stat

MAX_TREE = 4096  # processes measured in one worker's tree, at most


@dataclass(frozen=True, slots=True)
class TreeUsage:
    cpu_percent: float  # 100 = one core
    memory_bytes: int  # resident set size, summed over the tree
    pids: frozenset[int]


def children_map() -> dict[int, list[int]]:
    """Parent pid -> its children's pids, read once from ``/proc`` for every tree."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            seen = read_stat(entry)
            if seen is not None and seen.state not in "ZX":
                children.setdefault(seen.ppid, []).append(seen.pid)
    return children


def tree_of(root: int, children: dict[int, list[int]]) -> list[int]:
    """``root`` and its descendants, parents first, at most MAX_TREE."""
    found, queue = [root], [root]
    while queue and len(found) < MAX_TREE:
        for child in children.get(queue.pop(), ()):
            if len(found) < MAX_TREE:
                found.append(child)
                queue.append(child)
    return found


class TreeMeter:
    """Measures process trees; keeps what it needs for CPU percent between calls."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], psutil.Process] = {}
        self._cpu: dict[str, tuple[float, float]] = {}  # a cgroup: (CPU seconds, when)

    def measure(
        self, roots: dict[str, int], groups: dict[str, WorkerGroup] | None = None
    ) -> dict[str, TreeUsage]:
        """Each key's cgroup, or else its tree (root pid), measured; one that is gone is
        left out."""
        found: dict[str, TreeUsage] = {}
        seen: dict[tuple[int, int], psutil.Process] = {}
        groups = groups or {}
        trees = {k: r for k, r in roots.items() if k not in groups}
        children = children_map() if trees else {}
        for key, root in trees.items():
            usage = self._one(tree_of(root, children), seen)
            if usage is not None:
                found[key] = usage
        self._known = seen
        cpu: dict[str, tuple[float, float]] = {}
        for key, group in groups.items():
            usage = self._group(group, cpu)
            if usage is not None:
                found[key] = usage
        self._cpu = cpu
        return found

    def _group(self, group: WorkerGroup, cpu: dict[str, tuple[float, float]]) -> TreeUsage | None:
        used, memory, pids = group.cpu_seconds(), group.memory_now(), group.pids()
        if used is None or memory is None:
            return None  # removed: the worker has ended
        now, name = time.monotonic(), str(group.folders[0])
        cpu[name] = (used, now)
        before = self._cpu.get(name)
        percent = 0.0
        if before is not None and now > before[1]:
            percent = max(0.0, (used - before[0]) / (now - before[1]) * 100)
        return TreeUsage(round(percent, 1), memory, frozenset(pids))

    def _one(
        self, tree: list[int], seen: dict[tuple[int, int], psutil.Process]
    ) -> TreeUsage | None:
        cpu, memory, pids = 0.0, 0, set()
        for pid in tree:
            stat = read_stat(pid)
            if stat is None or stat.state in "ZX":
                if pid == tree[0]:
                    return None  # the root is gone
                continue
            key = (pid, stat.start)
            try:
                kept = self._known.get(key)
                if kept is None:
                    kept = psutil.Process(pid)
                    kept.cpu_percent(None)  # the first call starts the count: 0.0
                else:
                    cpu += kept.cpu_percent(None)
                memory += kept.memory_info().rss
            except (psutil.Error, OSError):
                continue
            seen[key] = kept
            pids.add(pid)
        return TreeUsage(round(cpu, 1), memory, frozenset(pids))
