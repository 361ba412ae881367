"""The telemetry for one caller: the sampler's last readings of the GPUs and the running
runs, each run named as ``GET /v1/runs`` names it for that caller (another workspace's
run is anonymous), with the history asked for: the rings' last hour (in memory), or
further back from the store's series (at most 2000 samples a series). The running runs
no sample has measured yet are listed too, their figures unknown. For one run: its use
(its last sample while it runs, means and peaks over its life) and its samples, for
whoever may read its details (the caller checks that: ``Service.get_run``).

Here, not in runner/api/telemetry.py: the API only translates (HTTP to these calls, on
a thread where they read the store); what a reading becomes on the wire is decided once.
"""

from __future__ import annotations

from collections.abc import Callable

from runner import schema
from runner.clock import iso
from runner.durations import parse_duration
from runner.reasons import ANONYMOUS_RUN
from runner.rows import RunRow
from runner.service.caller import Caller, ServiceError
from runner.service.runs import Service
from runner.store.telemetry import COARSE_KEPT, GpuSample, RunSample, RunSummary
from runner.telemetry.gpus import GpuReading
from runner.telemetry.sampler import HISTORY_SECONDS, RunReading, Sample, Sampler

__all__ = ["Telemetry", "history_seconds"]

# a history's samples of one GPU (by index) or one run (by uid): the rings' or the store's
_GpuSamples = Callable[[int], list[schema.TelemetryGpuSample]]
_RunSamples = Callable[[str], list[schema.TelemetryRunSample]]


def history_seconds(text: str | None) -> float | bool:
    """``?history=``: False (none asked), True (the rings' hour) or seconds back."""
    if text is None or text in ("", "0", "false"):
        return False
    if text in ("1", "true"):
        return True
    try:
        seconds = float(parse_duration(text[:32]))
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= COARSE_KEPT:
        raise ServiceError(
            422, "INVALID_SPEC", "history: expected 1 or a duration up to 31d (10m, 6h, 7d)"
        )
    return seconds


def _gpu_sample(t: float, util: float | None, memory: int | None, temperature: float | None,
                power: float | None) -> schema.TelemetryGpuSample:  # fmt: skip
    return schema.TelemetryGpuSample(
        time=t, utilization=None if util is None else round(util), memory_used=memory,
        temperature=None if temperature is None else round(temperature), power_watts=power,
    )  # fmt: skip


def _run_sample(r: RunSample) -> schema.TelemetryRunSample:
    cpu = None if r.cpu_percent is None else round(r.cpu_percent, 1)
    util = None if r.gpu_util is None else round(r.gpu_util, 1)
    return schema.TelemetryRunSample(
        time=r.at, cpu_percent=cpu, memory_bytes=r.memory_bytes,
        gpu_memory_bytes=r.gpu_memory_bytes, gpu_util=util,
    )  # fmt: skip


def _ring_gpus(sampler: Sampler, since: float) -> _GpuSamples:
    return lambda index: [
        _gpu_sample(t, h.utilization, h.memory_used, h.temperature, h.power_watts)
        for t, h in sampler.gpu_history(index) if t >= since
    ]  # fmt: skip


def _ring_runs(sampler: Sampler, since: float) -> _RunSamples:
    return lambda uid: [
        schema.TelemetryRunSample(time=t, cpu_percent=h.cpu_percent, memory_bytes=h.memory_bytes,
                                  gpu_memory_bytes=h.gpu_memory_bytes, gpu_util=h.gpu_util)
        for t, h in sampler.run_history(uid) if t >= since
    ]  # fmt: skip


