"""Load and validate the machine's config TOML (:mod:`runner.config.files` writes it).

Every problem raises :class:`ConfigError`, one line that names the file, the key
and what is wrong: ``/etc/astraeus/config.toml: workspaces.vision.quota.gpus:
must be a whole number >= 0, got -1``.

Writing back (:func:`runner.config.files.update_config_file`, used by ``astra
admin quota`` and friends) goes through tomli-w, which cannot keep comments: the file's opening
comment block is kept, comments further down are lost. The shipped default
(:data:`runner.config.files.DEFAULT_CONFIG_TEXT`, identical to ``config/astraeus.toml``) therefore
documents every key in its opening block.

``[api]`` bounds connections to the socket (:class:`ApiLimits`, applied by
``runner/api/guard.py``): ``request_timeout_seconds`` (default 10) for a request's
head and body to arrive, ``idle_timeout_seconds`` (default 5) before a connection
with no request in progress is closed, ``max_connections_per_user`` (default 64)
open connections per Unix user, root included.

``default_image`` (``[machine]``, and per workspace, which goes first) is the image a
run gets when its spec names none; stored in the run as resolved at submit. Unset, it
is ``local`` under the process executor, and such a run is refused under docker.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from runner.config.checks import (
    ALL_USERS,
    _auto,
    _backoff_seconds,
    _child,
    _core_count,
    _cpu_milli,
    _gpu_count,
    _group,
    _Invalid,
    _log_limit,
    _memory_total,
    _name,
    _number,
    _retention,
    _show,
    _size,
    _stop_grace,
    _strings,
    _Table,
    _table,
    _users,
    _whole,
)
from runner.config.idle import IDLE_DEFAULTS, IDLE_KEYS, IdleConfig, parse_idle
from runner.config.metrics import METRICS_KEYS, MetricsConfig, parse_metrics
from runner.model import (
    DEFAULT_STOP_GRACE,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Quota,
    Workspace,
)

if TYPE_CHECKING:
    from runner.config.slurm import SlurmConfig
    from runner.notify.targets import Target

STOP_GRACE_ENV = "ASTRAEUS_STOP_GRACE"
HOME_ENV = "ASTRAEUS_HOME"
CONFIG_ENV = "ASTRAEUS_CONFIG"
EXECUTORS = ("auto", "docker", "process", "slurm")  # slurm: a front for a Slurm cluster
DEFAULT_WORKSPACE = "default"
DEFAULT_RETENTION = 14 * 86_400.0  # seconds a finished run is kept before it is forgotten
DEFAULT_MAX_SUBMIT = 1000  # runs one user may have queued or running at once
DEFAULT_MAX_KEPT = 1000  # finished runs one user keeps
DEFAULT_MAX_KEPT_BYTES = 256 << 20  # of their stored specs
DEFAULT_STATE_RESERVE = 256 << 20  # bytes kept free on the state database's disk
MAX_MAX_SUBMIT = 1_000_000
DEFAULT_LOG_LIMIT = 64 << 20  # bytes per worker's log; the newest part is kept
DEFAULT_LOG_RESERVE = 256 << 20  # bytes kept free on the logs' disk for the state database
DEFAULT_TELEMETRY = 5.0  # seconds between two telemetry samples (runner/telemetry)
MIN_TELEMETRY, MAX_TELEMETRY = 0.2, 3600.0
DEFAULT_BACKOFF, DEFAULT_BACKOFF_MAX = 10.0, 300.0  # seconds ([machine] restart_backoff*)

_TOML_POSITION_RE = re.compile(r"^(.*) \(at (?:line (\d+), column (\d+)|end of document)\)$")

_TOP_KEYS = ("machine", "admins", "api", "workspaces", "drives", "slurm", "notify")
_MACHINE_KEYS = (
    "executor", "gpus", "cpu_cores", "memory", "stop_grace_seconds", "finished_retention",
    "max_submit_per_user", "max_kept_per_user", "max_kept_bytes_per_user", "state_reserve",
    "log_limit", "log_reserve", "default_image", "telemetry_seconds", "restart_backoff",
    "restart_backoff_max", "memory_reserve", "cpu_pinning", *IDLE_KEYS,  # runner/config/idle.py
    "gpu_shards", "mps",
)  # fmt: skip
_ADMINS_KEYS = ("users", "group")
_API_KEYS = (
    "socket_group",
    "request_timeout_seconds",
    "idle_timeout_seconds",
    "max_connections_per_user",
    *METRICS_KEYS,  # runner/config/metrics.py
)
MAX_API_TIMEOUT = 3600.0
MAX_CONNECTIONS = 100_000
_WORKSPACE_KEYS = (
    "members", "max_priority", "weight", "quota", "default_image", "preempt_within_quota"
)  # fmt: skip
_QUOTA_KEYS = ("gpus", "cpu_cores", "memory", "workers", "gpu_memory")
MAX_GPU_SHARDS = 1024
_DRIVE_KEYS = ("path", "workspaces")


class ConfigError(ValueError):
    """A bad config: ``str()`` is ``<file>: <key path>: <what is wrong>``."""

    def __init__(self, source: str, key: str, reason: str) -> None:
        self.source, self.key, self.reason = source, key, reason
        super().__init__(source, key, reason)

    def __str__(self) -> str:
        parts = (self.source, self.key, self.reason)
        return ": ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class MachineConfig:
    """``None`` means "auto": NVML for gpus, the host's cores and memory."""

    executor: str = "auto"
    gpus: int | None = None
    cpu_cores: int | None = None
    memory: int | None = None
    stop_grace_seconds: float = DEFAULT_STOP_GRACE
    # seconds after which a finished run is forgotten (its files removed, its usage kept);
    # None: kept until deleted. Config: finished_retention = "14d" | "12h" | "90s" | "off"
    finished_retention: float | None = DEFAULT_RETENTION
    # runs one user (admins too) may have not yet finished: Queued, Starting, Running
    # or Stopping, like Slurm's MaxSubmitJobs; a submit past it is refused
    max_submit_per_user: int = DEFAULT_MAX_SUBMIT
    # finished runs one user keeps, and the bytes of their stored specs: past either,
    # the oldest are forgotten (their usage kept) before finished_retention
    max_kept_per_user: int = DEFAULT_MAX_KEPT
    max_kept_bytes_per_user: int = DEFAULT_MAX_KEPT_BYTES
    # free space kept on the state database's disk: below it members' submits are
    # refused (507 DISK_FULL); admins' controls and the daemon's own writes go on
    state_reserve: int = DEFAULT_STATE_RESERVE  # 0: none
    log_limit: int = DEFAULT_LOG_LIMIT  # 0: no limit
    log_reserve: int = DEFAULT_LOG_RESERVE  # 0: none
    # the image of a run that names none; None: "local" under the process executor,
    # else such a run is refused. A workspace's default_image goes first.
    default_image: str | None = None
    telemetry_seconds: float = DEFAULT_TELEMETRY  # between two samples of GPUs and runs
    # the wait before a failed run starts again, doubled per failure in a row up to the
    # most (runner/engine/backoff.py); 0: none
    restart_backoff: float = DEFAULT_BACKOFF
    restart_backoff_max: float = DEFAULT_BACKOFF_MAX
    # memory = "auto": this much of the machine's memory is never handed to runs (the
    # daemon's, the system's); None: the larger of 1 GiB and 5 % of it
    memory_reserve: int | None = None
    # local runs get whole cores of their own (a cpuset, near their GPUs where the NUMA
    # node is known) rather than a share of every core
    cpu_pinning: bool = False
    # idle_gpu_after, idle_gpu_threshold, idle_gpu_policy (runner/config/idle.py)
    idle: IdleConfig = IDLE_DEFAULTS
    gpu_shards: int = 8  # a Slurm shard (#SBATCH --gres=shard:N) is a GPU's memory / this
    mps: bool = False  # a shared run's memory limit passed to CUDA MPS in its environment


