"""The API's machine side: GPUs, workspaces, admin changes to the config, shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace
from typing import Any

from aiohttp import web

from runner.api.context import daemon_of, peer_caller
from runner.config.files import update_config_file
from runner.config.load import ConfigError, implicit_workspaces
from runner.gpus import foreign_processes, read_inventory
from runner.model import RESOURCE_NAMES, Quota, Resources, quota_amounts
from runner.reasons import ANONYMOUS_RUN
from runner.service.runs import ServiceError


async def gpus(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    inventory = await asyncio.to_thread(read_inventory, daemon.config.machine.gpus)
    local = daemon.loop.capabilities.local_gpus
    if not local:  # the cluster's GPUs, as Slurm numbers them
        inventory = replace(inventory, source=daemon.inventory.source, simulated=False)
    holders: dict[int, dict[str, Any]] = {}
    shares: dict[int, list[dict[str, Any]]] = {}  # shared runs on a GPU, with their memory
    for w, visible, share in daemon.service.gpu_shares(caller):
        who = w.run if visible else ANONYMOUS_RUN
        for index in w.gpus:
            holders.setdefault(index, {"run": who, "worker": w.worker, "state": w.state})
            if share:
                shares.setdefault(index, []).append({"run": who, "worker": w.worker,
                                                     "bytes": share})  # fmt: skip
    head = daemon.loop.shown.head
    held = set(head.held_gpus) if head is not None else set()
    head_name = None
    if head is not None:
        head_name = head.run if caller.viewer.sees(head.workspace) else ANONYMOUS_RUN
    foreign = foreign_processes(inventory, set()) if not inventory.simulated else {}
    drained = {r.gpu: r.reason for r in daemon.service.drains() if r.gpu is not None}
    # a simulated GPU reads nothing itself: its readings are the telemetry's simulated
    # ones, as `astra top` and the dashboard show them
    sample = daemon.telemetry.latest() if local and inventory.simulated else None
    readings = {} if sample is None else {r.index: r for r in sample.gpus}
    rows = []
    for g in inventory.gpus:
        read = readings.get(g.index)
        used = g.memory_used if read is None or read.memory_used is None else read.memory_used
        rows.append({
            "index": g.index, "uuid": g.uuid, "name": g.name, "simulated": g.simulated,
            "remote": not local,  # on the cluster's nodes: no readings here
            "memory_total": g.memory_total, "memory_used": used,
            "utilization": g.utilization if read is None else read.utilization,
            "temperature": g.temperature if read is None else read.temperature,
            "holder": holders.get(g.index),
            "held_for": head_name if g.index in held and g.index not in holders else None,
            "foreign_pids": list(foreign.get(g.index, ())) if g.index not in holders else [],
            "drained": drained.get(g.index),
            "mig": g.mig,
            **({"shares": shares[g.index]} if g.index in shares else {}),
        })  # fmt: skip
    return web.json_response({"source": inventory.source, "simulated": inventory.simulated,
                              "not_enforced": daemon.not_enforced, "gpus": rows})  # fmt: skip


def _quota_json(quota: Quota | None) -> dict[str, Any] | None:
    if quota is None:
        return None
    gpus, cpu, memory, workers, gpu_memory = quota.limits()
    return {"gpus": gpus, "cpu_cores": None if cpu is None else cpu / 1000,
            "memory": memory, "workers": workers,
            **({"gpu_memory": gpu_memory} if gpu_memory is not None else {})}  # fmt: skip


def _usage_json(used: Resources) -> dict[str, int]:
    """What a workspace uses; its GPU memory only when it promised some (a shared GPU)."""
    usage = dict(zip(RESOURCE_NAMES, quota_amounts(used), strict=True))
    if not usage["gpu_memory"]:
        del usage["gpu_memory"]
    return usage


async def workspaces(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    mine = daemon.service.default_workspace_of(caller)
    shares = daemon.service.shares_now({n: ws.quota for n, ws in daemon.config.workspaces.items()})
    history = daemon.service.usage_history()
    rows = []
    for name, ws in sorted(daemon.config.workspaces.items()):
        u, share = shares[name]
        rows.append({
            "name": name, "members": list(ws.members), "weight": ws.weight,
            "max_priority": ws.max_priority, "quota": _quota_json(ws.quota),
            "preempt_within_quota": ws.preempt_within_quota,
            "default_image": daemon.service.default_image(name),
            "default": name == mine,  # where the caller's runs go when they name none
            "usage": _usage_json(u),
            "dominant_share": share, "share_over_weight": share / ws.weight,
            "gpu_seconds": history.get(name, (0.0, 0.0))[0],
        })  # fmt: skip
    return web.json_response({"workspaces": rows})


def _apply_change(doc: dict[str, Any], ws: str, body: dict[str, Any]) -> None:
    defined = doc.setdefault("workspaces", {})
    if not defined:  # the workspace a config without any has, written out to be changed
        defined.update(implicit_workspaces())
    table = defined.get(ws)
    if table is None:
        raise ServiceError(404, "NOT_FOUND", f"no workspace {ws}")
    for key in ("max_priority", "weight"):
        if key in body:
            table[key] = body[key]
    if "quota" in body:
        quota = dict(table.get("quota", {}))
        for key, value in body["quota"].items():
            if value is None:
                quota.pop(key, None)
            else:
                quota[key] = value
        if quota:
            table["quota"] = quota
        else:
            table.pop("quota", None)


async def change_workspace(request: web.Request) -> web.Response:
    """Admins only: quota, max_priority, weight; written atomically, then reloaded."""
    daemon, caller = daemon_of(request), peer_caller(request)
    if not caller.admin:
        raise ServiceError(403, "FORBIDDEN", "only an admin may change a workspace")
    body = await request.json()
    if not isinstance(body, dict) or not set(body) <= {"quota", "max_priority", "weight"}:
        raise ServiceError(422, "INVALID_CONFIG", "expected quota, max_priority or weight")
    ws = request.match_info["name"]
    if daemon.config.path is None:
        raise ServiceError(409, "NO_CONFIG_FILE", "the daemon runs without a config file")
    try:
        config = await asyncio.to_thread(
            update_config_file, daemon.config.path, lambda d: _apply_change(d, ws, body)
        )
    except ConfigError as e:
        raise ServiceError(422, "INVALID_CONFIG", str(e)) from e
    daemon.apply_config(config)
    return await workspaces(request)


async def shutdown(request: web.Request) -> web.Response:
    """Stop the daemon (admins, or the user it runs as); running work goes on."""
    caller = peer_caller(request)
    if not (caller.admin or caller.uid == os.getuid()):
        raise ServiceError(403, "FORBIDDEN", "only an admin may stop the daemon")
    asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)
    return web.json_response({"stopping": True})


def add_machine_routes(app: web.Application) -> None:
    app.router.add_get("/v1/gpus", gpus)
    app.router.add_get("/v1/workspaces", workspaces)
    app.router.add_patch("/v1/workspaces/{name}", change_workspace)
    app.router.add_post("/v1/shutdown", shutdown)