def _stored(sampler: Sampler, since: float, uids: list[str]) -> tuple[_GpuSamples, _RunSamples]:
    """The store's series (for spans past the rings' hour), read once for every GPU and run."""
    recorder = sampler.recorder
    gpus: dict[int, list[GpuSample]] = {} if recorder is None else recorder.gpu_series(since)
    runs = {} if recorder is None else recorder.run_series(uids, since)
    gpu_samples = {
        i: [_gpu_sample(g.at, g.utilization, g.memory_used, g.temperature, g.power_watts)
            for g in rows]
        for i, rows in gpus.items()
    }  # fmt: skip
    run_samples = {uid: [_run_sample(r) for r in rows] for uid, rows in runs.items()}
    return (lambda i: gpu_samples.get(i, [])), (lambda uid: run_samples.get(uid, []))


def _gpu(g: GpuReading, samples: _GpuSamples | None) -> schema.TelemetryGpu:
    history = schema.UNSET if samples is None else samples(g.index)
    return schema.TelemetryGpu(
        index=g.index, uuid=g.uuid, name=g.name, simulated=g.simulated,
        utilization=g.utilization, memory_used=g.memory_used, memory_total=g.memory_total,
        temperature=g.temperature, power_watts=g.power_watts, history=history,
    )  # fmt: skip


def _run(r: RunReading, visible: bool, samples: _RunSamples | None) -> schema.TelemetryRun:
    history = schema.UNSET if samples is None else samples(r.run_uid)
    return schema.TelemetryRun(
        uid=r.run_uid if visible else None, name=r.run if visible else ANONYMOUS_RUN,
        visible=visible, workspace=r.workspace, gpus=list(r.gpus),
        cpu_percent=r.cpu_percent, memory_bytes=r.memory_bytes,
        gpu_memory_bytes=r.gpu_memory_bytes, gpu_util=r.gpu_util, history=history,
    )  # fmt: skip


def _figures(values: tuple[float | None, ...], digits: int = 1) -> schema.UsageFigures:
    cpu, memory, gpu_memory, util = values
    return schema.UsageFigures(
        cpu_percent=None if cpu is None else round(cpu, digits),
        memory_bytes=None if memory is None else round(memory),
        gpu_memory_bytes=None if gpu_memory is None else round(gpu_memory),
        gpu_util=None if util is None else round(util, digits),
    )  # fmt: skip


def _now(sampler: Sampler, run_uid: str) -> schema.UsageFigures | None:
    sample = sampler.latest()
    for r in () if sample is None else sample.runs:
        if r.run_uid == run_uid:
            return _figures((r.cpu_percent, r.memory_bytes, r.gpu_memory_bytes, r.gpu_util))
    return None


