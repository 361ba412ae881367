"""The API's explanations: why a run waits, start estimates, and submit previews."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from runner.api.context import daemon_of, peer_caller, read_document
from runner.api.views import iso
from runner.engine.dependencies import WAITS_FOR, check_dependencies
from runner.engine.drain import Drain, draining_reason, explained
from runner.engine.holds import begin_reason, held_reason, kept_out
from runner.engine.revocation import revoked
from runner.engine.snapshot import snapshot_now as build_snapshot_now
from runner.engine.snapshot import waiting_run
from runner.model import RunState
from runner.planner.estimates import Estimate, estimate_starts, estimate_steps
from runner.planner.plan import Snapshot, plan
from runner.planner.why import as_json, explain
from runner.reasons import ANONYMOUS_RUN, Reason, ReasonCode, RunRef
from runner.service.runs import Caller, ServiceError

if TYPE_CHECKING:
    from runner.api.served import Daemon
    from runner.engine.backend import Backend
    from runner.engine.published import Published

ESTIMATES_WAIT = 2.0  # seconds a request waits for the estimates of the plan it shows


def snapshot_now(daemon: Daemon) -> Snapshot:
    """The planner's view of the store right now (the loop's own builder)."""
    return build_snapshot_now(
        daemon.store, daemon.settings, daemon.backend.specs, daemon.backend.clock.now()
    )


async def published(daemon: Daemon, run: str | None = None) -> Published:
    """The plan and start estimates as the back end published them, once the estimates
    are the plan's own (runner/engine/published.py: a helper makes them after each plan);
    with ``run``, once that run is in the plan too (just submitted). At most
    ESTIMATES_WAIT seconds: then as they are."""
    status = daemon.backend.status
    deadline = time.monotonic() + ESTIMATES_WAIT
    while time.monotonic() < deadline:
        now = status.published
        if not status.estimating or (
            now.current and (run is None or (now.plan is not None and run in now.plan.positions))
        ):
            return now
        await asyncio.sleep(0.005)
    return status.published


def estimate_json(estimate: Estimate | None, snapshot_ws: dict[str, str], caller: Caller) -> Any:
    if estimate is None:
        return {"starts_by": None, "after": []}
    after = [
        n if caller.viewer.sees(snapshot_ws.get(n, "")) else ANONYMOUS_RUN for n in estimate.after
    ]
    return {"starts_by": iso(estimate.starts_by), "after": after}


async def why(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    run = daemon.service.get_run(caller, name)
    deps = check_dependencies([run], daemon.backend.specs.shown, daemon.service.run_states)
    waiting = {**deps.waiting, **revoked([run], daemon.settings.authorise)}
    kept = kept_out([run], daemon.backend.specs.shown, daemon.backend.clock.now())
    waiting |= kept.reasons  # held, before its begin time, or backing off
    if name in waiting:  # out of the order until then: nothing to re-plan
        return web.json_response({
            "run": name, "reason": waiting[name].render(caller.viewer),
            "chain": ["Out of the queue's order until then: it holds nothing back and is "
                      "never the head."],
            "levers": [], "estimate": None,
        })  # fmt: skip
    if not daemon.backend.capabilities.plans_locally:  # Slurm decides: its reason, no levers
        return web.json_response(_slurm_why(daemon.backend, name, run.state, caller))
    drain = Drain.of(daemon.store.drains())
    if drain.machine is not None and run.state == RunState.QUEUED:  # nothing is planned
        return web.json_response({
            "run": name, "reason": draining_reason(drain).render(caller.viewer),
            "chain": ["Nothing new starts until an admin resumes the machine "
                      "(astra admin resume); running work finishes."],
            "levers": [], "preemption": None, "estimate": None,
        })  # fmt: skip
    snapshot, now = snapshot_now(daemon), daemon.backend.clock()
    workspace = daemon.config.workspaces.get(run.workspace)  # gone from the config: the default cap
    cap = workspace.max_priority if workspace is not None else 0
    answer = explain(snapshot, now, name, caller.viewer, cap, drain.drained_gpus)
    if answer is None:
        state = run.state.lower()
        return web.json_response({"run": name, "reason": f"It is {state}, not waiting.",
                                  "chain": [], "levers": [], "preemption": None,
                                  "estimate": None})  # fmt: skip
    body = as_json(answer)
    if run.reason is not None and run.reason.code is ReasonCode.DRAINING:  # GPUs drained
        body["reason"] = run.reason.render(caller.viewer)
    ws = {w.name: w.workspace for w in snapshot.waiting} | {
        u.run: u.workspace for u in snapshot.running
    }
    estimates = (await published(daemon, name)).estimates
    body["estimate"] = estimate_json(estimates.get(name), ws, caller)
    return web.json_response(body)


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


async def preview(request: web.Request) -> web.Response:
    """What a submit would do: position, start, victims, refusals. Writes nothing."""
    daemon, caller = daemon_of(request), peer_caller(request)
    spec, workspace = daemon.service.check(await read_document(request), caller)
    if daemon.service.run_now(spec.name) is not None:
        raise ServiceError(409, "NAME_IN_USE", f"a run named {spec.name} exists")
    if not daemon.backend.capabilities.plans_locally:
        raise ServiceError(
            501, "NOT_AVAILABLE",
            "this daemon is a front for Slurm, which plans the queue: the checks passed, "
            "but where the run would go only Slurm can say (sbatch --test-only)",
        )  # fmt: skip
    now = daemon.backend.clock()
    states = daemon.service.run_states(spec.after)
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
        return web.json_response({
            "name": spec.name, "workspace": workspace, "priority": spec.priority,
            "position": None, "queue_length": len(snapshot_now(daemon).waiting),
            "starts_now": False, "backfill": False, "gpus": [], "preempts": [],
            "reason": why.render(caller.viewer), "reason_code": why.code,
            "estimate": {"starts_by": None, "after": []},
        })  # fmt: skip
    machine = daemon.settings.machine
    new = waiting_run(spec, None, machine, tuple(range(spec.workers)), workspace=workspace,
                      submitted_at=now)  # fmt: skip
    base, drain = snapshot_now(daemon), Drain.of(daemon.store.drains())
    if drain.machine is not None:  # nothing starts: no place in an order
        return web.json_response({
            "name": spec.name, "workspace": workspace, "priority": spec.priority,
            "position": None, "queue_length": 0, "starts_now": False, "backfill": False,
            "gpus": [], "preempts": [], "reason": draining_reason(drain).render(caller.viewer),
            "reason_code": draining_reason(drain).code,
            "estimate": {"starts_by": None, "after": []},
        })  # fmt: skip
    snapshot = Snapshot(base.machine, base.workspaces, base.running, (*base.waiting, new))
    full = Snapshot(daemon.settings.machine, base.workspaces, (), snapshot.waiting)
    result = explained(plan(snapshot, now), full, drain)  # the GPUs drained say so
    ws = {w.name: w.workspace for w in snapshot.waiting} | {
        u.run: u.workspace for u in snapshot.running
    }
    start = next((s for s in result.starts if s.run == spec.name), None)
    victims = sorted({p.run if caller.viewer.sees(p.workspace) else ANONYMOUS_RUN
                      for p in result.preemptions if p.for_run.name == spec.name})  # fmt: skip
    steps = estimate_steps(daemon.backend.status.last_plan_ms)
    estimate = estimate_starts(snapshot, now, steps).get(spec.name)
    return web.json_response({
        "name": spec.name, "workspace": workspace, "priority": spec.priority,
        "position": result.order.index(spec.name) + 1, "queue_length": len(result.order),
        "starts_now": start is not None, "backfill": bool(start and start.backfill),
        "gpus": [g for w in start.gpus for g in w] if start else [],
        "preempts": victims, "reason": result.reason(spec.name, caller.viewer),
        "reason_code": None if (r := result.reasons.get(spec.name)) is None else r.code,
        "estimate": estimate_json(estimate, ws, caller),
        # a shared request: its memory on each of its GPUs (absent for whole GPUs)
        **({"gpu_memory_bytes": new.gpu_share} if new.gpu_share else {}),
    })  # fmt: skip


def add_why_routes(app: web.Application) -> None:
    app.router.add_get("/v1/runs/{name}/why", why)
    app.router.add_post("/v1/preview", preview)
