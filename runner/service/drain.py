"""Drain the machine, or some of its GPUs, and resume it (admins only).

Draining the whole machine starts nothing new and lets running work finish; draining
GPUs keeps them out of every plan (a failing GPU) while work on them finishes
(runner/engine/drain.py applies it). Each drain is stored with who drained it, when and
why (it survives a restart), and each drain and resume is an event (codes DRAINED and
UNDRAINED) of no run and no workspace: admins read them in the event log.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from runner.reasons import Reason, ReasonCode
from runner.rows import MACHINE, DrainRow
from runner.runspec.printable import check_line
from runner.service.caller import Caller, ServiceError, spec_errors
from runner.store.db import Store

MAX_REASON = 200  # characters of a drain's reason
MAX_GPUS = 1024  # GPUs named in one drain


def _admin(caller: Caller, what: str) -> None:
    if not caller.admin:
        raise ServiceError(403, "FORBIDDEN", f"only admins may {what} the machine")


def _targets(gpus: list[int] | None, machine_gpus: Collection[int]) -> list[str]:
    if gpus is None:
        return [MACHINE]
    if not gpus or len(gpus) > MAX_GPUS:
        raise ServiceError(422, "INVALID_SPEC", "gpus: name at least one of the machine's GPUs")
    for g in gpus:
        if not isinstance(g, int) or isinstance(g, bool) or g not in machine_gpus:
            shown = ", ".join(str(i) for i in sorted(machine_gpus)) or "none"
            raise ServiceError(
                422, "INVALID_SPEC", f"gpus: no GPU {g!r} on this machine (it has {shown})"
            )
    return [str(g) for g in sorted(set(gpus))]


def _what(targets: list[str]) -> str:
    if targets == [MACHINE]:
        return "the machine"
    return ("GPU " if len(targets) == 1 else "GPUs ") + ", ".join(targets)


def drain(
    store: Store, caller: Caller, reason: object, gpus: list[int] | None,
    machine_gpus: Collection[int], plans_locally: bool = True,
) -> list[DrainRow]:  # fmt: skip
    """Drain the machine (``gpus`` None) or those GPUs; the drains now. Only where the
    built-in planner plans: a front for Slurm leaves draining to Slurm."""
    _admin(caller, "drain")
    if not plans_locally:
        raise ServiceError(
            409, "NOT_SUPPORTED", "Slurm plans this queue: drain its nodes in Slurm"
            " (scontrol update nodename=… state=drain reason=…)",
        )  # fmt: skip
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        raise ServiceError(
            422, "INVALID_SPEC", f"reason: say why, in at most {MAX_REASON} characters"
        )
    with spec_errors():
        check_line(reason, "reason")
    targets = _targets(gpus, machine_gpus)
    reason, now = " ".join(reason.split()), time.time()
    with store.transaction() as tx:
        for target in targets:
            store.drains.set(tx, target, reason, caller.user, now)
        text = f"Drained {_what(targets)} ({reason}) by {caller.user}"
        message = Reason(text, code=ReasonCode.DRAINED)
        store.events.add(tx, "", "", ReasonCode.DRAINED, message, now)
    return store.drains.all()


def resume(
    store: Store, caller: Caller, gpus: list[int] | None, machine_gpus: Collection[int]
) -> list[DrainRow]:
    """Resume the machine and every GPU (``gpus`` None), or those GPUs; the drains now."""
    _admin(caller, "resume")
    if gpus is None:
        targets = [r.target for r in store.drains.all()]
    else:
        targets = _targets(gpus, set(machine_gpus) | {r.gpu for r in store.drains.all()
                                                       if r.gpu is not None})  # fmt: skip
    with store.transaction() as tx:
        cleared = [t for t in targets if store.drains.clear(tx, t)]
        if cleared:
            shown = "the machine" if gpus is None else _what(cleared)
            message = Reason(f"Resumed {shown} by {caller.user}", code=ReasonCode.UNDRAINED)
            store.events.add(tx, "", "", ReasonCode.UNDRAINED, message)
    return store.drains.all()
