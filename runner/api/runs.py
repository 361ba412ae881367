"""The API's runs: list, submit, show, change, delete, their logs, events and the stream."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp import web

from runner.api.admin import drain_now
from runner.api.batch import submit_batch
from runner.api.context import CHANGES, daemon_of, peer_caller, read_document
from runner.api.lists import LISTS, ListCache, list_body
from runner.api.served import Daemon
from runner.api.streams import follow_events, follow_log, sse
from runner.api.views import event_object, iso, run_object, worker_object
from runner.api.why import published
from runner.drives import Member
from runner.model import RunState
from runner.service.edits import edit_fields, update_run
from runner.service.reads import LOGS_PRIVATE
from runner.service.runs import Caller, ServiceError
from runner.shown import Shown


def _run_json(daemon: Daemon, name: str, caller: Caller, shown: Shown) -> dict[str, Any]:
    """One run's object, with the plan and estimates ``shown``."""
    run = daemon.service.find_run(name)
    spec = daemon.loop.spec_shown(run)
    live = daemon.service.workers_of(name)
    estimate = shown.estimates.get(name) if run.state == RunState.QUEUED else None
    now = daemon.loop.clock()
    idle = daemon.loop.idle.get(run.run_uid)
    return run_object(run, spec, caller.viewer, shown, live, now, estimate, idle)


# ------------------------------------------------------------------ runs


async def list_runs(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    body = list_body(daemon, caller, request.query, await published(daemon), request.app[LISTS])
    return web.Response(body=body, content_type="application/json", charset="utf-8")


async def submit(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    document = await read_document(request)
    run = daemon.service.submit(document, caller)  # quick: a thread hop costs more
    spec = daemon.loop.spec_shown(run)
    shown, now = daemon.loop.shown, daemon.loop.clock()
    return web.json_response(run_object(run, spec, caller.viewer, shown, (), now), status=201)


async def show_run(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    run = daemon.service.get_run(caller, name)
    obj = _run_json(daemon, name, caller, await published(daemon))
    obj["spec"] = _spec_for(run.spec(), caller, run.uid)
    history = daemon.service.workers_history(caller, name)
    obj["workers_history"] = [worker_object(w, caller.viewer) for w in history]
    seen, _ = daemon.service.events_for(caller, name)
    obj["events"] = [event_object(e, caller.viewer) for e in seen]
    owner = Member.of(run.uid, run.gid)  # the scan sees what the run's owner may list
    found = daemon.service.latest_checkpoint(daemon.loop.spec_shown(run), name, owner)
    obj["checkpoint"] = None if found is None else {**found, "modified": iso(found["modified"])}
    usage = await asyncio.to_thread(daemon.telemetry.run_usage, run)  # its telemetry, once sampled
    if usage is not None:
        obj["usage"] = msgspec.to_builtins(usage)
    return web.json_response(obj)


async def patch_run(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    body = await read_document(request)
    name = request.match_info["name"]
    if isinstance(body, dict) and set(body) != {
        "priority"
    }:  # astra update: runner/service/edits.py
        fields = edit_fields(body)
        await asyncio.to_thread(update_run, daemon.service, name, fields, caller)
        return web.json_response(_run_json(daemon, name, caller, daemon.loop.shown))
    priority = body.get("priority") if isinstance(body, dict) else None
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ServiceError(422, "INVALID_SPEC", "priority: must be a whole number")
    await asyncio.to_thread(daemon.service.set_priority, name, priority, caller)
    # the changed run as published now: a change's answer waits for no estimate
    return web.json_response(_run_json(daemon, name, caller, daemon.loop.shown))


async def delete_run(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    outcome = await asyncio.to_thread(daemon.service.delete, name, caller)
    return web.json_response({"name": name, "outcome": outcome})


async def run_logs(request: web.Request) -> web.StreamResponse:
    daemon, caller = daemon_of(request), peer_caller(request)
    name = request.match_info["name"]
    run = daemon.service.get_run(caller, name, LOGS_PRIVATE)
    follow = request.query.get("follow") in ("1", "true")
    return await follow_log(request, daemon, run, follow)


async def events(request: web.Request) -> web.StreamResponse:
    daemon, caller = daemon_of(request), peer_caller(request)
    run = request.query.get("run")
    if run is not None:
        daemon.service.get_run(caller, run)  # answers as the run's details do
    after = int(request.query.get("after", "0") or 0)  # digits: see checked_input
    follow = request.query.get("follow") in ("1", "true")
    return await follow_events(request, daemon, caller, run, after, follow)


async def status(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    # as published, not waited for: every dashboard polls it, and the head's start is its
    # shadow time whenever one is known
    loop = daemon.loop
    shown = loop.shown
    first, head = shown.head, None
    if first is not None:
        head = (
            _run_json(daemon, first.run, caller, shown)
            if daemon.service.run_now(first.run)
            else None
        )
        if head is not None:
            head["held_gpus"] = list(first.held_gpus)
            head["preempting"] = first.preempting
    return web.json_response({
        "executor": daemon.loop.capabilities.executor,
        "executor_why": daemon.executor_why,
        "not_enforced": daemon.not_enforced,
        "gpus_source": daemon.inventory.source,
        "simulated": daemon.inventory.simulated,
        "stop_grace_seconds": daemon.service.settings.machine.stop_grace,
        "ticks": loop.ticks,
        "last_plan_ms": round(loop.last_plan_ms, 2),
        "errors": loop.errors,
        "head": head,
        "caller": {"user": caller.user, "admin": caller.admin,
                   "workspaces": sorted(caller.workspaces)},
        "drain": drain_now(daemon),
        "metrics": daemon.metrics_state or None,  # [api] metrics_address's listener
    })  # fmt: skip


async def stream(request: web.Request) -> web.StreamResponse:
    caller = peer_caller(request)
    changes = request.app[CHANGES]
    return await sse(request, changes, caller)


def add_run_routes(app: web.Application) -> None:
    app[LISTS] = ListCache()
    app.router.add_get("/v1/runs", list_runs)
    app.router.add_post("/v1/runs", submit)
    app.router.add_post("/v1/runs:batch", submit_batch)
    app.router.add_get("/v1/runs/{name}", show_run)
    app.router.add_patch("/v1/runs/{name}", patch_run)
    app.router.add_delete("/v1/runs/{name}", delete_run)
    app.router.add_get("/v1/runs/{name}/logs", run_logs)
    app.router.add_get("/v1/events", events)
    app.router.add_get("/v1/status", status)
    app.router.add_get("/v1/stream", stream)


def _spec_for(document: dict[str, Any], caller: Caller, owner: int | None) -> dict[str, Any]:
    """A run's spec as ``caller`` may read it: the environment carried from its owner's
    submit (``submit_env``: tokens, paths) only to its owner and admins."""
    task = document.get("spec", {}).get("task_template")
    if caller.admin or caller.uid == owner or not isinstance(task, dict):
        return document
    task.pop("submit_env", None)
    return document
