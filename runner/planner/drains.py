"""Drains applied to the planner's input: fewer GPUs, or nothing to start at all.

An admin drains the whole machine (start nothing new; running work finishes) or some
GPUs (kept out of every plan, for a failing GPU; work running on them finishes). The
planner is not told: the snapshot it is given lacks the drained GPUs (a running unit on
one counts only its other GPUs and their memory), and while the whole machine drains it
sees no waiting run. The waiting runs' reasons then say so: ``Waits: the machine is draining (…)``.

Pure, as the rest of the planner: the loop gives it the store's drains
(runner/engine/drain.py), ``astra plan FILE`` the daemon's (``GET /v1/drain``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runner.planner.plan import Plan, RunningUnit, Snapshot
from runner.reasons import Reason, ReasonCode


class Drained(Protocol):
    """One drain: the whole machine's (``gpu`` None) or one GPU's, and its reason."""

    @property
    def gpu(self) -> int | None: ...

    @property
    def reason(self) -> str: ...


@dataclass(frozen=True)
class DrainedAs:
    """A drain as the API reads it back (``GET /v1/drain``)."""

    gpu: int | None
    reason: str


DRAINING = "Waits: the machine is draining ({reason})"


@dataclass(frozen=True)
class Drain:
    """The machine's drains now: the whole machine's, and each drained GPU's."""

    machine: Drained | None = None
    gpus: tuple[Drained, ...] = ()

    @staticmethod
    def of(rows: Sequence[Drained]) -> Drain:
        whole = next((r for r in rows if r.gpu is None), None)
        gpus = tuple(sorted((r for r in rows if r.gpu is not None), key=lambda r: r.gpu or 0))
        return Drain(whole, gpus)

    @property
    def drained_gpus(self) -> frozenset[int]:
        return frozenset(r.gpu for r in self.gpus if r.gpu is not None)

    def __bool__(self) -> bool:
        return self.machine is not None or bool(self.gpus)


NO_DRAIN = Drain()


def drained_snapshot(snapshot: Snapshot, drain: Drain) -> Snapshot:
    """What the planner is given while ``drain`` holds: ``snapshot`` without the drained
    GPUs, and without its waiting runs while the whole machine drains."""
    if not drain:
        return snapshot
    out = set(drain.drained_gpus)
    machine = snapshot.machine
    if out & set(machine.gpus):
        sizes = machine.sizes()  # each kept GPU keeps its memory
        kept = tuple(g for g in machine.gpus if g not in out)
        machine = dataclasses.replace(machine, gpus=kept, gpu_memory=tuple(sizes[g] for g in kept))
    whole = snapshot.machine.whole_gpu  # what a whole GPU counts as in its unit's ask
    running = tuple(_without(u, out, whole) if out & set(u.gpus) else u for u in snapshot.running)
    waiting = () if drain.machine is not None else snapshot.waiting
    return Snapshot(machine, snapshot.workspaces, running, waiting)


def _without(unit: RunningUnit, out: set[int], whole: int) -> RunningUnit:
    """``unit`` as the drained machine sees it: only its GPUs not drained, and only
    their memory (a drained GPU is not in the machine, so neither is what is on it)."""
    gone = sum(g in out for g in unit.gpus)
    held = unit.resources
    resources = dataclasses.replace(
        held,
        gpus=held.gpus if unit.gpu_share else held.gpus - gone,  # a shared unit holds none
        gpu_memory=max(0, held.gpu_memory - gone * (unit.gpu_share or whole)),
    )
    gpus = tuple(g for g in unit.gpus if g not in out)
    return dataclasses.replace(unit, gpus=gpus, resources=resources)


def draining_reason(drain: Drain) -> Reason:
    """Why a waiting run waits while the machine (or GPUs it needs) drains."""
    if drain.machine is not None:
        return Reason(DRAINING.format(reason=drain.machine.reason), code=ReasonCode.DRAINING)
    reasons = ", ".join(dict.fromkeys(r.reason for r in drain.gpus))
    shown = ", ".join(str(g) for g in sorted(drain.drained_gpus))
    text = DRAINING.format(reason=reasons) + f": GPU {shown} kept out of every plan"
    return Reason(text.replace("GPU ", "GPUs ", 1) if len(drain.gpus) > 1 else text,
                  code=ReasonCode.DRAINING)  # fmt: skip


def explained(result: Plan, full: Snapshot, drain: Drain) -> Plan:
    """The plan of a drained snapshot, each waiting run the drain holds back saying so.

    The whole machine draining: every waiting run of ``full`` (the snapshot before the
    drain). GPUs drained: the runs that cannot run now only for want of them (their
    ask is larger than the machine without them, not larger than the machine)."""
    if not drain:
        return result
    why = draining_reason(drain)
    if drain.machine is not None:
        return dataclasses.replace(result, reasons={w.name: why for w in full.waiting})
    capacity = full.machine.capacity()
    reasons = dict(result.reasons)
    for w in full.waiting:
        found = reasons.get(w.name)
        too_large = found is not None and found.code is ReasonCode.TOO_LARGE
        if too_large and w.worker.fits_in(capacity) and w.ask().fits_in(capacity):
            reasons[w.name] = why
    return dataclasses.replace(result, reasons=reasons)
