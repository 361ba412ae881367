"""After a restart: the executor's workers the store knows are adopted, others stopped."""

from __future__ import annotations

import logging
import signal
from collections.abc import Mapping
from pathlib import Path

from runner.executors.base import Executor, ExecutorError, Observed

log = logging.getLogger("astraeus.loop")


def adopt(executor: Executor, known: Mapping[str, Path]) -> None:
    """Every worker ``executor`` lists: one the store knows (``known``: its handle to its
    log file) is adopted, its log copy resumed where the executor copies logs (Docker);
    one still running that the store does not know is killed, one ended is cleaned up."""
    follow = executor.capabilities.copies_logs
    for listed in executor.list_workers():
        if listed.handle in known:
            if follow:  # to the file named by the run's id
                executor.follow_logs(listed.handle, known[listed.handle])
            continue
        status = executor.status(listed.handle)
        if status.state is Observed.RUNNING:
            log.warning("stopping %s: not in the state database", listed.handle)
            try:
                executor.signal(listed.handle, signal.SIGKILL)
            except ExecutorError as e:
                log.warning("could not stop %s: %s", listed.handle, e)
        else:
            try:
                executor.cleanup(listed.handle)
            except ExecutorError as e:
                log.warning("could not clean up %s: %s", listed.handle, e)
