"""Edit a run (``astra update``): its time limit, GPUs, CPUs, memory and priority.

A waiting run is checked as a submit is (the spec's validators, the workspace's priority
cap, the back end's check), and more: an edit that would ask for more than the
machine has, or more than its namespace's quota allows at all, is refused (a submit
queues such a run with its reason; an edit is a deliberate change and is told at once).
On any refusal nothing changes. A running run may only change its time limit: a member
may shorten it, an admin may also lengthen it (Slurm's rule). The time limit is still
measured on the monotonic clock from each worker's start (runner/engine/loop.py).
The change takes effect in the next plan; an ``Updated`` event (code UPDATED) says what
changed and who changed it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from runner.model import (
    RESOURCE_NAMES,
    Resources,
    RunSpec,
    RunState,
    format_amount,
    format_cores,
    format_size,
    machine_amounts,
    quota_amounts,
)
from runner.reasons import Reason, ReasonCode
from runner.runspec.parse import parse_spec, spec_to_dict
from runner.runspec.printable import check_spec
from runner.service.caller import Caller, ServiceError, spec_errors
from runner.service.runs import Service
from runner.store.db import RunRow

FIELDS = ("time_limit_seconds", "gpus", "cpu_cores", "memory", "priority")
_RESOURCES = ("gpus", "cpu_cores", "memory")


def edit_fields(body: object) -> dict[str, Any]:
    """The fields a PATCH of a run asks to change; 422 on anything else. Only the time
    limit may be null (no time limit)."""
    if not isinstance(body, dict) or not body or not set(body) <= set(FIELDS):
        raise ServiceError(422, "INVALID_SPEC", "expected some of " + ", ".join(FIELDS))
    for key, value in body.items():
        if value is None and key != "time_limit_seconds":
            raise ServiceError(422, "INVALID_SPEC", f"{key}: must not be null")
    return dict(body)


def _edited(document: dict[str, Any], fields: dict[str, Any], workspace: str) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    doc["metadata"]["workspace"] = workspace  # checked in its own workspace, whoever edits
    spec = doc["spec"]
    task = spec.setdefault("task_template", {})
    resources = task.setdefault("requested_resources", {})
    if not isinstance(resources, dict):
        resources = task["requested_resources"] = {}
    if "time_limit_seconds" in fields:
        if fields["time_limit_seconds"] is None:
            task.pop("time_limit_seconds", None)
        else:
            task["time_limit_seconds"] = fields["time_limit_seconds"]
    if "gpus" in fields:  # a shared request stays shared: its memory on each GPU kept
        old = resources.get("gpu_requests")
        kept = ("memory_bytes", "shards", "shared")
        shared = {k: old[k] for k in kept if k in old} if isinstance(old, dict) else {}
        resources["gpu_requests"] = {"count": fields["gpus"], **shared}
    if "cpu_cores" in fields:
        resources["cpu_cores"] = fields["cpu_cores"]
    if "memory" in fields:
        resources["memory_bytes"] = fields["memory"]
    if "priority" in fields:
        spec["priority"] = fields["priority"]
    return doc


def _limit(seconds: int | None) -> str:
    return "none" if seconds is None else f"{seconds} s"


def _changes(old: RunSpec, new: RunSpec, old_priority: int) -> list[str]:
    a, b = old.task, new.task
    pairs = [
        ("time limit", _limit(a.time_limit_seconds), _limit(b.time_limit_seconds)),
        ("GPUs", str(a.gpus), str(b.gpus)),
        ("CPUs", format_cores(a.cpu_milli), format_cores(b.cpu_milli)),
        ("memory", format_size(a.memory), format_size(b.memory)),
        ("priority", str(old_priority), str(new.priority)),
    ]
    return [f"{what} {x} -> {y}" for what, x, y in pairs if x != y]


def _lengthens(old: int | None, new: int | None) -> bool:
    if new is None:
        return old is not None
    return old is not None and new > old


def _check_fits(spec: RunSpec, workspace: str, service: Service, capacity: Resources) -> None:
    """The edited run could ever start: within the machine and its namespace's quota."""
    ask = spec.total_resources() if spec.gang else spec.worker_resources()
    for name, asked, total in zip(
        RESOURCE_NAMES, machine_amounts(ask), machine_amounts(capacity), strict=True
    ):
        if asked > total:
            a, t = format_amount(name, asked), format_amount(name, total)
            raise ServiceError(
                422, "INVALID_SPEC", f"{name}: asks for {a}, the machine has {t} in all"
            )
    quota = service.config.workspaces[workspace].quota
    limits = quota.limits() if quota is not None else (None,) * len(RESOURCE_NAMES)
    for name, asked, limit in zip(RESOURCE_NAMES, quota_amounts(ask), limits, strict=True):
        if limit is not None and asked > limit:
            a, lim = format_amount(name, asked), format_amount(name, limit)
            raise ServiceError(
                422, "INVALID_SPEC",
                f"{name}: asks for {a}, more than namespace {workspace}'s quota of {lim} allows",
            )  # fmt: skip


