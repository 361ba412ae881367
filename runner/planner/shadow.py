"""Room over time: GPU indices, when running work ends, the head's shadow, victims."""

from __future__ import annotations

import math

from runner.model import Resources, amounts
from runner.planner.types import RunningUnit, WaitingRun

# ---------------------------------------------------------- GPU indices


def take_gpus(free: list[int], n: int) -> tuple[int, ...]:
    """Take ``n`` indices from the sorted ``free`` list (removed in place).

    Best fit: the smallest block of consecutive free GPUs that holds ``n``,
    so large runs later find whole blocks; when no block is big enough, the
    largest blocks first (fewest gaps).
    """
    if n == 0:
        return ()
    blocks: list[list[int]] = []
    for index in free:
        if blocks and blocks[-1][-1] + 1 == index:
            blocks[-1].append(index)
        else:
            blocks.append([index])
    fitting = [b for b in blocks if len(b) >= n]
    if fitting:
        chosen = min(fitting, key=lambda b: (len(b), b[0]))[:n]
    else:
        chosen = []
        for block in sorted(blocks, key=lambda b: (-len(b), b[0])):
            chosen.extend(block[: n - len(chosen)])
            if len(chosen) == n:
                break
    taken = set(chosen)
    free[:] = [i for i in free if i not in taken]
    return tuple(sorted(chosen))


# ----------------------------------------------------------- the head


def unit_end(unit: RunningUnit, grace: float) -> float:
    """When running work ends at the latest: its stop deadline, or limit plus grace."""
    if unit.stop_deadline is not None:
        return unit.stop_deadline
    if unit.time_limit is None:
        return math.inf
    return unit.started_at + unit.time_limit + grace


def replay_shadow(
    free: Resources, need: Resources, ends: list[tuple[float, Resources]], now: float
) -> tuple[float | None, Resources]:
    """Replay work ending, earliest first, until ``need`` fits.

    Returns the shadow time (None when it depends on work without a time
    limit) and the room the head does not need, per resource.
    """
    room = free
    shadow: float | None = None
    for end, freed in sorted(ends, key=lambda e: e[0]):
        if shadow is not None and end > shadow:
            break
        if math.isinf(end):
            break
        room = room + freed
        if shadow is None and need.fits_in(room):
            shadow = max(end, now)
    if shadow is None:
        room = free
    spare = room - need
    return shadow, Resources(*(max(0, x) for x in amounts(spare)))


def choose_victims(
    head: WaitingRun, room: Resources, candidates: list[RunningUnit]
) -> list[RunningUnit] | None:
    """The fewest lower-priority units whose stop lets ``head`` fit in ``room``.

    Lowest priority first, among equals the most recently started; then drop
    every victim not needed. None when even all of them would not do.
    """
    need = head.ask()
    order = sorted(candidates, key=lambda u: (u.priority, -u.started_at, u.unit_id))
    chosen: list[RunningUnit] = []
    for unit in order:
        if need.fits_in(room):
            break
        chosen.append(unit)
        room = room + unit.resources
    if not need.fits_in(room):
        return None
    for unit in list(chosen):
        if need.fits_in(room - unit.resources):
            chosen.remove(unit)
            room = room - unit.resources
    return chosen