@dataclass(frozen=True, slots=True)
class Drive:
    """A named host directory; an empty ``workspaces`` lets every workspace mount it."""

    name: str
    path: Path
    workspaces: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ApiLimits:
    """``[api]``: how long a request may take to arrive, how long a connection may sit
    idle, and how many connections one Unix user may hold open at once."""

    request_timeout_seconds: float = 10.0
    idle_timeout_seconds: float = 5.0
    max_connections_per_user: int = 64


@dataclass(frozen=True)
class Config:
    path: Path | None
    machine: MachineConfig
    admins: frozenset[str]
    admin_group: str | None
    socket_group: str | None
    workspaces: dict[str, Workspace]
    drives: dict[str, Drive]
    default_workspace: str
    slurm: SlurmConfig | None = None  # executor = "slurm": the [slurm] table
    api: ApiLimits = ApiLimits()
    notify: tuple[Target, ...] = ()  # [[notify]]: runner/config/notify.py
    metrics: MetricsConfig = MetricsConfig()  # noqa: RUF009 (frozen) [api] metrics_*

    def workspaces_of(self, user: str) -> frozenset[str]:
        """The workspaces whose members include ``user`` (or everyone)."""
        return frozenset(
            name
            for name, ws in self.workspaces.items()
            if user in ws.members or ALL_USERS in ws.members
        )

    def is_admin(self, user: str, groups: Iterable[str] = ()) -> bool:
        if user in self.admins:
            return True
        return self.admin_group is not None and self.admin_group in set(groups)

    def drive_allowed(self, drive: str, workspace: str) -> bool:
        found = self.drives.get(drive)
        return found is not None and (not found.workspaces or workspace in found.workspaces)


