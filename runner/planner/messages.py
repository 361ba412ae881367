"""The planner's messages: why the head waits, why runs wait behind it, quota and size."""

from __future__ import annotations

from collections.abc import Mapping

from runner.durations import utc_minute
from runner.model import (
    RESOURCE_NAMES,
    UNBOUNDED,
    Quota,
    Resources,
    format_amount,
    format_size,
    machine_amounts,
    quota_amounts,
)
from runner.planner.types import Head, RunningUnit, WaitingRun
from runner.reasons import Reason, ReasonCode, RunRef


def preempting_message(victims: list[RunningUnit], stopping_workers: int) -> Reason | None:
    if victims:
        runs: dict[str, RunRef] = {}
        for unit in victims:
            runs.setdefault(unit.run, RunRef(unit.run, unit.workspace))
        count = sum(unit.workers for unit in victims)
        text = f"Preempting {count} lower-priority worker(s) of {{0}} to start"
        return Reason.of(text, tuple(runs.values()), code=ReasonCode.PREEMPTING)
    if stopping_workers:
        text = f"Starting: waiting for {stopping_workers} preempted worker(s) to stop"
        return Reason(text, code=ReasonCode.STARTING)
    return None


def head_message(head: Head, victims: list[RunningUnit], stopping_workers: int) -> Reason:
    preempting = preempting_message(victims, stopping_workers)
    if preempting is not None:
        return preempting
    if head.shadow is None:
        text = f"Next to run (priority {head.priority}): waits for running work to end"
        return Reason(text, code=ReasonCode.HEAD_WAITS)
    return Reason(
        f"Next to run (priority {head.priority}): starts by "
        f"{utc_minute(head.shadow)} as running work ends.",
        code=ReasonCode.HEAD_WAITS,
    )


def behind_message(head: Head) -> Reason:
    ref = RunRef(head.run, head.workspace)
    if head.shadow is None:
        text = "Queued behind {0}, which waits for running work to end"
        return Reason.of(text, ref, code=ReasonCode.QUEUED_BEHIND)
    text = "Queued behind {0}, which starts by " + utc_minute(head.shadow)
    return Reason.of(text, ref, code=ReasonCode.QUEUED_BEHIND)


def quota_reason(
    used: Resources, ask: Resources, quota: Quota | None
) -> tuple[Reason, Reason] | None:
    """The quota message for ``ask`` on top of ``used`` and its ``QuotaReached`` event's
    message, or None when it fits."""
    if quota is None:
        return None
    if (used + ask).fits_in(as_room(quota)):
        return None
    for name, asked, limit in zip(RESOURCE_NAMES, quota_amounts(ask), quota.limits(), strict=True):
        if limit is not None and asked > limit:
            a, lim = format_amount(name, asked), format_amount(name, limit)
            text = (
                "Waits for more than the namespace's quota allows at all "
                f"({name} {a} > {lim}): raise the quota or ask for less."
            )
            event = quota_reached(f"{name} {a} asked > {lim} (more than the quota allows at all)")
            return Reason(text, code=ReasonCode.QUOTA_OVER), event
    rows = zip(RESOURCE_NAMES, quota_amounts(used), quota_amounts(ask), quota.limits(), strict=True)
    for name, in_use, asked, limit in rows:
        if limit is not None and in_use + asked > limit:
            u, a = format_amount(name, in_use), format_amount(name, asked)
            text = f"{name} {u} in use + {a} asked > {format_amount(name, limit)}"
            check = Reason(f"Waits for namespace quota: {text}", code=ReasonCode.QUOTA_WAIT)
            return check, quota_reached(text)
    return None


def quota_reached(text: str) -> Reason:
    """The message of a quota wait's first ``QuotaReached`` event: it names no run."""
    return Reason(f"Quota reached: {text}", code=ReasonCode.QUOTA_REACHED)


def as_room(quota: Quota) -> Resources:
    """The quota as an amount of room; an unset limit is unlimited."""
    gpus, cpu, memory, workers, gpu_memory = (
        UNBOUNDED if limit is None else limit for limit in quota.limits()
    )
    return Resources(UNBOUNDED, cpu, memory, workers, gpu_memory, held_gpus=gpus)


def too_large(ask: Resources, capacity: Resources) -> Reason | None:
    rows = zip(RESOURCE_NAMES, machine_amounts(ask), machine_amounts(capacity), strict=True)
    for name, asked, total in rows:
        if asked > total:
            a, t = format_amount(name, asked), format_amount(name, total)
            return Reason(
                f"Cannot run on this machine: asks for {name} {a}, the machine has {t} "
                "in all. Ask for less.",
                code=ReasonCode.TOO_LARGE,
            )
    return None


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def shared_head_message(head: Head, run: WaitingRun, most_free: int) -> Reason:
    """The head of a shared request: the memory it waits for, and when it starts."""
    text = (
        f"Next to run (priority {head.priority}): waits for GPU memory: needs "
        f"{format_size(run.gpu_share)} on {_gpus(run.gpu_count)}, the most free on one GPU"
        f" is {format_size(most_free)}"
    )
    if head.shadow is None:
        return Reason(f"{text}; starts as running work ends", code=ReasonCode.GPU_MEMORY_WAIT)
    text += f"; starts by {utc_minute(head.shadow)} as running work ends."
    return Reason(text, code=ReasonCode.GPU_MEMORY_WAIT)


def too_large_shared(run: WaitingRun, sizes: Mapping[int, int]) -> Reason:
    big = sum(1 for n in sizes.values() if n >= run.gpu_share)
    each = "" if run.gpu_count == 1 else "each of "
    if big >= run.gpu_count:  # one worker fits: not all of them together
        return Reason(
            f"Cannot run on this machine: its {len(run.workers)} workers ask for"
            f" {format_size(run.gpu_share)} on {each}{_gpus(run.gpu_count)} each, more than"
            " the machine's GPUs hold together. Ask for less.",
            code=ReasonCode.TOO_LARGE,
        )
    has = "no GPU" if big == 0 else _gpus(big)
    return Reason(
        f"Cannot run on this machine: asks for {format_size(run.gpu_share)} on {each}"
        f"{_gpus(run.gpu_count)}, the machine has {has} that large. Ask for less.",
        code=ReasonCode.TOO_LARGE,
    )
