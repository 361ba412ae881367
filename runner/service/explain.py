"""Why a run waits and what a submit would do: the planner asked again over the store's
state, for one caller (``astra why``, ``astra run --dry-run``). The API only translates
(runner/api/why.py): it adds to a waiting run's answer the start estimate published with
the plan (runner/engine/published.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.clock import iso
from runner.engine.backend import Backend
from runner.engine.dependencies import WAITS_FOR, check_dependencies
from runner.engine.drain import Drain, draining_reason, explained
from runner.engine.holds import begin_reason, kept_out
from runner.engine.learned import Forecaster
from runner.engine.revocation import revoked
from runner.engine.settings import LoopSettings
from runner.engine.snapshot import snapshot_and_owners, snapshot_now, waiting_run
from runner.model import RunState
from runner.planner.estimates import Estimate, estimate_starts, estimate_steps
from runner.planner.plan import Snapshot, plan
from runner.planner.why import as_json, explain
from runner.reasons import ANONYMOUS_RUN, Reason, ReasonCode, RunRef, held_reason
from runner.service.runs import Caller, Service, ServiceError

__all__ = ["Explainer", "Why", "estimate_json"]


@dataclass(frozen=True, slots=True)
class Why:
    """``astra why``'s answer. ``workspaces``: the runs its estimate may name, by name,
    when it waits in the order (the estimate is then the published one's); else None
    and ``body`` is whole."""

    body: dict[str, Any]
    workspaces: dict[str, str] | None = None


def estimate_json(estimate: Estimate | None, workspaces: dict[str, str], caller: Caller) -> Any:
    """An estimate as ``caller`` may read it: another workspace's runs are not named."""
    if estimate is None:
        return {"starts_by": None, "after": []}
    after = [
        n if caller.viewer.sees(workspaces.get(n, "")) else ANONYMOUS_RUN for n in estimate.after
    ]
    out: dict[str, Any] = {"starts_by": iso(estimate.starts_by), "after": after}
    if estimate.likely is not None:  # forecasts from learned lengths, once there are some
        out |= {"likely": iso(estimate.likely), "likely_90": iso(estimate.likely_by),
                "learned_from": estimate.learned_from}  # fmt: skip
    elif estimate.forecast_needs:  # no history yet
        out |= {"learned_from": estimate.learned_from, "forecast_needs": estimate.forecast_needs}
    return out


class Explainer:
    """The explanations, given the run service, the back end and the loop's settings."""

    def __init__(
        self, service: Service, backend: Backend, settings: LoopSettings,
        forecaster: Forecaster | None = None,
    ) -> None:  # fmt: skip
        self.service = service
        self.backend = backend
        self.settings = settings
        self.forecaster = forecaster  # the loop's: a preview's forecast (None: none)

    def snapshot(self) -> Snapshot:
        """The planner's view of the store right now (the loop's own builder)."""
        backend = self.backend
        return snapshot_now(self.service.store, self.settings, backend.specs, backend.clock.now())

    def why(self, caller: Caller, name: str) -> Why:
        """Why ``name`` waits, as ``caller`` may read it (``astra why``)."""
        service, backend = self.service, self.backend
        run = service.get_run(caller, name)
        deps = check_dependencies([run], backend.specs.shown, service.run_states)
        waiting = {**deps.waiting, **revoked([run], self.settings.authorise)}
        kept = kept_out([run], backend.specs.shown, backend.clock.now())
        waiting |= kept.reasons  # held, before its begin time, or backing off
        if name in waiting:  # out of the order until then: nothing to re-plan
            return Why({
                "run": name, "reason": waiting[name].render(caller.viewer),
                "chain": ["Out of the queue's order while this lasts: it holds nothing back "
                          "and is never the head."],
                "levers": [], "estimate": None,
            })  # fmt: skip
        if not backend.capabilities.plans_locally:  # Slurm decides: its reason, no levers
            return Why(_slurm_why(backend, name, run.state, caller))
        drain = Drain.of(service.store.drains.all())
        if drain.machine is not None and run.state == RunState.QUEUED:  # nothing is planned
            return Why({
                "run": name, "reason": draining_reason(drain).render(caller.viewer),
                "chain": ["Nothing new starts until an admin resumes the machine "
                          "(astra admin resume); running work finishes."],
                "levers": [], "preemption": None, "estimate": None,
            })  # fmt: skip
        snapshot, now = self.snapshot(), backend.clock()
        # a workspace gone from the config: the default cap
        workspace = service.config.workspaces.get(run.workspace)
        cap = workspace.max_priority if workspace is not None else 0
        answer = explain(snapshot, now, name, caller.viewer, cap, drain.drained_gpus)
        if answer is None:
            state = run.state.lower()
            return Why({"run": name, "reason": f"It is {state}, not waiting.", "chain": [],
                        "levers": [], "preemption": None, "estimate": None})  # fmt: skip
        body = as_json(answer)
        if run.reason is not None and run.reason.code is ReasonCode.DRAINING:  # GPUs drained
            body["reason"] = run.reason.render(caller.viewer)
        ws = {w.name: w.workspace for w in snapshot.waiting} | {
            u.run: u.workspace for u in snapshot.running
        }
        return Why(body, ws)  # its estimate: the one published with the plan

    def preview(self, document: object, caller: Caller) -> dict[str, Any]:
        """What a submit of ``document`` would do: position, start, victims, refusals, its
        estimate. Writes nothing."""
        service, backend = self.service, self.backend
        spec, workspace = service.check(document, caller)
        if service.run_now(spec.name) is not None:
            raise ServiceError(409, "NAME_IN_USE", f"a run named {spec.name} exists")
        if not backend.capabilities.plans_locally:
            raise ServiceError(
                501, "NOT_AVAILABLE",
                "this daemon is a front for Slurm, which plans the queue: the checks passed, "
                "but where the run would go only Slurm can say (sbatch --test-only)",
            )  # fmt: skip
        now = backend.clock()
        states = service.run_states(spec.after)
        unmet = [n for n in spec.after if states.get(n, ("", ""))[0] != RunState.SUCCEEDED]
        kept = None  # held, or before its begin time: the reason a submit would write
        if spec.begin_at is not None and spec.begin_at > now:
            kept = begin_reason(spec.begin_at)
        if spec.hold:
            kept = held_reason(caller.user)
        if kept is not None or unmet:  # it would wait out of the order: nothing to place
            why = kept or Reason.of(
                WAITS_FOR, RunRef(unmet[0], states[unmet[0]][1]), code=ReasonCode.MESSAGE
            )
            return {
                "name": spec.name, "workspace": workspace, "priority": spec.priority,
                "position": None, "queue_length": len(self.snapshot().waiting),
                "starts_now": False, "backfill": False, "gpus": [], "preempts": [],
                "reason": why.render(caller.viewer), "reason_code": why.code,
                "estimate": {"starts_by": None, "after": []},
            }  # fmt: skip
        machine = self.settings.machine
        new = waiting_run(spec, None, machine, tuple(range(spec.workers)), workspace=workspace,
                          submitted_at=now)  # fmt: skip
        backend_now = backend.clock.now()
        base, owners = snapshot_and_owners(service.store, self.settings, backend.specs, backend_now)
        drain = Drain.of(service.store.drains.all())
        if drain.machine is not None:  # nothing starts: no place in an order
            return {
                "name": spec.name, "workspace": workspace, "priority": spec.priority,
                "position": None, "queue_length": 0, "starts_now": False, "backfill": False,
                "gpus": [], "preempts": [], "reason": draining_reason(drain).render(caller.viewer),
                "reason_code": draining_reason(drain).code,
                "estimate": {"starts_by": None, "after": []},
            }  # fmt: skip
        snapshot = Snapshot(base.machine, base.workspaces, base.running, (*base.waiting, new))
        full = Snapshot(self.settings.machine, base.workspaces, (), snapshot.waiting)
        result = explained(plan(snapshot, now), full, drain)  # the GPUs drained say so
        ws = {w.name: w.workspace for w in snapshot.waiting} | {
            u.run: u.workspace for u in snapshot.running
        }
        start = next((s for s in result.starts if s.run == spec.name), None)
        victims = sorted({p.run if caller.viewer.sees(p.workspace) else ANONYMOUS_RUN
                          for p in result.preemptions if p.for_run.name == spec.name})  # fmt: skip
        steps = estimate_steps(backend.status.last_plan_ms)
        estimates = estimate_starts(snapshot, now, steps)
        if self.forecaster is not None:  # the likely start, from the lengths of finished runs
            owner = {**owners, spec.name: caller.user}.get
            estimates = self.forecaster.estimates(
                snapshot, now, estimates, lambda n: owner(n, ""), steps, record=False
            )
        estimate = estimates.get(spec.name)
        return {
            "name": spec.name, "workspace": workspace, "priority": spec.priority,
            "position": result.order.index(spec.name) + 1, "queue_length": len(result.order),
            "starts_now": start is not None, "backfill": bool(start and start.backfill),
            "gpus": [g for w in start.gpus for g in w] if start else [],
            "preempts": victims, "reason": result.reason(spec.name, caller.viewer),
            "reason_code": None if (r := result.reasons.get(spec.name)) is None else r.code,
            "estimate": estimate_json(estimate, ws, caller),
            # a shared request: its memory on each of its GPUs (absent for whole GPUs)
            **({"gpu_memory_bytes": new.gpu_share} if new.gpu_share else {}),
        }  # fmt: skip


def _slurm_why(front: Backend, name: str, state: str, caller: Caller) -> dict[str, Any]:
    plan = front.status.plan
    if state != RunState.QUEUED or plan is None:
        return {"run": name, "reason": f"It is {state.lower()}, not waiting.", "chain": [],
                "levers": [], "preemption": None, "estimate": None}  # fmt: skip
    reason = plan.reason(name, caller.viewer) or "Submitted to Slurm"
    position = plan.positions.get(name)
    chain = [f"Position {position} of {len(plan.order)} in Slurm's order (its priority)."]
    if position is None:
        chain = ["Not in Slurm's queue yet."]
    estimate = front.status.published.estimates.get(name)  # squeue --start's
    return {
        "run": name, "reason": reason, "chain": chain,
        "levers": ["Slurm plans this queue: levers are computed by the built-in planner only."],
        "preemption": None,
        "estimate": {"starts_by": iso(estimate.starts_by if estimate else None), "after": []},
    }  # fmt: skip
