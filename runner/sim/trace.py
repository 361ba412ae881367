"""Workloads to replay: each run as it was submitted, and how long it ran.

Readers (``read_trace``): ``astraeus`` (this project's CSV), ``alibaba`` (the Alibaba GPU
cluster trace 2023's task list), ``swf`` (the Standard Workload Format of the Parallel
Workloads Archive). ``history`` (the daemon's own finished runs) is read through the API
by the CLI, whose entries ``history_trace`` turns into TraceRuns.
"""

from __future__ import annotations

import csv
import math
import random
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO, TypeVar

from runner.durations import parse_duration
from runner.model import MAX_PRIORITY, MIN_PRIORITY, RunState, parse_size
from runner.oneline import one_line
from runner.runspec.fields import MAX_NAME, MIN_MEMORY


@dataclass(frozen=True, slots=True)
class TraceRun:
    """One run of a workload; times in seconds from the trace's start.

    ``gpus`` whole GPUs per worker, or, with ``gpu_memory`` (bytes), a shared run asking
    that much memory on each of ``gpus`` GPUs. ``time_limit`` None: no limit.
    ``workspace`` None: the config's default workspace.
    """

    name: str
    submit: float
    duration: float
    gpus: int = 0
    gpu_memory: int = 0
    cpus: float = 0.0
    memory: int = 0
    priority: int = 0
    workspace: str | None = None
    time_limit: float | None = None
    workers: int = 1


_T = TypeVar("_T")

FORMATS = ("astraeus", "alibaba", "swf")
LIMITS = ("trace", "exact", "x2", "x5", "none")
QOS_PRIORITY = {"LS": 100, "Guaranteed": 100, "Burstable": 0, "BE": -100}
ASTRAEUS_COLUMNS = (
    "name",
    "submit",
    "duration",
    "gpus",
    "gpu_memory",
    "cpus",
    "memory",
    "priority",
    "workspace",
    "time_limit",
    "workers",
)
ALIBABA_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
SWF_FIELDS = (
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average cpu time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
)
_MIB = 1024**2


