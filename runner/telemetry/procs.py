"""A worker's CPU and memory: psutil over its process tree (its root and every
descendant).

CPU percent is measured between two samples: a :class:`TreeMeter` keeps each process's
``psutil.Process`` from one sample to the next (a pid is kept with its start time, so a
recycled pid is a new process); a process first seen counts 0 % this once. The trees
are read from one pass over ``/proc`` per sample (runner/executors/tree.py's stat).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

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

    def measure(self, roots: dict[str, int]) -> dict[str, TreeUsage]:
        """Each key's tree (root pid) measured; a root that is gone is left out."""
        found: dict[str, TreeUsage] = {}
        seen: dict[tuple[int, int], psutil.Process] = {}
        children = children_map() if roots else {}
        for key, root in roots.items():
            usage = self._one(tree_of(root, children), seen)
            if usage is not None:
                found[key] = usage
        self._known = seen
        return found

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
