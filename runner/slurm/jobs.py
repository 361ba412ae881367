"""What squeue says of jobs, as small dataclasses. Pure: text in, :class:`SlurmJob` out.

Two readers, one result:

- :func:`parse_squeue_json` reads ``squeue --json``. Slurm 22.05 (openapi
  v0.0.38) writes plain numbers (an exit code as a raw wait status, a negative
  nice as its unsigned 32-bit twin, a nice of 0 as null); Slurm 23.02 and later
  (data_parser) wrap numbers as ``{"set", "infinite", "number"}``, states as
  lists and exit codes as objects. Both are read. ``--json`` lists every job
  whatever filter is given, so callers filter the result.
- :func:`parse_squeue_format` reads ``squeue --noheader --Format`` with the
  fields of :data:`FORMAT_FIELDS`, each ended by a unit separator (``\\x1f``),
  for a Slurm whose ``--json`` does not work. It cannot see GPU indices.

Times are seconds since the epoch. A pending job's ``start`` is Slurm's
estimate (what ``squeue --start`` shows). Slurm treats a job without a time
limit as ending in a year, so an estimate that far out means "unknown":
:func:`start_estimate` says None.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from runner.runspec.parse import SpecError
from runner.runspec.sbatch import slurm_time
from runner.slurm.errors import SlurmError

SEPARATOR = "\x1f"
YEAR = 365 * 86400
UNKNOWN_AFTER = 300 * 86400  # an estimate this far out comes from a job with no time limit
_NO_VAL = 0xFFFFFFFE  # Slurm's "not set" and "infinite" for 32-bit numbers
_GPU_RE = re.compile(r"(?:^|,)(?:gres[:/])?gpu(?::[^:,=]+)?[:=](\d+)")
_IDX_RE = re.compile(r"IDX:([0-9,\-]+)")
_EMPTY = ("", "(null)", "N/A", "n/a", "Unknown", "NONE")


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as squeue shows it.

    ``state`` is Slurm's base state (``PENDING``, ``RUNNING``, ``COMPLETED``…),
    ``reason`` its reason code (``Resources``, ``Priority``, ``None``…).
    ``gpus`` is what the job asks for in all; ``gpu_indices`` the GPUs it holds
    (JSON only, while it runs). ``restarts`` counts every requeue, preemptions
    included. ``exit_code`` is the shell's convention: 128 + n for signal n.
    """

    job_id: int
    name: str
    state: str
    reason: str = "None"
    partition: str = ""
    account: str = ""
    user: str = ""
    comment: str = ""
    nice: int = 0
    priority: int = 0
    submitted: float | None = None
    start: float | None = None
    end: float | None = None
    time_limit_seconds: int | None = None
    restarts: int = 0
    exit_code: int | None = None
    gpus: int = 0
    gpu_indices: tuple[int, ...] = ()
    tasks: int = 1
    nodes: str = ""
    description: str = ""
    preempt_time: float | None = None  # JSON only: when a preemption's grace began (running)

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"


def start_estimate(job: SlurmJob, now: float) -> float | None:
    """When a pending job should start, by Slurm's estimate; None when it cannot say."""
    if not job.pending or job.start is None or job.start - now > UNKNOWN_AFTER:
        return None
    return job.start


# ------------------------------------------------------------------ JSON


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Every job in ``squeue --json`` output; SlurmError (one line) if it is not that."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise SlurmError(f"squeue --json printed something that is not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise SlurmError("squeue --json printed no list of jobs")
    errors = [e for e in document.get("errors") or [] if e]
    if errors:
        raise SlurmError(f"squeue --json: {_error_text(errors[0])}")
    return [_job_from_json(entry) for entry in document["jobs"] if isinstance(entry, dict)]