class TraceError(ValueError):
    """A trace that cannot be read; the message is one line naming the file and line."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A workload read from a file: its runs by submit time, and why others were left out."""

    runs: tuple[TraceRun, ...]
    left_out: dict[str, int]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How a trace is cut down and completed while it is read.

    ``since``: keep the runs submitted at or after it, with times shifted so that it is 0.
    ``longest``: leave out runs longer than it (seconds). ``sample``: keep each run with
    this chance (0 < f <= 1), drawn from ``random.Random(seed)``. ``limits``: the runs'
    time limits: ``trace`` (what the file says), ``exact`` (the duration), ``x2`` or
    ``x5`` (the duration times that, in whole seconds up), ``none``; a limit is at least
    1 s. ``workspaces``: spread the alibaba tasks (by name) and the swf jobs (by user)
    over these, always the same way; empty: the default workspace. ``qos_priority``: an
    alibaba task's priority by its QoS (0 for others). ``swf_gpus_per_proc``: GPUs per
    swf processor, rounded up per job. ``gpu_memory``: bytes of one GPU, to turn an
    alibaba share of a GPU into the memory it asks.
    """

    since: float | None = None
    longest: float | None = None
    sample: float | None = None
    seed: int = 0
    limits: str = "trace"
    workspaces: tuple[str, ...] = ()
    qos_priority: Mapping[str, int] = field(default_factory=lambda: dict(QOS_PRIORITY))
    swf_gpus_per_proc: float = 1.0
    gpu_memory: int = 80 * 1024**3

    def __post_init__(self) -> None:
        if self.limits not in LIMITS:
            raise ValueError(f"limits {self.limits!r} is not one of {', '.join(LIMITS)}")
        if self.sample is not None and not 0 < self.sample <= 1:
            raise ValueError(f"sample {self.sample} is not a fraction above 0 and at most 1")
        if self.longest is not None and self.longest < 0:
            raise ValueError(f"longest {self.longest} is negative")
        if self.swf_gpus_per_proc < 0:
            raise ValueError(f"swf_gpus_per_proc {self.swf_gpus_per_proc} is negative")
        if self.gpu_memory <= 0:
            raise ValueError(f"gpu_memory {self.gpu_memory} is not a positive number of bytes")


def parse_seconds(text: str) -> float:
    """Seconds from a number (``3600``, ``0``, ``1.5``) or a duration (``7d``, ``1h30m``,
    ``1-12:00:00``); ValueError if it is neither or is negative."""
    value = _seconds(text)
    if value < 0:
        raise ValueError(f"{text.strip()[:40]!r} is negative")
    return value


def _seconds(text: str) -> float:
    """Seconds, perhaps negative, from a number or a duration; ValueError if neither."""
    try:
        value = float(text)
    except ValueError:
        return float(parse_duration(text))
    if not math.isfinite(value):
        raise ValueError(f"{text.strip()[:40]!r} is not a number of seconds")
    return value


def guess_format(path: Path) -> str:
    """The format of the trace at ``path``, from its suffix or its first line."""
    if path.suffix.lower() == ".swf":
        return "swf"
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            first = file.readline().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path.name}: cannot read it: {one_line(error)}") from None
    if first.startswith(";"):
        return "swf"
    header = {column.strip() for column in next(csv.reader([first]), [])}
    if header & {"creation_time", "gpu_milli"}:
        return "alibaba"
    if {"name", "submit"} <= header:
        return "astraeus"
    raise TraceError(
        f"{path.name} line 1: not a trace this reads ({', '.join(FORMATS)}); name the format"
    )


def read_trace(path: Path, fmt: str | None = None, options: ReadOptions | None = None) -> Trace:
    """The runs of the trace at ``path`` in format ``fmt`` (guessed if None), cut down and
    completed as ``options`` say; TraceError if the file cannot be read or is not one."""
    options = options or ReadOptions()
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise TraceError(f"{path.name}: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    left_out: Counter[str] = Counter()
    readers = {"astraeus": _astraeus, "alibaba": _alibaba, "swf": _swf}
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            lines = readers[fmt](file, path.name, options, left_out)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise TraceError(f"{path.name}: cannot read it: {one_line(error)}") from None
    first: dict[str, int] = {}
    for line, run in lines:
        if run.name in first:
            again = f"{run.name[:80]!r} already on line {first[run.name]}"
            raise TraceError(f"{path.name} line {line}: name: {again}")
        first[run.name] = line
    runs = sorted((run for _, run in lines), key=lambda run: (run.submit, run.name))
    kept = _cut(runs, options, left_out)
    return Trace(runs=tuple(kept), left_out=dict(left_out))


def history_trace(entries: Sequence[Mapping[str, object]], options: ReadOptions) -> Trace:
    """The runs of ``GET /v1/history``'s entries (its JSON objects) as a trace, cut down
    and completed as ``options`` say; TraceError, naming the entry, on one that is not one.

    Each is submitted at its ``submitted_at``, in seconds from the earliest, and lasts its
    ``run_seconds`` (else its ``elapsed_seconds``, else 0). Its workers each ask its
    ``gpus`` (what its last attempt held, all workers together) over its ``workers``,
    rounded up, and its ``cpus`` and ``memory_bytes``; a shared run its
    ``gpu_memory_bytes`` on each GPU. Its priority, workspace and time limit are its own.
    A name seen again (a replica's next life, a name used again after a delete) becomes
    ``name-2``, ``name-3``, … in submit order (a number no other run's name takes, within
    the 63 characters of a name). A run cancelled before it started is left out as
    "never started".
    """
    left_out: Counter[str] = Counter()
    found: list[tuple[float, int, _Entry]] = []
    for index, raw in enumerate(entries, start=1):
        entry = _Entry(index, raw)
        if raw.get("started_at") is None and raw.get("outcome") == RunState.CANCELLED:
            left_out["never started"] += 1
            continue
        found.append((entry.time("submitted_at"), index, entry))
    found.sort(key=lambda item: item[:2])
    start = found[0][0] if found else 0.0
    names = _unique_names([entry.name() for _, _, entry in found])
    runs = [
        entry.run(name, submit - start)
        for (submit, _, entry), name in zip(found, names, strict=True)
    ]
    runs.sort(key=lambda run: (run.submit, run.name))
    kept = _cut(runs, options, left_out)
    return Trace(runs=tuple(kept), left_out=dict(left_out))


def _unique_names(names: list[str]) -> list[str]:
    """``names`` with each one seen before given the first free ``-2``, ``-3``, … (cut to
    the 63 characters of a run's name): no two alike, none another's name as given."""
    given, taken, out = set(names), set(), []
    for name in names:
        unique, number = name, 1
        while unique in taken or (unique != name and unique in given):
            number += 1
            suffix = f"-{number}"
            unique = name[: MAX_NAME - len(suffix)].rstrip("-") + suffix
        taken.add(unique)
        out.append(unique)
    return out


@dataclass(frozen=True, slots=True)
class _Entry:
    """One history entry read as values, with errors that name it by its place."""

    index: int
    raw: Mapping[str, object]

    def error(self, key: str, reason: str) -> TraceError:
        return TraceError(f"history entry {self.index}: {key}: {reason}")

    def name(self) -> str:
        value = self.raw.get("name")
        if not isinstance(value, str) or not value:
            raise self.error("name", "not a run's name")
        return value

    def time(self, key: str) -> float:
        """Unix seconds from an ISO time such as ``2026-12-02T03:00:00Z`` (UTC when bare)."""
        value = self.raw.get(key)
        try:
            if not isinstance(value, str) or len(value) > 40:
                raise ValueError
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            return when.timestamp()
        except ValueError:
            raise self.error(key, f"{str(value)[:40]!r} is not a time") from None

    def number(self, key: str, default: float | None = None) -> float | None:
        """A number of at least 0; ``default`` when it is missing or null."""
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"{str(value)[:40]!r} is not a number")
        if not math.isfinite(value) or value < 0:
            raise self.error(key, f"{value} is not a number of at least 0")
        return float(value)

    def whole(self, key: str, default: int, low: int = 0, high: int | None = None) -> int:
        """A whole number from ``low`` to ``high``; ``default`` when it is missing or null."""
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"{str(value)[:40]!r} is not a whole number")
        if value < low:
            raise self.error(key, f"{value} is below {low}")
        if high is not None and value > high:
            raise self.error(key, f"{value} is above {high}")
        return value

    def run(self, name: str, submit: float) -> TraceRun:
        """The entry as a TraceRun named ``name``, submitted at ``submit``."""
        workers = self.whole("workers", 1, low=1)
        held = self.whole("gpus", 0)
        gpus = -(-held // workers)
        duration = self.number("run_seconds")
        if duration is None:
            duration = self.number("elapsed_seconds", 0.0)
        workspace = self.raw.get("workspace")
        return TraceRun(
            name=name,
            submit=submit,
            duration=duration or 0.0,
            gpus=gpus,
            gpu_memory=self.whole("gpu_memory_bytes", 0) if gpus else 0,
            cpus=self.number("cpus", 0.0) or 0.0,
            memory=self.whole("memory_bytes", 0),
            priority=self.whole("priority", 0, low=MIN_PRIORITY, high=MAX_PRIORITY),
            workspace=workspace if isinstance(workspace, str) and workspace else None,
            time_limit=self.number("time_limit_seconds") or None,
            workers=workers,
        )


def _cut(runs: list[TraceRun], options: ReadOptions, left_out: Counter[str]) -> list[TraceRun]:
    """``runs`` after ``since``, ``longest``, ``sample`` and ``limits``, in that order."""
    if options.since is not None:
        since = options.since
        left_out["before --since"] += sum(1 for run in runs if run.submit < since)
        runs = [replace(run, submit=run.submit - since) for run in runs if run.submit >= since]
    if options.longest is not None:
        longest = options.longest
        left_out["longer than --longest"] += sum(1 for run in runs if run.duration > longest)
        runs = [run for run in runs if run.duration <= longest]
    if options.sample is not None:
        rng, fraction = random.Random(options.seed), options.sample
        sampled = [run for run in runs if rng.random() < fraction]
        left_out["sampled out"] += len(runs) - len(sampled)
        runs = sampled
    if options.limits != "trace":
        runs = [replace(run, time_limit=_limit(run.duration, options.limits)) for run in runs]
    for reason in [reason for reason, count in left_out.items() if not count]:
        del left_out[reason]
    return runs


def _limit(duration: float, limits: str) -> float | None:
    """The time limit ``limits`` gives a run of ``duration``; at least a second."""
    if limits == "none":
        return None
    if limits == "exact":
        return max(duration, 1.0)
    return float(max(1, math.ceil(duration * int(limits.removeprefix("x")))))


def _workspace(key: str, workspaces: tuple[str, ...]) -> str | None:
    """One of ``workspaces`` for ``key``, the same in every run of the program."""
    if not workspaces:
        return None
    ordered = sorted(workspaces)
    return ordered[zlib.crc32(key.encode()) % len(ordered)]


def _astraeus(
    file: TextIO, name: str, options: ReadOptions, left_out: Counter[str]
) -> list[tuple[int, TraceRun]]:
    """The runs of this project's CSV, each with its line."""
    rows = _rows(file, name, required=("name", "submit", "duration"), known=ASTRAEUS_COLUMNS)
    runs: list[tuple[int, TraceRun]] = []
    for line, row in rows:
        cell = _Cells(name, line, row)
        gpus = cell.whole("gpus", 0)
        gpu_memory = cell.size("gpu_memory")
        if gpu_memory and not gpus:
            raise cell.error("gpu_memory", "asks GPU memory but no GPUs")
        priority = cell.whole("priority", 0, low=MIN_PRIORITY)
        if priority > MAX_PRIORITY:
            raise cell.error("priority", f"{priority} is above {MAX_PRIORITY}")
        time_limit = cell.seconds("time_limit") if row.get("time_limit") else None
        if time_limit == 0:
            raise cell.error("time_limit", "0 is not a time limit (leave it empty for none)")
        runs.append(
            (
                line,
                TraceRun(
                    name=cell.name(),
                    submit=cell.seconds("submit", low=-math.inf),
                    duration=max(0.0, cell.seconds("duration", low=-math.inf)),
                    gpus=gpus,
                    gpu_memory=gpu_memory,
                    cpus=cell.number("cpus", 0.0),
                    memory=cell.size("memory"),
                    priority=priority,
                    workspace=row.get("workspace") or None,
                    time_limit=time_limit,
                    workers=cell.whole("workers", 1, low=1),
                ),
            )
        )
    return runs


def _alibaba(
    file: TextIO, name: str, options: ReadOptions, left_out: Counter[str]
) -> list[tuple[int, TraceRun]]:
    """The tasks of the Alibaba GPU cluster trace 2023 (``openb_pod_list_*.csv``), each
    with its line."""
    rows = _rows(file, name, required=("name", "creation_time", "deletion_time"), known=None)
    runs: list[tuple[int, TraceRun]] = []
    for line, row in rows:
        cell = _Cells(name, line, row)
        task = cell.name()
        if not row.get("deletion_time"):
            left_out["no end"] += 1
            continue
        created = cell.number("creation_time", low=-math.inf)
        started = cell.number("scheduled_time", created, low=-math.inf)
        num_gpu = cell.whole("num_gpu", 0)
        milli = cell.whole("gpu_milli", 1000)
        shared = num_gpu == 1 and milli < 1000
        runs.append(
            (
                line,
                TraceRun(
                    name=task,
                    submit=created,
                    duration=max(0.0, cell.number("deletion_time", low=-math.inf) - started),
                    gpus=num_gpu,
                    # (at least the least a share may ask: a tiny GPU given to --gpu-memory)
                    gpu_memory=max(MIN_MEMORY, milli * options.gpu_memory // 1000) if shared else 0,
                    cpus=cell.number("cpu_milli", 0.0) / 1000,
                    memory=round(cell.number("memory_mib", 0.0) * _MIB),
                    priority=options.qos_priority.get(row.get("qos") or "", 0),
                    workspace=_workspace(task, options.workspaces),
                ),
            )
        )
    return runs


def _swf(
    file: TextIO, name: str, options: ReadOptions, left_out: Counter[str]
) -> list[tuple[int, TraceRun]]:
    """The jobs of a Standard Workload Format file, each with its line."""
    runs: list[tuple[int, TraceRun]] = []
    for line, text in enumerate(file, start=1):
        words = text.split()
        if not words or words[0].startswith(";"):
            continue
        if len(words) < len(SWF_FIELDS):
            raise TraceError(
                f"{name} line {line}: {len(words)} fields, not the {len(SWF_FIELDS)} of SWF"
            )
        fields = [_swf_number(name, line, i, word) for i, word in enumerate(words[:18])]
        number, submit, _, run_time, allocated, *_ = fields
        if number != int(number):
            raise TraceError(f"{name} line {line}: job number: {words[0]!r} is not whole")
        if run_time < 0:
            left_out["no run time"] += 1
            continue
        procs = allocated if allocated != -1 else fields[7]
        requested = fields[8]
        runs.append(
            (
                line,
                TraceRun(
                    name=f"job-{int(number)}",
                    submit=submit,
                    duration=run_time,
                    gpus=math.ceil(procs * options.swf_gpus_per_proc) if procs > 0 else 0,
                    workspace=_workspace(words[11], options.workspaces),
                    time_limit=requested if requested > 0 else None,
                ),
            )
        )
    return runs


def _swf_number(name: str, line: int, index: int, word: str) -> float:
    """Field ``index`` of an SWF line as a number."""
    try:
        value = float(word)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TraceError(
            f"{name} line {line}: field {index + 1} ({SWF_FIELDS[index]}): "
            f"{word[:40]!r} is not a number"
        )
    return value


def _rows(
    file: TextIO, name: str, required: tuple[str, ...], known: tuple[str, ...] | None
) -> list[tuple[int, dict[str, str]]]:
    """A CSV's rows as cells by column, each with its line; TraceError on a bad header or
    a row of the wrong width. ``known`` None: any other columns are allowed."""
    reader = csv.reader(file)
    header = [column.strip() for column in next(reader, [])]
    missing = [column for column in required if column not in header]
    if missing:
        raise TraceError(f"{name} line 1: no column {', '.join(map(repr, missing))}")
    unknown = [column for column in header if known is not None and column not in known]
    if unknown:
        raise TraceError(f"{name} line 1: unknown column {', '.join(map(repr, unknown))}")
    doubled = sorted({column for column in header if header.count(column) > 1})
    if doubled:
        raise TraceError(f"{name} line 1: column {', '.join(map(repr, doubled))} twice")
    rows = []
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise TraceError(
                f"{name} line {reader.line_num}: {len(cells)} cells, the header has {len(header)}"
            )
        row = {column: cell.strip() for column, cell in zip(header, cells, strict=True)}
        rows.append((reader.line_num, row))
    return rows


@dataclass(frozen=True, slots=True)
class _Cells:
    """One CSV row's cells read as values, with errors that name the file, line and column."""

    file: str
    line: int
    row: dict[str, str]

    def error(self, column: str, reason: str) -> TraceError:
        """A TraceError about ``column`` of this row."""
        return TraceError(f"{self.file} line {self.line}: {column}: {reason}")

    def name(self) -> str:
        """The run's name; it must not be empty."""
        if not self.row["name"]:
            raise self.error("name", "empty")
        return self.row["name"]

    def number(self, column: str, default: float | None = None, low: float = 0.0) -> float:
        """A number of at least ``low``; ``default`` if the cell is empty or missing."""
        text = self.row.get(column, "")
        if not text and default is not None:
            return default
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise self.error(column, f"{text[:40]!r} is not a number")
        if value < low:
            raise self.error(column, f"{text[:40]!r} is negative")
        return value

    def whole(self, column: str, default: int, low: int = 0) -> int:
        """A whole number of at least ``low``; ``default`` if the cell is empty or missing."""
        text = self.row.get(column, "")
        if not text:
            return default
        value = self._parsed(column, int, "a whole number")
        if value < low:
            raise self.error(column, f"{value} is below {low}")
        return value

    def size(self, column: str) -> int:
        """Bytes from a size such as ``20GiB``; 0 if the cell is empty or missing."""
        text = self.row.get(column, "")
        if not text:
            return 0
        try:
            return parse_size(text)
        except ValueError as error:
            raise self.error(column, one_line(error)) from None

    def seconds(self, column: str, low: float = 0.0) -> float:
        """Seconds from a number or a duration such as ``7d``, at least ``low``."""
        text = self.row.get(column, "")
        value = self._parsed(column, _seconds, "a time in seconds")
        if value < low:
            raise self.error(column, f"{text[:40]!r} is negative")
        return value

    def _parsed(self, column: str, parse: Callable[[str], _T], what: str) -> _T:
        """The cell read by ``parse``; an error saying it is not ``what`` if it fails."""
        text = self.row.get(column, "")
        try:
            return parse(text)
        except ValueError:
            raise self.error(column, f"{text[:40]!r} is not {what}") from None
