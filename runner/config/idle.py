"""``[machine]``'s idle-GPU keys: when a run holding GPUs that do nothing is idle, and
what then happens to it.

``idle_gpu_after = "30m"`` (a duration with its unit: ``"2s"``, ``"45m"``, ``"2h"``; ``"off"``
or 0 turns the rule off): a run whose GPUs stay at or under ``idle_gpu_threshold`` percent
utilisation (default 5) for that long is idle. ``idle_gpu_policy`` says what follows:
``"warn"`` (the default) an event and the ``idle`` mark, ``"stop"`` the same and the run
stopped with the grace (docs/scheduling.md, "Idle GPUs").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from runner.config.checks import _duration_or_off, _Invalid, _number, _show, _Table

__all__ = ["IDLE_DEFAULTS", "IDLE_KEYS", "IdleConfig", "IdlePolicy", "parse_idle"]

IDLE_KEYS = ("idle_gpu_after", "idle_gpu_threshold", "idle_gpu_policy")
DEFAULT_IDLE_AFTER = 1800.0  # seconds: half an hour at ~0 % is idle
DEFAULT_IDLE_THRESHOLD = 5.0  # percent utilisation, at or under which a GPU does nothing
MAX_IDLE_AFTER = 30 * 86_400.0


class IdlePolicy(StrEnum):
    """What happens to a run whose GPUs are idle: an event and a mark, or a stop too."""

    WARN = "warn"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class IdleConfig:
    """``after``: seconds at or under ``threshold`` % before a run is idle; None: off."""

    after: float | None = DEFAULT_IDLE_AFTER
    threshold: float = DEFAULT_IDLE_THRESHOLD
    policy: IdlePolicy = IdlePolicy.WARN


IDLE_DEFAULTS = IdleConfig()


def _after(value: object) -> float | None:
    return _duration_or_off(value, "machine.idle_gpu_after", '"30m", "2h" or "90s"', MAX_IDLE_AFTER)


def parse_idle(machine: _Table) -> IdleConfig:
    """The idle-GPU keys of the ``[machine]`` table (its keys already checked)."""
    threshold = machine.get("idle_gpu_threshold", DEFAULT_IDLE_THRESHOLD)
    if not _number(threshold) or not 0 <= threshold < 100:
        raise _Invalid(
            "machine.idle_gpu_threshold",
            f"must be a percentage from 0 to under 100, got {_show(threshold)}",
        )
    policy = machine.get("idle_gpu_policy", IdlePolicy.WARN.value)
    if policy not in tuple(IdlePolicy):
        raise _Invalid("machine.idle_gpu_policy", f'must be "warn" or "stop", got {_show(policy)}')
    after = _after(machine.get("idle_gpu_after", "30m"))
    return IdleConfig(after, float(threshold), IdlePolicy(str(policy)))
