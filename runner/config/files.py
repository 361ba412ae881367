"""The config's files: the shipped default written on first start, atomic admin edits.

``runner.config.load`` reads and checks a config; this module writes one: the default
when none exists (never over one), and ``astra admin`` changes, each checked as a
whole before it replaces the file atomically.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

import tomli_w

from runner.config.checks import _Table
from runner.config.load import (
    CONFIG_ENV,
    HOME_ENV,
    Config,
    ConfigError,
    _loads,
    _read,
    parse_config,
)

# ------------------------------------------------------------------ writing


def _header(text: str) -> str:
    """The file's opening block of comments (and blank lines), without trailing blanks."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines).rstrip()


def update_config_file(
    path: Path, mutate: Callable[[_Table], None], *, env: Mapping[str, str] | None = None
) -> Config:
    """Apply ``mutate`` to the config's TOML as a dict and write it back, if still valid.

    An invalid result raises ConfigError and leaves the file as it was. The write
    is atomic and keeps the file's mode (and owner, where allowed). Comments are
    lost except the opening comment block. Writers are serialised with a lock on
    the directory.
    """
    target = Path(os.path.realpath(path))  # a symlinked config stays a symlink
    with _locked(target.parent):
        old = _read(path)
        data = _loads(old, str(path))
        mutate(data)
        try:
            body = tomli_w.dumps(data)
        except TypeError as error:
            raise ConfigError(str(path), "", f"cannot write as TOML: {error}") from None
        header = _header(old)
        new = f"{header}\n\n{body}" if header else body
        config = replace(parse_config(new, source=str(path), env=env), path=path)
        info = os.stat(target)
        _write_atomic(target, new, stat.S_IMODE(info.st_mode), owner=(info.st_uid, info.st_gid))
    return config


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_atomic(
    path: Path,
    text: str,
    mode: int,
    *,
    owner: tuple[int, int] | None = None,
    exclusive: bool = False,
) -> None:
    """Write via a temporary file in the same directory, fsync, then rename (or link).

    ``exclusive`` links instead of renaming, so an existing file is never replaced
    (FileExistsError).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if owner is not None:
                with suppress(PermissionError):
                    os.fchown(handle.fileno(), *owner)
            os.fsync(handle.fileno())
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# ------------------------------------------------------------------ home


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$ASTRAEUS_HOME``, or ``~/.astraeus``."""
    value = (os.environ if env is None else env).get(HOME_ENV, "")
    return Path(value).expanduser() if value else Path.home() / ".astraeus"


def config_path(home: Path, env: Mapping[str, str] | None = None) -> Path:
    """``$ASTRAEUS_CONFIG`` (a lab server's /etc/astraeus/config.toml), or home/config.toml."""
    value = (os.environ if env is None else env).get(CONFIG_ENV, "")
    return Path(value).expanduser() if value else home / "config.toml"


def ensure_config(home: Path, env: Mapping[str, str] | None = None) -> Path:
    """The config's path; writes the shipped default there first when it is missing.

    A config that ASTRAEUS_CONFIG names is never written: a missing one is an error.
    """
    path = config_path(home, env)
    if not path.exists():
        if (os.environ if env is None else env).get(CONFIG_ENV):
            raise ConfigError(str(path), "", f"does not exist ({CONFIG_ENV} names it)")
        home.mkdir(parents=True, exist_ok=True)
        with suppress(FileExistsError):
            _write_atomic(path, DEFAULT_CONFIG_TEXT, 0o644, exclusive=True)
    return path