def _job_from_json(entry: Mapping[str, object]) -> SlurmJob:
    tasks = _number(entry.get("tasks")) or 1
    nodes = _number(entry.get("node_count")) or 1
    limit = _number(entry.get("time_limit"))
    return SlurmJob(
        job_id=_number(entry.get("job_id")) or 0,
        name=_text(entry.get("name")),
        state=_state(entry.get("job_state")),
        reason=_text(entry.get("state_reason")) or "None",
        partition=_text(entry.get("partition")),
        account=_text(entry.get("account")),
        user=_text(entry.get("user_name")),
        comment=_text(entry.get("comment")),
        nice=_nice(entry.get("nice")),
        priority=_number(entry.get("priority")) or 0,
        submitted=_time(entry.get("submit_time")),
        start=_time(entry.get("start_time")),
        end=_known_end(_time(entry.get("start_time")), _time(entry.get("end_time"))),
        time_limit_seconds=_known_limit(None if limit is None else limit * 60),
        restarts=_number(entry.get("restart_cnt")) or 0,
        exit_code=_exit_code(entry.get("exit_code")),
        gpus=_gpu_total(
            _text(entry.get("tres_per_job")),
            _text(entry.get("tres_per_node")),
            _text(entry.get("tres_per_task")),
            nodes,
            tasks,
        ),
        gpu_indices=gpu_indices(_strings(entry.get("gres_detail"))),
        tasks=tasks,
        nodes=_text(entry.get("nodes")),
        description=_text(entry.get("state_description")),
        preempt_time=_time(entry.get("preempt_time")),
    )


def _number(value: object) -> int | None:
    """An int from a plain number or a ``{"set", "infinite", "number"}`` object."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if _NO_VAL <= value <= _NO_VAL + 1 else int(value)


def _nice(value: object) -> int:
    """22.05 writes a nice of 0 as null and a negative one as its unsigned 32-bit twin."""
    if isinstance(value, dict):
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value - 2**32 if value >= 2**31 else value


def _time(value: object) -> float | None:
    seconds = _number(value)
    return float(seconds) if seconds else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _state(value: object) -> str:
    """``"RUNNING"`` (22.05) or ``["RUNNING", "COMPLETING"]`` (23.02+): the base state."""
    if isinstance(value, list):
        value = value[0] if value else ""
    return _text(value).split()[0].upper() if _text(value).strip() else "UNKNOWN"


def _exit_code(value: object) -> int | None:
    if isinstance(value, dict):  # 23.02+: {"status", "return_code", "signal": {"id"}}
        signal = value.get("signal")
        number = _number(signal.get("id")) if isinstance(signal, dict) else None
        if number:
            return 128 + number
        return _number(value.get("return_code"))
    status = _number(value)
    return None if status is None else decode_exit_status(status)


def decode_exit_status(status: int) -> int:
    """A raw wait status as the shell shows it: the exit code, or 128 + the signal."""
    signal = status & 0x7F
    return 128 + signal if signal else (status >> 8) & 0xFF


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return _text(error.get("error")) or _text(error.get("description")) or str(error)
    return str(error)


# ------------------------------------------------------------------ GPUs


def _gpu_total(per_job: str, per_node: str, per_task: str, nodes: int, tasks: int) -> int:
    return gpu_count(per_job) + gpu_count(per_node) * nodes + gpu_count(per_task) * tasks


def gpu_count(tres: str) -> int:
    """GPUs in a TRES or GRES string: ``gres:gpu:2``, ``gres/gpu:a100=2``, ``gpu:2``…"""
    return sum(int(match.group(1)) for match in _GPU_RE.finditer(tres))


def gpu_indices(details: Sequence[str]) -> tuple[int, ...]:
    """The GPU indices in squeue's ``gres_detail``: ``["gpu:2(IDX:0-1)"]`` -> ``(0, 1)``."""
    found: list[int] = []
    for detail in details:
        if not detail.startswith("gpu"):
            continue
        for match in _IDX_RE.finditer(detail):
            for part in match.group(1).split(","):
                low, _, high = part.partition("-")
                if low.isdigit() and (not high or high.isdigit()):
                    found.extend(range(int(low), int(high or low) + 1))
    return tuple(sorted(set(found)))