def _check_running(run: RunRow, old: RunSpec, spec: RunSpec, fields: dict[str, Any],
                   caller: Caller) -> None:  # fmt: skip
    """A running run: only its time limit, lengthened by an admin only."""
    others = sorted(set(fields) - {"time_limit_seconds"})
    if others:
        raise ServiceError(
            409, "NOT_EDITABLE", f"run {run.name} is {run.state}: only its time limit may change"
            f" while it runs (not {', '.join(others)})",
        )  # fmt: skip
    lengthens = _lengthens(old.task.time_limit_seconds, spec.task.time_limit_seconds)
    if lengthens and not caller.admin:
        raise ServiceError(
            403, "FORBIDDEN", f"only an admin may lengthen the time limit of run {run.name},"
            " which is running: a member may shorten it",
        )  # fmt: skip


def update_run(service: Service, name: str, fields: dict[str, Any], caller: Caller) -> RunRow:
    """Change the run's ``fields`` (see FIELDS), checked; committed when this returns."""
    run = service._own_run(name, caller)
    if run.state in RunState.FINISHED:
        raise ServiceError(
            409, "NOT_EDITABLE", f"run {name} is {run.state}: only a waiting or running run"
            " may be changed",
        )  # fmt: skip
    if service.executor == "slurm":
        raise ServiceError(
            409, "NOT_EDITABLE", "the Slurm front does not change its jobs: delete the run and"
            " submit it again",
        )  # fmt: skip
    old = parse_spec(run.spec(), stored=True)
    document = _edited(run.spec(), {"priority": run.priority, **fields}, run.workspace)
    with spec_errors():
        spec = parse_spec(document)
        check_spec(spec)
    if run.state != RunState.QUEUED:
        _check_running(run, old, spec, fields, caller)
    if "priority" in fields:
        service.check_priority(run.workspace, spec.priority)
    refusal = service.backend_check(spec, run.workspace)
    if refusal is not None:
        raise ServiceError(422, "INVALID_SPEC", refusal)
    if set(fields) & set(_RESOURCES):
        _check_fits(spec, run.workspace, service, service.settings.machine.capacity())
    changes = _changes(old, spec, run.priority)
    if not changes:
        return run
    with service.store.transaction() as tx:
        if service.store.runs.state_in(tx, name) != run.state:  # it moved meanwhile
            raise ServiceError(
                409, "NOT_EDITABLE", f"run {name} changed state meanwhile: try again"
            )
        service.store.runs.set_spec(tx, name, json.dumps(spec_to_dict(spec)), spec.priority)
        text = f"Changed by {caller.user}: " + ", ".join(changes)
        service.store.events.add(
            tx, name, run.workspace, ReasonCode.UPDATED, Reason(text, code=ReasonCode.UPDATED)
        )
    service.poke()
    updated = service.store.runs.get(name)
    assert updated is not None
    return updated