# The shipped default; config/astraeus.toml holds the same text (a test checks).
DEFAULT_CONFIG_TEXT = """\
# Astraeus configuration: the machine's side of the scheduler.
#
# `astra serve` reads $ASTRAEUS_HOME/config.toml (default ~/.astraeus/config.toml)
# and writes this file there when it is missing. `astra admin quota`,
# `astra admin max-priority` and `astra admin weight` rewrite the file: they keep
# this opening comment block but drop comments further down, so the notes that
# matter are all here.
#
# [machine]
#   executor            "auto" (Docker when the engine answers, else local
#                       processes) | "docker" | "process" | "slurm" (a front
#                       for a Slurm cluster: see [slurm] in the README)
#   gpus                "auto": the GPUs NVML reports; without NVML, simulated
#                       GPUs ($ASTRAEUS_SIM_GPUS of them, default 2)
#                       | N: N simulated GPUs, whatever the hardware
#   cpu_cores           "auto" (every core) | a whole number of cores
#   memory              "auto" (all memory but memory_reserve) | a size such as
#                       "512GiB"
#   memory_reserve      with memory = "auto", what is never handed to runs (the
#                       system's, the daemon's): default the larger of 1 GiB and 5 %
#   cpu_pinning         true: a local run asking CPU cores gets whole cores of its
#                       own (a cpuset, near its GPUs where the NUMA node is known)
#                       rather than a share of every core (default false)
#   stop_grace_seconds  seconds between SIGTERM and SIGKILL on every stop
#                       (preemption, time limit, delete); the environment
#                       variable ASTRAEUS_STOP_GRACE overrides it
#   restart_backoff     the wait before a failed run starts again (default
#                       "10s"), doubled with each failure in a row up to
#                       restart_backoff_max (default "5m"); an attempt that
#                       ran 10 minutes starts it again from the first; "0s": none
#   finished_retention  how long a finished (Succeeded, Failed, Cancelled) run
#                       is kept: "14d" (the default), "12h", "1h30m", "90s"; then
#                       it is forgotten as by `astra delete`: its name is free,
#                       its logs are removed, its usage stays in the accounting.
#                       "off" keeps finished runs until they are deleted
#   max_submit_per_user runs one user may have queued or running at once
#                       (Queued, Starting, Running, Stopping), admins too,
#                       like Slurm's MaxSubmitJobs; default 1000. A submit,
#                       sweep or schedule firing past it is refused
#                       (429 TOO_MANY_RUNS)
#   max_kept_per_user   finished runs one user keeps (default 1000): past it the
#                       oldest are forgotten before finished_retention (their
#                       usage kept)
#   max_kept_bytes_per_user  the same by the bytes of their stored specs
#                       (default "256MiB")
#   state_reserve       free space kept on the state database's disk (default
#                       "256MiB"): below it members' submits are refused
#                       (507 DISK_FULL); admins' and the daemon's writes go on
#   log_limit           the most one worker's log keeps (default "64MiB"): past
#                       it the oldest output is cut, and the log says so; 0: none
#   log_reserve         free space kept on the logs' disk (default "256MiB"):
#                       below it output is dropped, and the log says so; 0: none
#   default_image       the image of a run that names none (astra run without
#                       --image); unset: "local" under the process executor,
#                       refused under docker
#   telemetry_seconds   seconds between two samples of the GPUs and the running
#                       runs (astra top, GET /v1/telemetry); default 5
#   idle_gpu_after      a run whose GPUs stay at or under idle_gpu_threshold
#                       for this long is idle: an event (GPU_IDLE) and the mark
#                       "idle 25m" in astra ls; default "30m"; "off": never
#   idle_gpu_threshold  percent utilisation at or under which a GPU is idle
#                       (default 5)
#   idle_gpu_policy     "warn" (the default: the event and the mark) | "stop":
#                       an idle run is also stopped with the grace, and fails
#   gpu_shards          a Slurm shard (#SBATCH --gres=shard:N) is a GPU's memory
#                       divided by this (default 8)
#   mps                 true: a run sharing a GPU by memory is told its limit in
#                       CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (default false)
# [admins]
#   users               Unix users who see every run and may change anything
#   group               optional: members of this Unix group are admins too
# [api]
#   socket_group        optional: the Unix group that owns the daemon's socket
#   request_timeout_seconds   a request's head and body must arrive within this
#                       (default 10); a slower one is answered 408 and closed
#   idle_timeout_seconds      a connection with no request in progress is
#                       closed after this (default 5); streams are not idle
#   max_connections_per_user  open connections one Unix user may hold (default
#                       64); one more is answered 429 TOO_MANY_CONNECTIONS
#   metrics_address     optional "host:port" (e.g. "127.0.0.1:9480"): GET /metrics
#                       also served there, over TCP, to anyone who reaches it;
#                       unset: only on the socket. Read at the daemon's start
#   metrics_run_names   true: /metrics names running runs (and their workspaces)
#                       for every scraper (default false: no run is named)
# [workspaces.<name>]   name: 1-63 lowercase letters, digits or '-'
#   members             Unix user names; "*" means every user of the machine
#   max_priority        the highest priority its runs may ask (-1000..1000)
#   default_image       optional: its runs' image when they name none (before
#                       [machine] default_image)
#   weight              fair-share weight (> 0); a larger weight, a larger share
#   quota               optional hard ceiling, any of
#                       { gpus = 8, cpu_cores = 64, memory = "512GiB", workers = 4,
#                         gpu_memory = "160GiB" }  (a whole GPU counts as its memory)
#   preempt_within_quota  true: a run over the quota only because of this
#                       workspace's own lower-priority running work stops that work
#                       (default false: it waits for its quota as any run does)
# [drives.<name>]       a host directory that runs mount by name
#   path                absolute path of an existing directory
#   workspaces          optional: the workspaces that may mount it (default: all)
# [[notify]]           an Apprise URL told of runs' events (any number of entries)
#   url                 e.g. "json://host:9000/hook", "mailto://localhost?to=lab@x",
#                       "ntfy://topic", "slack://…" (the schemes: docs/api.md)
#   url_file            instead: a file (root's, mode 0600) holding a URL with a
#                       secret (a token, a password): this file is readable by all
#   url_env             instead: the daemon's environment variable holding the URL
#   events              any of "succeeded", "failed", "preempted", "started",
#                       "timelimit" (default ["succeeded", "failed"])
#   workspaces          optional: only these workspaces' runs (default: all)
#
# Example drive (create the directory first):
#   [drives.checkpoints]
#   path = "/srv/astraeus/drives/checkpoints"
#   workspaces = ["default"]

[machine]
executor = "auto"
gpus = "auto"
cpu_cores = "auto"
memory = "auto"
stop_grace_seconds = 30
finished_retention = "14d"
max_submit_per_user = 1000

[admins]
users = ["root"]

# Every user of the machine may run here, at priority 0 or lower, without a quota.
[workspaces.default]
members = ["*"]
max_priority = 0
weight = 1.0
"""
