"""A worker's output, copied from Docker to its log file by a thread of its own.

Logs: a daemon thread per worker follows ``docker logs --follow --timestamps``
and appends the output (timestamps stripped) to the worker's log file. After
each write the file's mtime is set to the Docker timestamp of the last line
written, so a restarted daemon that adopts the container resumes with
:meth:`DockerExecutor.follow_logs`: it asks Docker for the lines since that
mtime and skips any at or before it. Nothing is lost or repeated, except
output written in the instant between a write and the mtime update when the
daemon dies there. The log path is also kept in the ``io.astraeus.log`` label, and its
bounds (``log_limit``, ``log_reserve``: :mod:`runner.executors.logcap`) in
``io.astraeus.log-limit`` and ``io.astraeus.log-reserve``.
A container is named by its run's id (``io.astraeus.run-uid``), not by the run's name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.executors.base import ExecutorError
from runner.executors.docker.errors import describe
from runner.executors.logcap import CappedLog

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(
    rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ?",
)


def split_timestamp(chunk: bytes) -> tuple[int | None, bytes]:
    """Split a ``docker logs --timestamps`` frame into (unix time in ns, payload)."""
    match = _TIMESTAMP.match(chunk)
    if match is None:
        return None, chunk
    base, fraction, zone = (g.decode() if g else "" for g in match.groups())
    zone = "+00:00" if zone == "Z" else zone
    try:
        seconds = int(datetime.fromisoformat(base + zone).timestamp())
    except ValueError:
        return None, chunk
    return seconds * 1_000_000_000 + int(fraction.ljust(9, "0")), chunk[match.end() :]


# ---------------------------------------------------------------- log following


class LogFollower:
    """A daemon thread appending one container's output to its log file.

    The thread never raises: a removed container, a stopped engine or
    :meth:`stop` just end the stream.
    """

    def __init__(
        self, api: Any, handle: str, log_path: Path, since_ns: int | None, bounds: tuple[int, int]
    ) -> None:
        self._api = api
        self.handle = handle
        self.log_path = log_path
        self.bounds = bounds  # (log_limit, log_reserve)
        self._since_ns = since_ns
        self._stream: Any = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"logs-{handle}", daemon=True)

    def stop(self) -> None:
        """Stop following (the container is not touched)."""
        self._stopped.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):  # closing a dying socket may fail any way
                stream.close()

    def _run(self) -> None:
        since_ns = self._since_ns
        since = max(since_ns / 1e9 - 1.0, 1.0) if since_ns else None
        try:
            stream = self._api.logs(
                self.handle, stream=True, follow=True, timestamps=True, since=since
            )
            with self._lock:
                self._stream = stream
            if self._stopped.is_set():
                stream.close()
                return
            out = CappedLog(self.log_path, *self.bounds)
            try:
                newest = since_ns
                for chunk in stream:
                    if self._stopped.is_set():
                        break
                    written = _append(out, chunk, since_ns)
                    if written is not None and (newest is None or written > newest):
                        newest = written
                if not self._stopped.is_set():
                    self._catch_up(out, newest)
            finally:
                out.close()
        except OSError as err:
            log.warning("cannot write the log of %s to %s: %s", self.handle, self.log_path, err)
        except Exception as err:  # a daemon thread must end quietly, whatever happened
            log.debug("log stream of %s ended: %s", self.handle, describe(err))

    def _catch_up(self, out: CappedLog, since_ns: int | None) -> None:
        """A followed stream may end before the last lines of a container that has just
        exited: read what Docker has after the last line written, once, unfollowed."""
        since = max(since_ns / 1e9 - 1.0, 1.0) if since_ns else None
        for chunk in self._api.logs(self.handle, stream=True, follow=False, timestamps=True,
                                    since=since):  # fmt: skip
            _append(out, chunk, since_ns)  # only what is newer than all the stream gave


def _append(out: CappedLog, chunk: bytes, since_ns: int | None) -> int | None:
    """Write the frame unless it is at or before ``since_ns``; its time when written."""
    ts_ns, payload = split_timestamp(chunk)
    if since_ns is not None and ts_ns is not None and ts_ns <= since_ns:
        return None  # already in the file (before a restart, or read twice)
    out.write(payload)
    if ts_ns is not None:
        os.utime(out.fileno(), ns=(ts_ns, ts_ns))
    return ts_ns


def resume_point(log_path: Path) -> int | None:
    """The Docker timestamp of the last line in ``log_path`` (its mtime), if any."""
    try:
        stat = log_path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns if stat.st_size > 0 else None


def make_log_folder(handle: str, log_path: Path) -> None:
    if str(log_path) == os.devnull:
        return
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExecutorError(f"cannot create the log folder of {handle}: {err}") from err
