"""Runs that wait for others to succeed (``spec.after``, ``astra submit --after``).

A queued run whose dependencies have not all succeeded is kept out of the planner's
view: it is not in the order, is never the head and holds nothing back. Its reason
names the first run it still waits for. When a dependency fails, is cancelled or is
forgotten before it succeeded, the run can never start: it fails, saying which one.
Once all have succeeded the run is marked (``deps_met``) and they are not looked at
again: forgetting a succeeded run later changes nothing for those that waited for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from runner.model import RunSpec, RunState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import RunRow

_FAILED = ReasonCode.DEPENDENCY_FAILED

WAITS_FOR = "Waits for {0} to succeed"


@dataclass
class Dependencies:
    waiting: dict[str, Reason] = field(default_factory=dict)  # run -> why it waits
    failing: dict[str, Reason] = field(default_factory=dict)  # run -> why it fails
    met: list[str] = field(default_factory=list)  # runs whose dependencies all succeeded now

    def plannable(self, runs: list[RunRow]) -> list[RunRow]:
        """``runs`` without those held back here (waiting, or failing now)."""
        return [r for r in runs if r.name not in self.waiting and r.name not in self.failing]


def check_dependencies(
    runs: Iterable[RunRow],
    spec_of: Callable[[RunRow], RunSpec],
    states_of: Callable[[Iterable[str]], dict[str, tuple[str, str]]],
) -> Dependencies:
    """Which queued runs wait for others, and which can no longer start."""
    # once met, never again: a forgotten dependency, or a name used again, cannot undo it;
    # a run that has started before (a restart, a preemption) has had them met too
    queued = [
        (r, spec_of(r).after)
        for r in runs
        if r.state == RunState.QUEUED
        and not r.deps_met
        and r.attempts == 0
        and r.stop_request is None
    ]
    queued = [(r, after) for r, after in queued if after]
    out = Dependencies()
    if not queued:
        return out
    states = states_of({name for _, after in queued for name in after})
    for run, after in queued:
        if all(states.get(name, ("", ""))[0] == RunState.SUCCEEDED for name in after):
            out.met.append(run.name)
            continue
        for name in after:
            state, workspace = states.get(name, ("", run.workspace))
            if state == RunState.SUCCEEDED:
                continue
            ref = RunRef(name, workspace)
            if state in (RunState.FAILED, RunState.CANCELLED):
                how = "failed" if state == RunState.FAILED else "was cancelled"
                text = f"Dependency {{0}} {how}"
                out.failing[run.name] = Reason.of(text, ref, code=_FAILED)
            elif not state:
                out.failing[run.name] = Reason.of("Dependency {0} was deleted", ref, code=_FAILED)
            else:
                out.waiting[run.name] = Reason.of(WAITS_FOR, ref, code=ReasonCode.DEPENDENCY_WAIT)
            break
    return out