# ------------------------------------------------------------------ --Format

# (field of SlurmJob or a helper name, squeue --Format type), in output order.
FORMAT_FIELDS = (
    ("job_id", "JobID"),
    ("state", "State"),
    ("reason", "Reason"),
    ("partition", "Partition"),
    ("account", "Account"),
    ("user", "UserName"),
    ("nice", "Nice"),
    ("priority", "PriorityLong"),
    ("submitted", "SubmitTime"),
    ("start", "StartTime"),
    ("end", "EndTime"),
    ("time_limit", "TimeLimit"),
    ("restarts", "RestartCnt"),
    ("exit_status", "exit_code"),
    ("tres_per_job", "tres-per-job"),
    ("tres_per_node", "tres-per-node"),
    ("tres_per_task", "tres-per-task"),
    ("tasks", "NumTasks"),
    ("node_count", "NumNodes"),
    ("nodes", "NodeList"),
    ("comment", "Comment"),
    ("name", "Name"),
)


def squeue_format() -> str:
    """The ``--Format`` argument that :func:`parse_squeue_format` reads."""
    return ",".join(f"{kind}:{SEPARATOR}" for _, kind in FORMAT_FIELDS)


def parse_squeue_format(text: str) -> list[SlurmJob]:
    """Jobs from ``squeue --noheader --Format=<squeue_format()>``; SlurmError on a bad line."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split(SEPARATOR)
        if len(values) != len(FORMAT_FIELDS) + 1 or values[-1].strip():
            raise SlurmError(f"squeue printed a line that does not match its format: {line[:80]!r}")
        fields = {
            key: value.strip() for (key, _), value in zip(FORMAT_FIELDS, values, strict=False)
        }
        jobs.append(_job_from_fields(fields))
    return jobs


def _job_from_fields(f: Mapping[str, str]) -> SlurmJob:
    tasks = _int(f["tasks"]) or 1
    nodes = _int(f["node_count"]) or 1
    status = _int(f["exit_status"])
    return SlurmJob(
        job_id=_int(f["job_id"]) or 0,
        name=f["name"],
        state=_state(f["state"]),
        reason=f["reason"] or "None",
        partition=_blank(f["partition"]),
        account=_blank(f["account"]),
        user=_blank(f["user"]),
        comment=_blank(f["comment"]),
        nice=_int(f["nice"]) or 0,
        priority=_int(f["priority"]) or 0,
        submitted=parse_timestamp(f["submitted"]),
        start=parse_timestamp(f["start"]),
        end=_known_end(parse_timestamp(f["start"]), parse_timestamp(f["end"])),
        time_limit_seconds=_limit(f["time_limit"]),
        restarts=_int(f["restarts"]) or 0,
        exit_code=None if status is None else decode_exit_status(status),
        gpus=_gpu_total(f["tres_per_job"], f["tres_per_node"], f["tres_per_task"], nodes, tasks),
        tasks=tasks,
        nodes=_blank(f["nodes"]),
    )


def parse_timestamp(text: str) -> float | None:
    """``2026-11-29T12:50:52`` (squeue's standard format, read as UTC) -> epoch seconds."""
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None  # N/A, Unknown, None


def _limit(text: str) -> int | None:
    try:
        return _known_limit(slurm_time(text, "TimeLimit"))
    except SpecError:
        return None  # NOT_SET, INVALID


def _known_end(start: float | None, end: float | None) -> float | None:
    """The end of a job with a time limit; None for one without (Slurm says: in a year)."""
    if end is None or (start is not None and end - start >= YEAR):
        return None
    return end


def _known_limit(seconds: int | None) -> int | None:
    """A running job without a limit shows one of a year (365-00:00:00): that is none."""
    return None if seconds is None or seconds >= YEAR else seconds


def _int(text: str) -> int | None:
    try:
        return _number(int(text))
    except ValueError:
        return None


def _blank(text: str) -> str:
    return "" if text in _EMPTY else text
