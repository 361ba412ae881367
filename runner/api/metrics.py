"""``GET /metrics``: the daemon in Prometheus's text format, for any caller of the socket, and
on ``[api] metrics_address`` (runner/config/metrics.py) when set: a TCP listener that serves
only this, bounded (runner/api/metrics_site.py).

One registry per daemon (never the client library's global one), one collector that reads at
scrape time: the queue (the store's active runs, by workspace and state), the GPUs (the
inventory, the live workers, the drains), each workspace's GPUs held, the plans' times (the
back end's ``plan_times``), and counters of submits, starts, preemptions and restarts taken
from the events table by code (runner/store/counts.py): their totals start from the events
the store keeps, so that they survive a restart, and only move forward. Runs are named only
when the admin asks (``metrics_run_names = true``): the series per run carry its name and
workspace, for every scraper to read; without it no run is named, of any workspace.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from runner.api.served import Daemon
from runner.model import RunState
from runner.reasons import ReasonCode
from runner.rows import RunRow

__all__ = [
    "CONTENT_TYPE",
    "KEPT_SECONDS",
    "METRICS",
    "Metrics",
    "add_metrics_routes",
    "metrics",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# counter name -> the event codes it counts, and what it says
_COUNTERS: dict[str, tuple[tuple[ReasonCode, ...], str]] = {
    "astraeus_submits": ((ReasonCode.SUBMITTED,), "Runs submitted"),
    "astraeus_starts": (
        (ReasonCode.STARTED, ReasonCode.BACKFILLED),
        "Runs started (backfilled ones included)",
    ),
    "astraeus_preemptions": ((ReasonCode.PREEMPTED,), "Runs preempted"),
    "astraeus_restarts": ((ReasonCode.RESTARTING,), "Runs restarted after their workers ended"),
}
_RUN_LABELS = ["workspace", "run", "uid"]  # only with metrics_run_names: the run's name and id
_ACTIVE = sorted(RunState.ACTIVE, key=list(RunState).index)


class _DaemonCollector(Collector):
    """Everything read at scrape time; the event counts carried forward between scrapes."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self._lock = threading.Lock()
        self._after = 0  # the newest event counted
        self._counts: Counter[tuple[ReasonCode, str]] = Counter()

    def _event_counts(self) -> Counter[tuple[ReasonCode, str]]:
        codes = [c for codes, _doc in _COUNTERS.values() for c in codes]
        with self._lock:
            self._after, more = self.daemon.service.event_counts_since(self._after, codes)
            self._counts.update(more)
            return Counter(self._counts)

    def collect(self) -> Iterator[Metric]:
        daemon = self.daemon
        runs = daemon.service.active_runs()  # the loop's read, kept while nothing moves
        by = Counter((r.workspace, r.state) for r in runs)
        workspaces = sorted(set(daemon.config.workspaces) | {ws for ws, _state in by})
        depth = GaugeMetricFamily(
            "astraeus_runs", "Runs not finished, by workspace and state",
            labels=["workspace", "state"],
        )  # fmt: skip
        for ws in workspaces:
            for state in _ACTIVE:
                depth.add_metric([ws, state.value], by[ws, state])
        yield depth
        yield from self._gpus(workspaces, runs)
        yield from self._telemetry()
        yield from self._plans()
        counts = self._event_counts()
        for name, (codes, doc) in _COUNTERS.items():
            counter = CounterMetricFamily(name, doc, labels=["workspace"])
            for ws in sorted(set(workspaces) | {w for (_c, w) in counts}):
                counter.add_metric([ws], sum(counts[c, ws] for c in codes))
            yield counter

    def _gpus(self, workspaces: list[str], runs: list[RunRow]) -> Iterable[Metric]:
        daemon = self.daemon
        total = daemon.inventory.count
        held_by: dict[str, int] = Counter()
        held: set[int] = set()
        for w in daemon.service.live_workers():
            held.update(w.gpus)
            held_by[w.run] += len(w.gpus)
        workspace_of = {r.name: r.workspace for r in runs if r.name in held_by}
        drains = daemon.service.drains()
        if any(d.gpu is None for d in drains):  # the whole machine
            drained = set(range(total))
        else:
            drained = {d.gpu for d in drains if d.gpu is not None}
        for name, doc, value in (
            ("astraeus_gpus", "GPUs of the machine", total),
            ("astraeus_gpus_held", "GPUs held by running work", len(held)),
            ("astraeus_gpus_drained", "GPUs drained by an admin", len(drained)),
            ("astraeus_gpus_free", "GPUs neither held nor drained", total - len(held | drained)),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        per_ws = GaugeMetricFamily(
            "astraeus_workspace_gpus_held", "GPUs held by a workspace's runs", labels=["workspace"]
        )
        totals = Counter({ws: 0 for ws in workspaces})
        for run, n in held_by.items():
            totals[workspace_of.get(run, "")] += n
        for ws, n in sorted(totals.items()):
            if ws:
                per_ws.add_metric([ws], n)
        yield per_ws
        if daemon.config.metrics.run_names:  # the admin's choice: runs named for every scraper
            uid_of = {r.name: r.run_uid for r in runs if r.name in held_by}
            per_run = GaugeMetricFamily(
                "astraeus_run_gpus_held", "GPUs held by a run", labels=_RUN_LABELS
            )
            for run, n in sorted(held_by.items()):
                if run in workspace_of:
                    per_run.add_metric([workspace_of[run], run, uid_of[run]], n)
            yield per_run

    def _telemetry(self) -> Iterable[Metric]:
        """The sampler's last readings: each GPU's utilisation, memory, temperature and
        power (``simulated`` says which are), and each workspace's runs' GPU memory."""
        sample = self.daemon.telemetry.latest()
        if sample is None:
            return
        labels = ["gpu", "simulated"]
        fields = (
            ("astraeus_gpu_utilization_ratio", "A GPU's utilisation, 0 to 1", "utilization", 0.01),
            ("astraeus_gpu_memory_used_bytes", "A GPU's memory in use", "memory_used", 1),
            ("astraeus_gpu_memory_total_bytes", "A GPU's memory", "memory_total", 1),
            ("astraeus_gpu_temperature_celsius", "A GPU's temperature", "temperature", 1),
            ("astraeus_gpu_power_watts", "A GPU's power draw", "power_watts", 1),
        )
        for name, doc, field, scale in fields:
            family = GaugeMetricFamily(name, doc, labels=labels)
            for gpu in sample.gpus:
                value = getattr(gpu, field)
                if value is not None:
                    family.add_metric([str(gpu.index), str(gpu.simulated).lower()], value * scale)
            yield family
        by_ws: Counter[str] = Counter()
        for run in sample.runs:
            by_ws[run.workspace] += run.gpu_memory_bytes or 0
        per_ws = GaugeMetricFamily(
            "astraeus_workspace_gpu_memory_bytes", "GPU memory used by a workspace's runs",
            labels=["workspace"],
        )  # fmt: skip
        for ws, used in sorted(by_ws.items()):
            per_ws.add_metric([ws], used)
        yield per_ws
        if self.daemon.config.metrics.run_names:  # the admin's choice, as for GPUs held
            memory = GaugeMetricFamily(
                "astraeus_run_gpu_memory_bytes", "GPU memory used by a run", labels=_RUN_LABELS
            )
            busy = GaugeMetricFamily(
                "astraeus_run_gpu_utilization_ratio",
                "The mean utilisation of the GPUs a run holds, 0 to 1", labels=_RUN_LABELS,
            )  # fmt: skip
            for run in sorted(sample.runs, key=lambda r: r.run):
                labels = [run.workspace, run.run, run.run_uid]
                if run.gpu_memory_bytes is not None:
                    memory.add_metric(labels, run.gpu_memory_bytes)
                if run.gpu_util is not None:
                    busy.add_metric(labels, run.gpu_util * 0.01)
            yield memory
            yield busy

    def _plans(self) -> Iterable[Metric]:
        loop = self.daemon.loop
        times = loop.plan_times()
        buckets = [(f"{b / 1000:g}", n) for b, n in zip(times.buckets_ms, times.cumulative,
                                                         strict=True)]  # fmt: skip
        yield HistogramMetricFamily(
            "astraeus_plan_seconds", "How long each plan took",
            buckets=[*buckets, ("+Inf", times.count)], sum_value=times.total_ms / 1000,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "astraeus_last_plan_seconds", "How long the last plan took",
            value=loop.last_plan_ms / 1000,
        )  # fmt: skip


KEPT_SECONDS = 1.0  # a scrape this soon after the last one is given the same text


class Metrics:
    """The daemon's registry: its text, read at scrape time. However many scrape, and
    however often (the TCP listener is open to anyone who reaches it), the store is read at
    most once every KEPT_SECONDS on the monotonic clock."""

    def __init__(self, daemon: Daemon) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_DaemonCollector(daemon))
        self._clock = daemon.loop.clock
        self._lock = threading.Lock()
        self._kept: tuple[float, bytes] | None = None

    def render(self) -> bytes:
        with self._lock:  # scrapes at once wait for one reading
            now = self._clock.mono()
            if self._kept is not None and 0 <= now - self._kept[0] < KEPT_SECONDS:
                return self._kept[1]
            text = generate_latest(self.registry)
            self._kept = (now, text)
            return text


METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)


async def metrics(request: web.Request) -> web.Response:
    body = await asyncio.to_thread(request.app[METRICS].render)  # the store's reads
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def add_metrics_routes(app: web.Application, daemon: Daemon) -> None:
    app[METRICS] = Metrics(daemon)
    app.router.add_get("/metrics", metrics)
