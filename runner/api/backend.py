"""Which back end the daemon serves, asked in one place: its own loop, or a front for Slurm
(which plans the queue, runs the jobs and numbers the GPUs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.daemon.daemon import Daemon
    from runner.slurm.front import SlurmFront


def slurm_front(daemon: Daemon) -> SlurmFront | None:
    """The daemon's front for Slurm; None when it plans and runs the work itself."""
    return daemon.front


def is_slurm_front(daemon: Daemon) -> bool:
    """Whether the daemon is a front for Slurm."""
    return slurm_front(daemon) is not None
