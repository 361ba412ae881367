"""A worker's CPU and memory: psutil over its process tree (its root and every
descendant).

CPU percent is measured between two samples: a :class:`TreeMeter` keeps each process's
``psutil.Process`` from one sample to the next (a pid is kept with its start time, so a
recycled pid is a new process); a process first seen counts 0 % this once.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

MAX_TREE = 4096  # processes measured in one worker's tree, at most


@dataclass(frozen=True, slots=True)
class TreeUsage:
    cpu_percent: float  # 100 = one core
    memory_bytes: int  # resident set size, summed over the tree
    pids: frozenset[int]


class TreeMeter:
    """Measures process trees; keeps what it needs for CPU percent between calls."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, float], psutil.Process] = {}

    def measure(self, roots: dict[str, int]) -> dict[str, TreeUsage]:
        """Each key's tree (root pid) measured; a root that is gone is left out."""
        found: dict[str, TreeUsage] = {}
        seen: dict[tuple[int, float], psutil.Process] = {}
        for key, root in roots.items():
            usage = self._one(root, seen)
            if usage is not None:
                found[key] = usage
        self._known = seen
        return found

    def _one(self, root: int, seen: dict[tuple[int, float], psutil.Process]) -> TreeUsage | None:
        try:
            top = psutil.Process(root)
            tree = [top, *top.children(recursive=True)[: MAX_TREE - 1]]
        except (psutil.Error, OSError):
            return None
        cpu, memory, pids = 0.0, 0, set()
        for process in tree:
            try:
                key = (process.pid, process.create_time())
                kept = self._known.get(key)
                if kept is None:
                    process.cpu_percent(None)  # the first call starts the count: 0.0
                    kept = process
                else:
                    cpu += kept.cpu_percent(None)
                memory += kept.memory_info().rss
            except (psutil.Error, OSError):
                continue
            seen[key] = kept
            pids.add(process.pid)
        return TreeUsage(round(cpu, 1), memory, frozenset(pids))
