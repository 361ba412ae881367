"""The ``[slurm]`` table of the config: where a front for Slurm sends each run.

    [machine]
    executor = "slurm"          # the daemon plans nothing itself: Slurm does

    [slurm]
    pyxis = false               # containers through pyxis (--container-image)
    privileged = true           # the daemon submits as root: priorities above 0 work
    log_dir = "/shared/astraeus/logs"   # job output, on the shared filesystem
    workdir = "/shared/work"
    bin_dir = "/usr/bin"        # where sbatch, squeue, scancel and scontrol are
    partition = "low"           # the default target
    priority_partitions = { high = 1 }  # priority >= 1 goes to partition high
    [slurm.workspaces.vision]
    partition = "low"
    account = "vision"
    [slurm.drives]
    checkpoints = "/shared/checkpoints"

Raises the config's own error (one line naming the key) on anything wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SlurmTarget:
    """Where a workspace's jobs go; None leaves it to Slurm's defaults."""

    partition: str | None = None
    account: str | None = None


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    """What the daemon knows of the cluster (from its config).

    ``drives`` maps a drive's name to its path on the shared filesystem.
    ``priority_partitions`` lists (lowest priority, partition): a run takes the
    partition of the highest entry its priority reaches, over its workspace's.
    ``privileged``: the submitter is root or a Slurm operator (negative nice).
    """

    workspaces: Mapping[str, SlurmTarget] = field(default_factory=dict)
    default: SlurmTarget = SlurmTarget()
    priority_partitions: tuple[tuple[int, str], ...] = ()
    drives: Mapping[str, str] = field(default_factory=dict)
    pyxis: bool = False
    log_dir: str | None = None
    workdir: str | None = None
    requeue: bool = True
    privileged: bool = False


_KEYS = (
    "pyxis", "privileged", "log_dir", "workdir", "bin_dir", "partition", "account",
    "priority_partitions", "workspaces", "drives",
)  # fmt: skip
_TARGET_KEYS = ("partition", "account")


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    settings: SlurmSettings
    bin_dir: str | None = None


class SlurmConfigError(ValueError):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(key, reason)
        self.key, self.reason = key, reason


def _table(value: object, path: str, keys: tuple[str, ...] | None) -> dict[str, object]:
    if not isinstance(value, dict):
        raise SlurmConfigError(path, "must be a table")
    for key in value:
        if keys is not None and key not in keys:
            raise SlurmConfigError(
                f"{path}.{key}", f"unknown key (expected one of: {', '.join(keys)})"
            )
    return value


def _text(value: object, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise SlurmConfigError(path, "must be a non-empty string without spaces")
    return value


def _flag(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise SlurmConfigError(path, "must be true or false")
    return value


def _target(value: object, path: str) -> SlurmTarget:
    table = _table(value, path, _TARGET_KEYS)
    return SlurmTarget(
        _text(table.get("partition"), f"{path}.partition"),
        _text(table.get("account"), f"{path}.account"),
    )


def parse_slurm(value: object) -> SlurmConfig:
    table = _table(value, "slurm", _KEYS)
    tiers = _table(table.get("priority_partitions", {}), "slurm.priority_partitions", None)
    priority_partitions = []
    for partition, lowest in tiers.items():
        if not isinstance(lowest, int) or isinstance(lowest, bool):
            raise SlurmConfigError(f"slurm.priority_partitions.{partition}", "must be a priority")
        priority_partitions.append((lowest, partition))
    workspaces = _table(table.get("workspaces", {}), "slurm.workspaces", None)
    drives = _table(table.get("drives", {}), "slurm.drives", None)
    settings = SlurmSettings(
        workspaces={name: _target(t, f"slurm.workspaces.{name}") for name, t in workspaces.items()},
        default=_target({k: table[k] for k in _TARGET_KEYS if k in table}, "slurm"),
        priority_partitions=tuple(sorted(priority_partitions)),
        drives={name: _required_path(p, f"slurm.drives.{name}") for name, p in drives.items()},
        pyxis=_flag(table.get("pyxis", False), "slurm.pyxis"),
        log_dir=_path(table.get("log_dir"), "slurm.log_dir"),
        workdir=_path(table.get("workdir"), "slurm.workdir"),
        privileged=_flag(table.get("privileged", False), "slurm.privileged"),
    )
    return SlurmConfig(settings, _path(table.get("bin_dir"), "slurm.bin_dir"))


def _path(value: object, path: str) -> str | None:
    text = _text(value, path)
    if text is not None and not text.startswith("/"):
        raise SlurmConfigError(path, "must be an absolute path")
    return text


def _required_path(value: object, path: str) -> str:
    text = _path(value, path)
    if text is None:
        raise SlurmConfigError(path, "must be an absolute path")
    return text
