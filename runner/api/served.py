"""What the API needs of the daemon it serves, as a protocol: the API never imports the
daemon (a layer above it); runner.daemon.daemon.Daemon is the one that implements it.

Its own module, not runner/api/context.py: the streams need it, and context.py imports
the streams (the change feed's app key).
"""

from __future__ import annotations

from typing import Protocol

from runner.config.load import Config
from runner.gpus import Inventory
from runner.service.explain import Explainer
from runner.service.groups import GroupService
from runner.service.loopview import LoopView
from runner.service.runs import Service
from runner.service.telemetry import Telemetry

__all__ = ["Daemon"]


class Daemon(Protocol):
    config: Config  # the current one (admin commands change it: apply_config)
    service: Service  # runs: every read with its visibility rule, every change
    groups: GroupService
    explainer: Explainer  # why a run waits, what a submit would do
    loop: LoopView  # the back end as read: what it published, its clock, what it can do
    inventory: Inventory  # the GPUs as found at the start
    executor_why: str  # why this executor: shown by the status route
    not_enforced: str | None  # what a run is not held to here, and why (status, gpus)
    metrics_state: str  # [api] metrics_address's listener: listening, or why not yet
    telemetry: Telemetry  # GPUs' and runs' readings for a caller (none in front of Slurm)

    def apply_config(self, config: Config) -> None:
        """A changed config (admin commands): workspaces and drives take effect now."""
