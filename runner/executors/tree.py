"""A worker's processes, read from ``/proc``: every descendant of its supervisor.

A process that calls ``setsid()`` or ``setpgid()`` leaves its worker's process group, and
one whose parent exits (a double fork) is reparented, so neither the group nor the
command's own children name everything a worker runs. Its supervisor is a child
subreaper (``PR_SET_CHILD_SUBREAPER``): orphans are reparented to it, never past it, so
"every descendant of the supervisor" is the whole worker, wherever a process moved.

The tree is built from the parent pid in each ``/proc/<pid>/stat``
(``/proc/<pid>/task/*/children`` is missing on kernels built without
``CONFIG_PROC_CHILDREN``). A process is named by its pid and start time, and signalled
through a pidfd opened before its start time is read again, so a pid recycled between
the walk and the signal never gets it.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

KILL_ROUNDS = 20  # walks of one kill_descendants: a round signals at least one new process


class Proc(NamedTuple):
    pid: int
    ppid: int
    pgid: int
    state: str  # R, S, D, Z, …: /proc/<pid>/stat's third field
    start: int  # clock ticks after boot: with the pid, names the process for good


def read_stat(pid: int | str) -> Proc | None:
    """``/proc/<pid>/stat`` of one process; None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces
    return Proc(int(pid), int(fields[1]), int(fields[2]), fields[0], int(fields[19]))


def cmdlines() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every process whose ``/proc/<pid>/cmdline`` can be read."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                raw = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            yield int(entry.name), raw.rstrip(b"\0").split(b"\0")


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of ``pid``, None when gone."""
    seen = read_stat(pid)
    return None if seen is None else (seen.state, seen.start)


def process_name(pid: int) -> str | None:
    """``/proc/<pid>/comm``: the program's name (15 characters at most); None when gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def is_alive(pid: object, start: object) -> bool:
    """Whether ``pid`` is still the process that started at ``start`` (not a zombie)."""
    if not isinstance(pid, int) or not isinstance(start, int):
        return False
    seen = read_stat(pid)
    return seen is not None and seen.state not in "ZX" and seen.start == start


def descendants(root: int) -> list[Proc]:
    """The live (not zombie) descendants of ``root``, parents before their children."""
    children: dict[int, list[Proc]] = {}
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit() and (seen := read_stat(entry.name)) is not None:
                children.setdefault(seen.ppid, []).append(seen)
    found: list[Proc] = []
    level = children.get(root, [])
    while level:
        found += level
        level = [c for p in level for c in children.get(p.pid, [])]
    return [p for p in found if p.state not in "ZX"]


def send(procs: Iterable[Proc], signum: int) -> list[str]:
    """Send ``signum`` once to each of ``procs`` still alive; what could not be signalled."""
    return [why for proc in procs if (why := _send(proc, signum)) is not None]


def signal_descendants(
    root: int, signum: int, spare: Collection[int] = (), skip_group: int | None = None
) -> list[str]:
    """Send ``signum`` once to every descendant of ``root`` but ``spare`` and the members
    of ``skip_group`` (signalled as a group already); what could not be signalled."""
    chosen = (p for p in descendants(root) if p.pid not in spare and p.pgid != skip_group)
    return send(chosen, signum)


def kill_descendants(root: int) -> tuple[bool, list[str]]:
    """SIGKILL every descendant of ``root``, walking again for any born meanwhile.

    Returns whether some of those it could signal are still alive (killed, not gone yet:
    the caller looks again later), and what it was not allowed to signal (a process that
    took other credentials, through a setuid program, say), which it leaves be.
    """
    tried: set[tuple[int, int]] = set()
    refused: dict[tuple[int, int], str] = {}
    for _ in range(KILL_ROUNDS):
        alive = [p for p in descendants(root) if (p.pid, p.start) not in refused]
        new = [p for p in alive if (p.pid, p.start) not in tried]
        if not new:
            return bool(alive), list(refused.values())
        for proc in new:
            tried.add((proc.pid, proc.start))
            if (why := _send(proc, signal.SIGKILL)) is not None:
                refused[proc.pid, proc.start] = why
    return True, list(refused.values())


def _send(proc: Proc, signum: int) -> str | None:
    """Signal ``proc`` if it is still that process; why not, when not allowed."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return None
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
        fd = -1  # a kernel before 5.3: no pidfds, so a recycled pid is merely unlikely
    try:
        now = read_stat(proc.pid)
        if now is not None and now.start == proc.start:
            if fd >= 0:
                signal.pidfd_send_signal(fd, signum)
            else:
                os.kill(proc.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        return f"pid {proc.pid}: {exc.strerror}"
    finally:
        if fd >= 0:
            os.close(fd)
    return None
