"""The worker that empties the outbox: a thread of the daemon, never the loop's.

It reads the store's pending notifications, sends each through :func:`deliver`, and
writes what came of it: delivered (the row goes, a ``NOTIFIED`` event), or tried again
after an exponential back-off (1 s, 2 s, 4 s … at most 5 min between tries), or after
:data:`MAX_ATTEMPTS` tries given up (a ``NOTIFY_FAILED`` event). The back-off is
measured on the monotonic clock and kept in memory: after a restart every pending row
is due at once, its count of attempts kept in the store.

Each round sends at most :data:`PARALLEL` due rows at once, then reads the outbox
again: a round lasts at most one send's bounded time (runner/notify/deliver.py), and the
store hands out the workspaces' rows in turn, so a notification of a quiet workspace
waits for a round or two, whatever another workspace has queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from runner.notify.deliver import deliver
from runner.notify.outbox import Notice, Pending

log = logging.getLogger("astraeus.notify")

MAX_ATTEMPTS = 8
FIRST_DELAY = 1.0  # seconds before the second try; doubled each time
MAX_DELAY = 300.0
BATCH = 500  # rows read at a time
PARALLEL = 4  # sends at once
IDLE_WAIT = 5.0  # seconds between looks at the outbox when nothing wakes the sender


class Outbox(Protocol):
    """The store's side (runner/store/outbox.py)."""

    def pending_notices(self, limit: int) -> list[Pending]: ...
    def notice_delivered(self, row: Pending) -> None: ...
    def notice_retry(self, row: Pending, error: str) -> None: ...
    def notice_failed(self, row: Pending, error: str) -> None: ...


def backoff(attempts: int, first: float = FIRST_DELAY) -> float:
    """Seconds to wait after the ``attempts``-th failed try."""
    return float(min(MAX_DELAY, first * 2 ** max(0, attempts - 1)))


class Sender:
    def __init__(
        self,
        outbox: Outbox,
        send: Callable[[str, Notice], str | None] = deliver,
        *,
        first_delay: float = FIRST_DELAY,
        attempts: int = MAX_ATTEMPTS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.outbox = outbox
        self.send = send
        self.first_delay = first_delay
        self.attempts = attempts
        self.monotonic = monotonic
        self._due: dict[int, float] = {}  # row id -> when it may be tried again
        self._pool = ThreadPoolExecutor(PARALLEL, thread_name_prefix="astraeus-notify-send")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        """New rows were committed: look now (called from any thread)."""
        self._wake.set()

    def start(self) -> Sender:
        self._thread = threading.Thread(target=self._run, name="astraeus-notify", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self.round()
            except Exception:  # the store unwritable for now (disk full): try later
                log.exception("notifications: the outbox cannot be read or written")
                wait = IDLE_WAIT
            if wait > 0:
                self._wake.wait(wait)
            self._wake.clear()

    def round(self) -> float:
        """Send up to PARALLEL due rows; the seconds until the next look."""
        now = self.monotonic()
        rows = self.outbox.pending_notices(BATCH)
        if len(rows) < BATCH:  # every row read: forget the rows that are gone
            live = {row.id for row in rows}
            self._due = {k: v for k, v in self._due.items() if k in live}
        due = [row for row in rows if self._due.get(row.id, now) <= now][:PARALLEL]
        if not due:
            waits = [self._due[row.id] - now for row in rows if row.id in self._due]
            return max(0.05, min([IDLE_WAIT, *waits]))
        errors = list(self._pool.map(self._send, due))
        for row, error in zip(due, errors, strict=True):
            self._record(row, error)
        return 0.0  # look again at once: more may be due

    def _send(self, row: Pending) -> str | None:
        try:
            return self.send(row.url, row.notice)
        except Exception as e:  # Apprise's own failure is this notification's, not ours
            return f"{type(e).__name__}: {e}"

    def _record(self, row: Pending, error: str | None) -> None:
        if error is None:
            self.outbox.notice_delivered(row)
            self._due.pop(row.id, None)
            return
        tries = row.attempts + 1
        if tries >= self.attempts:
            self.outbox.notice_failed(row, error)
            self._due.pop(row.id, None)
            return
        self.outbox.notice_retry(row, error)
        delay = backoff(tries, self.first_delay)
        self._due[row.id] = self.monotonic() + delay
        log.info("notification %d to %s: %s; again in %.0f s", row.id, row.label, error, delay)
