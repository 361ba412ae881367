"""A run's requests carried to its Slurm job: a delete becomes ``scancel``, a priority
change ``scontrol update nice`` (and ``partition``, when the priority reaches another tier).

A request Slurm does not take now (slurmctld away) is tried again on the next tick; a
nice this user may not set is said once, in the run's events.
"""

from __future__ import annotations

import logging

from runner.config.slurm import SlurmSettings
from runner.model import StopReason
from runner.reasons import Reason, ReasonCode
from runner.slurm.client import SlurmClient
from runner.slurm.errors import SlurmError
from runner.slurm.jobs import SlurmJob
from runner.slurm.reasons import priority_of
from runner.slurm.script import nice_for, partition_for
from runner.store.db import RunRow, Store

log = logging.getLogger("astraeus.slurm")
OPEN_STATES = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING")  # a job requests still reach


class Requests:
    def __init__(self, store: Store, client: SlurmClient, settings: SlurmSettings) -> None:
        self.store = store
        self.client = client
        self.settings = settings
        self._nice_refused: dict[str, int] = {}  # run -> the priority Slurm would not take

    def carry(self, run: RunRow, job: SlurmJob | None, now: float) -> bool:
        """Whether the run changed (an event written)."""
        if job is None or job.state not in OPEN_STATES:
            return False
        if run.stop_request == StopReason.DELETE:
            try:
                self.client.cancel(job.job_id)
            except SlurmError as e:
                log.warning("scancel %s: %s", job.job_id, e)
            return False
        asked = (
            priority_of(job) != run.priority and self._nice_refused.get(run.name) != run.priority
        )
        if asked and not self._nice(run, job, now):
            return True  # refused: said in its events
        wanted = partition_for(run.priority, self.settings, run.workspace)
        if job.pending and wanted and wanted not in job.partition.split(","):
            try:  # a priority that reaches another tier moves a pending job there
                self.client.set_partition(job.job_id, wanted)
            except SlurmError as e:
                log.warning("scontrol update partition for %s: %s", job.job_id, e)
        return False

    def _nice(self, run: RunRow, job: SlurmJob, now: float) -> bool:
        """The run's priority as the job's nice; False when it may not be set (said once)."""
        try:
            nice = nice_for(run.priority, privileged=self.settings.privileged)
        except SlurmError as e:  # not allowed here: said once
            self._nice_refused[run.name] = run.priority
            text = Reason(f"Slurm kept its priority: {e}", code=ReasonCode.MESSAGE)
            with self.store.transaction() as tx:
                self.store.events.add(tx, run.name, run.workspace, ReasonCode.SLURM, text, now)
            return False
        try:
            self.client.set_nice(job.job_id, nice)
        except SlurmError as e:  # slurmctld away, or it refused: tried again next tick
            log.warning("scontrol update nice for %s: %s", job.job_id, e)
        return True