# ------------------------------------------------------------------ sections


def _seconds(value: object, path: str) -> float:
    if not _number(value) or not 0 < value <= MAX_API_TIMEOUT:
        raise _Invalid(
            path, f"must be a number of seconds above 0, at most {MAX_API_TIMEOUT:g}, "
            f"got {_show(value)}",
        )  # fmt: skip
    return float(value)


def _api_limits(api: _Table) -> ApiLimits:
    default = ApiLimits()
    return ApiLimits(
        _seconds(api.get("request_timeout_seconds", default.request_timeout_seconds),
                 "api.request_timeout_seconds"),
        _seconds(api.get("idle_timeout_seconds", default.idle_timeout_seconds),
                 "api.idle_timeout_seconds"),
        _whole(api.get("max_connections_per_user", default.max_connections_per_user),
               "api.max_connections_per_user", 1, MAX_CONNECTIONS),
    )  # fmt: skip


def _machine(value: object, env: Mapping[str, str]) -> MachineConfig:
    table = _table(value, "machine", _MACHINE_KEYS)
    executor = table.get("executor", "auto")
    if executor not in EXECUTORS:
        raise _Invalid(
            "machine.executor", f"must be one of {', '.join(EXECUTORS)}, got {_show(executor)}"
        )
    grace = _stop_grace(
        table.get("stop_grace_seconds", DEFAULT_STOP_GRACE), "machine.stop_grace_seconds"
    )
    override: object = env.get(STOP_GRACE_ENV, "").strip()
    if override:
        with suppress(ValueError):
            override = float(str(override))
        grace = _stop_grace(override, STOP_GRACE_ENV)
    return MachineConfig(
        executor=str(executor),
        gpus=_auto(table.get("gpus", "auto"), "machine.gpus", _gpu_count),
        cpu_cores=_auto(table.get("cpu_cores", "auto"), "machine.cpu_cores", _core_count),
        memory=_auto(table.get("memory", "auto"), "machine.memory", _memory_total),
        stop_grace_seconds=grace,
        finished_retention=_retention(
            table.get("finished_retention", "14d"), "machine.finished_retention"
        ),
        max_submit_per_user=_max_submit(table),
        max_kept_per_user=_whole(
            table.get("max_kept_per_user", DEFAULT_MAX_KEPT),
            "machine.max_kept_per_user",
            1,
            MAX_MAX_SUBMIT,
        ),
        max_kept_bytes_per_user=_size(
            table.get("max_kept_bytes_per_user", DEFAULT_MAX_KEPT_BYTES),
            "machine.max_kept_bytes_per_user",
        ),
        state_reserve=_size(
            table.get("state_reserve", DEFAULT_STATE_RESERVE), "machine.state_reserve"
        ),
        log_limit=_log_limit(table.get("log_limit", DEFAULT_LOG_LIMIT), "machine.log_limit"),
        log_reserve=_size(table.get("log_reserve", DEFAULT_LOG_RESERVE), "machine.log_reserve"),
        default_image=_default_image(table.get("default_image"), "machine.default_image"),
        telemetry_seconds=_telemetry(table.get("telemetry_seconds", DEFAULT_TELEMETRY)),
        **_backoff(table),
        memory_reserve=None
        if "memory_reserve" not in table
        else _size(table["memory_reserve"], "machine.memory_reserve"),
        idle=parse_idle(table),
        gpu_shards=_whole(table.get("gpu_shards", 8), "machine.gpu_shards", 1, MAX_GPU_SHARDS),
        mps=_flag(table.get("mps", False), "machine.mps"),
        cpu_pinning=_flag(table.get("cpu_pinning", False), "machine.cpu_pinning"),
    )


