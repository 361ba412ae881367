"""A run's logs read for a follower (``astra logs``, ``GET /v1/runs/{name}/logs``): the
last N lines across its attempts' files, and what is new since, in bounded chunks; and
the last bytes of a terminal's log (what an attach to an ended terminal is shown).

The files are the back end's for the run's id (never a path a member chose); who may
read them is decided before (runner/service/reads.py, ``LOGS_PRIVATE``). A position
counts every byte the worker wrote, also those a ``log_limit`` cut since
(runner/executors/logcap.py): a follower goes on where it was across a cut.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.engine.retention import ATTEMPT_LOGS_KEPT
from runner.executors.logcap import log_attempt, read_cut

LOG_CHUNK = 1 << 20  # bytes read and sent at a time: a huge log never sits in memory


def not_kept(paths: list[Path]) -> bytes:
    """A line said before the logs (``<attempt>-<worker>.log``) when a worker's oldest
    attempts' were removed, as a run keeps only its newest ATTEMPT_LOGS_KEPT
    (runner/engine/retention.py); empty when every attempt's is there."""
    first: dict[int, int] = {}  # worker -> its oldest attempt with a log
    for path in paths:
        if (found := log_attempt(path.name)) is not None:
            a, w = found
            first[w] = min(a, first.get(w, a))
    lines = []
    for worker, oldest in sorted(first.items()):
        if oldest > 1:
            which = "attempt 1" if oldest == 2 else f"attempts 1-{oldest - 1}"
            whose = f"worker {worker}'s " if len(first) > 1 else ""
            lines.append(
                f"[astraeus: {whose}output of {which} not kept: a run keeps its newest "
                f"{ATTEMPT_LOGS_KEPT} attempts']\n"
            )
    return "".join(lines).encode()


def tail_start(paths: list[Path], lines: int) -> dict[Path, int]:
    """Positions (see :func:`read_new`) from which the files, read in order, hold their
    last ``lines`` lines."""
    return {path: _position(path, at) for path, at in _tail_offsets(paths, lines).items()}


def _position(path: Path, offset: int) -> int:
    """The position in everything the worker wrote of byte ``offset`` of the file."""
    with path.open("rb") as f:
        cut, header = read_cut(f)
    return 0 if offset < header else cut + offset - header


def _tail_offsets(paths: list[Path], lines: int) -> dict[Path, int]:
    offsets = {p: p.stat().st_size for p in paths}
    wanted = lines + 1  # the newline before the first line shown
    for path in reversed(paths):
        with path.open("rb") as f:
            pos = offsets[path]
            while pos > 0 and wanted > 0:
                step = min(LOG_CHUNK, pos)
                f.seek(pos - step)
                block = f.read(step)
                count = block.count(b"\n")
                if count >= wanted:
                    cut = len(block)
                    for _ in range(wanted):
                        cut = block.rindex(b"\n", 0, cut)
                    offsets[path] = pos - step + cut + 1
                    return offsets
                wanted -= count
                pos -= step
            offsets[path] = 0
    return offsets


def read_new(paths: list[Path], positions: dict[Path, int]) -> bytes:
    """At most LOG_CHUNK new bytes, oldest file first.

    ``positions`` count every byte the worker wrote, also those a ``log_limit`` cut
    since (runner.executors.logcap): so a follower goes on where it was across a cut,
    and one that fell behind the cut gets the file from its cut line on.
    """
    for path in paths:
        with path.open("rb") as f:
            cut, header = read_cut(f)
            seen = positions.get(path, 0)
            f.seek(header + seen - cut if seen >= cut and seen > 0 else 0)
            data = f.read(LOG_CHUNK)
            positions[path] = cut + max(0, f.tell() - header)
        if data:
            return data
    return b""


def last_bytes(paths: list[Path], size: int) -> bytes:
    """The last ``size`` bytes of the latest file (of an attempt's logs: the newest)."""
    if not paths:
        return b""
    with paths[-1].open("rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(log.tell() - size, 0))
        return log.read()