class Telemetry:
    """The readings, given the sampler (None in front of Slurm: nothing is sampled), the run
    service (the running runs no sample has measured yet), whether the inventory's GPUs are
    simulated, and the wall clock (how far back a run's ``history`` goes)."""

    def __init__(
        self, sampler: Sampler | None, service: Service, simulated: bool,
        clock: Callable[[], float],
    ) -> None:  # fmt: skip
        self.sampler, self.service, self.simulated, self.clock = sampler, service, simulated, clock

    def latest(self) -> Sample | None:
        """The sampler's last sample (the metrics' gauges); None before the first, or none."""
        return None if self.sampler is None else self.sampler.latest()

    def reads_store(self, history: float | bool) -> bool:
        """Whether :meth:`for_caller` reads the store for ``history`` (a span past the rings'
        hour), and so blocks: the API then calls it on a thread."""
        stored = not isinstance(history, bool) and history > HISTORY_SECONDS
        return self.sampler is not None and stored

    def for_caller(self, caller: Caller, history: float | bool) -> schema.Telemetry:
        """``GET /v1/telemetry`` for ``caller``; ``history`` as :func:`history_seconds` reads
        it. Blocking when :meth:`reads_store` says so."""
        sampler = self.sampler
        sees = caller.viewer.sees
        sample = None if sampler is None else sampler.latest()
        if sampler is None or sample is None:
            return schema.Telemetry(
                interval_seconds=None if sampler is None else sampler.interval,
                simulated=self.simulated, runs=self._unsampled(set(), sees),
            )  # fmt: skip
        gpu_samples: _GpuSamples | None = None
        run_samples: _RunSamples | None = None
        if history is True or (history and history <= HISTORY_SECONDS):
            since = 0.0 if history is True else sample.time - history
            gpu_samples, run_samples = _ring_gpus(sampler, since), _ring_runs(sampler, since)
        elif history:
            uids = [r.run_uid for r in sample.runs]
            gpu_samples, run_samples = _stored(sampler, sample.time - history, uids)
        # a run that ended since the sample is not listed: it runs no more
        live = {w.run_uid for w in self.service.live_workers()}
        return schema.Telemetry(
            time=iso(sample.time),
            interval_seconds=sampler.interval,
            simulated=sampler.simulated,
            gpus=[_gpu(g, gpu_samples) for g in sample.gpus],
            runs=[_run(r, sees(r.workspace), run_samples) for r in sample.runs if r.run_uid in live]
            + self._unsampled({r.run_uid for r in sample.runs}, sees),
        )

    def _unsampled(
        self, sampled: set[str], sees: Callable[[str], bool]
    ) -> list[schema.TelemetryRun]:
        """The running runs no sample has measured yet (started since the last one): listed
        from their start, their figures unknown (``-`` in astra top)."""
        gpus: dict[str, list[int]] = {}
        for w in self.service.live_workers():
            if w.run_uid not in sampled:
                gpus.setdefault(w.run, []).extend(w.gpus)
        out = []
        for name, held in sorted(gpus.items()):
            run = self.service.run_now(name)
            if run is None:
                continue
            visible = sees(run.workspace)
            out.append(schema.TelemetryRun(
                uid=run.run_uid if visible else None, name=name if visible else ANONYMOUS_RUN,
                visible=visible, workspace=run.workspace, gpus=sorted(held),
            ))  # fmt: skip
        return out

    # -------------------------------------------------------------- one run

    def _usage(self, run: RunRow) -> tuple[schema.RunUsage | None, RunSummary | None]:
        sampler = self.sampler
        if sampler is None or sampler.recorder is None or not run.run_uid:
            return None, None
        summary = sampler.recorder.run_summary(run.run_uid)
        # a finished run has no "now", though the latest sample may predate its end
        now = None if run.state.finished else _now(sampler, run.run_uid)
        if summary is None:
            return (None if now is None else schema.RunUsage(now=now)), None
        return schema.RunUsage(
            samples=summary.samples, since=iso(summary.first_at), until=iso(summary.last_at),
            now=now, mean=_figures(summary.mean), peak=_figures(summary.peak),
        ), summary  # fmt: skip

    def run_usage(self, run: RunRow) -> schema.RunUsage | None:
        """The run's use (the ``usage`` of ``astra show``: its last sample while it runs,
        means and peaks over its history); None when it was never sampled. Blocking: it
        reads the store."""
        return self._usage(run)[0]

    def run_telemetry(self, run: RunRow, history: float | None) -> schema.RunTelemetry:
        """``GET /v1/runs/{name}/telemetry``: the run's use and its samples over its whole
        life (what the store keeps of it), or ``history`` seconds back. Blocking: it reads
        the store."""
        sampler = self.sampler
        samples: list[schema.TelemetryRunSample] = []
        usage, summary = self._usage(run)
        if sampler is not None and sampler.recorder is not None and summary is not None:
            now = self.clock()
            # its whole life (what the store keeps of it), or ``history`` back
            since = summary.first_at if history is None else now - history
            found = sampler.recorder.run_series([run.run_uid], since)
            samples = [_run_sample(r) for r in found.get(run.run_uid, [])]
        return schema.RunTelemetry(
            uid=run.run_uid or "", name=run.name, workspace=run.workspace,
            interval_seconds=None if sampler is None else sampler.interval, usage=usage,
            history=samples,
        )  # fmt: skip