def _backoff(table: _Table) -> dict[str, float]:
    first = _backoff_seconds(table.get("restart_backoff", "10s"), "machine.restart_backoff")
    most = _backoff_seconds(table.get("restart_backoff_max", "5m"), "machine.restart_backoff_max")
    if most < first:
        raise _Invalid(
            "machine.restart_backoff_max",
            f"must be at least restart_backoff ({_show(table.get('restart_backoff', '10s'))}), "
            f"got {_show(table.get('restart_backoff_max', '5m'))}",
        )
    return {"restart_backoff": first, "restart_backoff_max": most}


def _flag(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(path, f"must be true or false, got {_show(value)}")
    return value


def _telemetry(value: object) -> float:
    if not _number(value) or not MIN_TELEMETRY <= value <= MAX_TELEMETRY:
        raise _Invalid(
            "machine.telemetry_seconds",
            f"must be a number of seconds between {MIN_TELEMETRY:g} and {MAX_TELEMETRY:g}, "
            f"got {_show(value)}",
        )
    return float(value)


MAX_IMAGE = 4096


def _default_image(value: object, path: str) -> str | None:
    """An image reference: a non-empty string without spaces or control characters."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_IMAGE
        or any(c.isspace() or not c.isprintable() for c in value)
    ):
        raise _Invalid(path, f"must be an image reference without spaces, got {_show(value)}")
    return value


def _max_submit(table: _Table) -> int:
    value = table.get("max_submit_per_user", DEFAULT_MAX_SUBMIT)
    return _whole(value, "machine.max_submit_per_user", 1, MAX_MAX_SUBMIT)


def _quota(value: object, path: str) -> Quota | None:
    table = _table(value, path, _QUOTA_KEYS)
    gpus, cores, memory, workers, gpu_memory = (table.get(key) for key in _QUOTA_KEYS)
    quota = Quota(
        gpus=None if gpus is None else _whole(gpus, f"{path}.gpus", 0),
        cpu_milli=None if cores is None else _cpu_milli(cores, f"{path}.cpu_cores"),
        memory=None if memory is None else _size(memory, f"{path}.memory"),
        workers=None if workers is None else _whole(workers, f"{path}.workers", 0),
        gpu_memory=None if gpu_memory is None else _size(gpu_memory, f"{path}.gpu_memory"),
    )
    return None if quota.is_empty() else quota


def _workspace(name: str, value: object) -> Workspace:
    path = _child("workspaces", name)
    _name(name, path, "workspace")
    table = _table(value, path, _WORKSPACE_KEYS)
    weight = table.get("weight", 1.0)
    if not _number(weight) or weight <= 0:
        raise _Invalid(f"{path}.weight", f"must be a number > 0, got {_show(weight)}")
    quota = table.get("quota")
    return Workspace(
        name=name,
        quota=None if quota is None else _quota(quota, f"{path}.quota"),
        weight=float(weight),
        max_priority=_whole(
            table.get("max_priority", 0), f"{path}.max_priority", MIN_PRIORITY, MAX_PRIORITY
        ),
        members=_users(table.get("members", []), f"{path}.members", allow_all=True),
        default_image=_default_image(table.get("default_image"), f"{path}.default_image"),
        preempt_within_quota=_flag(
            table.get("preempt_within_quota", False), f"{path}.preempt_within_quota"
        ),
    )


def _drive(name: str, value: object, workspaces: Mapping[str, Workspace]) -> Drive:
    path = _child("drives", name)
    _name(name, path, "drive")
    table = _table(value, path, _DRIVE_KEYS)
    where = table.get("path")
    if where is None:
        raise _Invalid(f"{path}.path", "required: the absolute path of a host directory")
    if not isinstance(where, str) or not where.startswith("/"):
        raise _Invalid(f"{path}.path", f"must be an absolute path, got {_show(where)}")
    if not Path(where).is_dir():
        raise _Invalid(f"{path}.path", f"{_show(where)} is not an existing directory")
    allowed = _strings(table.get("workspaces", []), f"{path}.workspaces")
    if "workspaces" in table and not allowed:
        raise _Invalid(
            f"{path}.workspaces",
            "must name at least one workspace (leave it out to let every workspace use the drive)",
        )
    for index, ws in enumerate(allowed):
        if ws not in workspaces:
            raise _Invalid(
                f"{path}.workspaces[{index}]",
                f"no workspace named {_show(ws)} (defined: {', '.join(workspaces)})",
            )
    return Drive(name=name, path=Path(where), workspaces=tuple(dict.fromkeys(allowed)))


def implicit_workspaces() -> dict[str, dict[str, object]]:
    """The [workspaces] table of a config that defines none: default, everyone a member
    (as the config would write it)."""
    return {DEFAULT_WORKSPACE: {"members": [ALL_USERS]}}


def _workspaces(value: object) -> dict[str, Workspace]:
    tables = _table(value, "workspaces", None) or implicit_workspaces()
    return {name: _workspace(name, v) for name, v in tables.items()}


def _build(data: _Table, env: Mapping[str, str]) -> Config:
    """Check the sections in order: machine, admins and api, workspaces, drives."""
    top = _table(data, "", _TOP_KEYS)
    machine = _machine(top.get("machine", {}), env)
    admins = _table(top.get("admins", {}), "admins", _ADMINS_KEYS)
    api = _table(top.get("api", {}), "api", _API_KEYS)
    workspaces = _workspaces(top.get("workspaces", {}))
    drives = {
        name: _drive(name, value, workspaces)
        for name, value in _table(top.get("drives", {}), "drives", None).items()
    }
    default = DEFAULT_WORKSPACE if DEFAULT_WORKSPACE in workspaces else next(iter(workspaces))
    slurm = None
    if machine.executor == "slurm" or "slurm" in top:
        from runner.config.slurm import SlurmConfigError, parse_slurm  # lazy: its own stack

        try:
            slurm = parse_slurm(top.get("slurm", {}))
        except SlurmConfigError as e:
            raise _Invalid(e.key, e.reason) from None
    notify: tuple[Target, ...] = ()
    if "notify" in top:
        from runner.config.notify import parse_notify  # lazy: only a [[notify]] loads Apprise

        notify = parse_notify(top["notify"], workspaces)
    return Config(
        path=None,
        machine=machine,
        admins=frozenset(_users(admins.get("users", ["root"]), "admins.users", allow_all=False)),
        admin_group=_group(admins.get("group"), "admins.group"),
        socket_group=_group(api.get("socket_group"), "api.socket_group"),
        workspaces=workspaces,
        drives=drives,
        default_workspace=default,
        slurm=slurm,
        api=_api_limits(api),
        notify=notify,
        metrics=parse_metrics(api),
    )


# ------------------------------------------------------------------ reading


def _loads(text: str, source: str) -> _Table:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = _TOML_POSITION_RE.match(str(error))
        if match is None:
            raise ConfigError(source, "", f"invalid TOML: {error}") from None
        what, line, column = match.groups()
        where = f"line {line}, column {column}" if line else f"line {text.count(chr(10)) + 1}"
        raise ConfigError(source, where, f"invalid TOML: {what}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(str(path), "", "not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(str(path), "", f"cannot read: {error.strerror or error}") from None


def parse_config(
    text: str, *, source: str = "<config>", env: Mapping[str, str] | None = None
) -> Config:
    """A checked Config from TOML text; ``env`` (default os.environ) may override the grace."""
    data = _loads(text, source)
    try:
        return _build(data, os.environ if env is None else env)
    except _Invalid as error:
        raise ConfigError(source, error.key, error.reason) from None


def load_config(path: Path, *, env: Mapping[str, str] | None = None) -> Config:
    config = parse_config(_read(path), source=str(path), env=env)
    return replace(config, path=path)
