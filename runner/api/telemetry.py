"""``GET /v1/telemetry``: the sampler's last readings of the GPUs and the running runs,
each run named for the caller as ``GET /v1/runs`` names it; ``?history=1`` adds the
last hour's samples."""

from __future__ import annotations

import msgspec
from aiohttp import web

from runner import schema
from runner.api.context import daemon_of, peer_caller
from runner.api.views import iso
from runner.reasons import ANONYMOUS_RUN
from runner.telemetry.gpus import GpuReading
from runner.telemetry.sampler import RunReading, Sampler


def _gpu(g: GpuReading, sampler: Sampler, history: bool) -> schema.TelemetryGpu:
    samples: list[schema.TelemetryGpuSample] | schema.UnsetType = schema.UNSET
    if history:
        samples = [
            schema.TelemetryGpuSample(time=t, utilization=h.utilization,
                                      memory_used=h.memory_used, temperature=h.temperature,
                                      power_watts=h.power_watts)
            for t, h in sampler.gpu_history(g.index)
        ]  # fmt: skip
    return schema.TelemetryGpu(
        index=g.index, uuid=g.uuid, name=g.name, simulated=g.simulated,
        utilization=g.utilization, memory_used=g.memory_used, memory_total=g.memory_total,
        temperature=g.temperature, power_watts=g.power_watts, history=samples,
    )  # fmt: skip


def _run(r: RunReading, visible: bool, sampler: Sampler, history: bool) -> schema.TelemetryRun:
    samples: list[schema.TelemetryRunSample] | schema.UnsetType = schema.UNSET
    if history:
        samples = [
            schema.TelemetryRunSample(time=t, cpu_percent=h.cpu_percent,
                                      memory_bytes=h.memory_bytes,
                                      gpu_memory_bytes=h.gpu_memory_bytes, gpu_util=h.gpu_util)
            for t, h in sampler.run_history(r.run_uid)
        ]  # fmt: skip
    return schema.TelemetryRun(
        uid=r.run_uid if visible else None, name=r.run if visible else ANONYMOUS_RUN,
        visible=visible, workspace=r.workspace, gpus=list(r.gpus),
        cpu_percent=r.cpu_percent, memory_bytes=r.memory_bytes,
        gpu_memory_bytes=r.gpu_memory_bytes, gpu_util=r.gpu_util, history=samples,
    )  # fmt: skip


async def telemetry(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    history = request.query.get("history") in ("1", "true")
    sampler = daemon.telemetry
    sample = None if sampler is None else sampler.latest()
    if sampler is None or sample is None:
        body = schema.Telemetry(
            interval_seconds=None if sampler is None else sampler.interval,
            simulated=daemon.inventory.simulated,
        )
    else:
        sees = caller.viewer.sees
        body = schema.Telemetry(
            time=iso(sample.time),
            interval_seconds=sampler.interval,
            simulated=sampler.simulated,
            gpus=[_gpu(g, sampler, history) for g in sample.gpus],
            runs=[_run(r, sees(r.workspace), sampler, history) for r in sample.runs],
        )
    return web.Response(body=msgspec.json.encode(body), content_type="application/json")


def add_telemetry_routes(app: web.Application) -> None:
    app.router.add_get("/v1/telemetry", telemetry)
