"""The worker that empties the outbox: a thread of the daemon, never the loop's.

It reads the store's pending notifications, sends each through :func:`deliver`, and
writes what came of it: delivered (the row goes, a ``NOTIFIED`` event), or tried again
after an exponential back-off (1 s, 2 s, 4 s … at most 5 min between tries), or after
:data:`MAX_ATTEMPTS` tries given up (a ``NOTIFY_FAILED`` event). The back-off is
measured on the monotonic clock and kept in memory: after a restart every pending row
is due at once, its count of attempts kept in the store.

Sends run on their own threads, at most :data:`PARALLEL` at once and one at a time to
each URL, and nothing waits for a round of them: each is recorded as it ends, and a
free place is given at once to the next due row of another target. A send has an
overall deadline (:data:`SEND_DEADLINE`, connect + send + answer), whatever its scheme:
past it, it is recorded as failed (retried with the back-off), its connections are cut
(runner/notify/deliver.py: HTTP and mail alike) and it no longer takes a place, even
while its thread has not ended. So a receiver that accepts and never answers, or
trickles its answer, holds one place for at most that long. The places are shared
evenly among the workspaces with a send due (the config's entries counting as one
more), so one workspace's slow receivers take at most its share, and the store hands
out the workspaces' rows in turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from runner.notify.deliver import SEND_DEADLINE, cut, deliver
from runner.notify.outbox import Notice, Pending

log = logging.getLogger("astraeus.notify")

MAX_ATTEMPTS = 8
FIRST_DELAY = 1.0  # seconds before the second try; doubled each time
MAX_DELAY = 300.0
BATCH = 500  # rows read at a time
PARALLEL = 4  # sends at once
# send threads alive at most, those past their deadline (cut, not yet ended) included:
# a late send never takes a place from a due one, this only bounds the threads
MAX_THREADS = 32
IDLE_WAIT = 5.0  # seconds between looks at the outbox when nothing wakes the sender


class Outbox(Protocol):
    """The store's side (runner/store/outbox.py)."""

    def pending(self, limit: int) -> list[Pending]: ...
    def delivered(self, row: Pending) -> None: ...
    def retry(self, row: Pending, error: str) -> None: ...
    def fail(self, row: Pending, error: str) -> None: ...


def _whose(row: Pending) -> str:
    """Whose send a row is, for the places: the config's entries' (admins), else its
    run's workspace's."""
    return "" if row.label.startswith("the config's") else row.notice.workspace


def backoff(attempts: int, first: float = FIRST_DELAY) -> float:
    """Seconds to wait after the ``attempts``-th failed try."""
    return float(min(MAX_DELAY, first * 2 ** max(0, attempts - 1)))


@dataclass
class _Flight:
    """One send under way."""

    row: Pending
    deadline: float  # on the monotonic clock
    future: Future[str | None] | None = None
    thread: list[int] = field(default_factory=list)  # the thread sending, once it runs
    late: bool = False  # recorded as failed at its deadline; its thread not yet ended


class Sender:
    def __init__(
        self,
        outbox: Outbox,
        send: Callable[[str, Notice], str | None] = deliver,
        *,
        first_delay: float = FIRST_DELAY,
        attempts: int = MAX_ATTEMPTS,
        monotonic: Callable[[], float] = time.monotonic,
        deadline: float = SEND_DEADLINE,
        cut: Callable[[int], None] = cut,
    ) -> None:
        self.outbox = outbox
        self.send = send
        self.first_delay = first_delay
        self.attempts = attempts
        self.monotonic = monotonic
        self.deadline = deadline
        self.cut = cut
        self._due: dict[int, float] = {}  # row id -> when it may be tried again
        self._flights: dict[int, _Flight] = {}  # row id -> its send under way
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        """New rows were committed, or a send ended: look now (called from any thread)."""
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
        for flight in list(self._flights.values()):
            for thread in flight.thread:
                self.cut(thread)

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
        """Record the sends that ended (or passed their deadline), start the due rows that
        have a place; the seconds until the next look (a send's end wakes it sooner)."""
        now = self.monotonic()
        self._settle(now)
        rows = self.outbox.pending(BATCH)
        if len(rows) < BATCH:  # every row read: forget the rows that are gone
            live = {row.id for row in rows}
            self._due = {k: v for k, v in self._due.items() if k in live}
        busy = {f.row.url for f in self._flights.values()}  # one send at a time to a URL
        due = [row for row in rows if row.id not in self._flights and row.url not in busy
               and self._due.get(row.id, now) <= now]  # fmt: skip
        active = [f for f in self._flights.values() if not f.late]
        places = self._places(due, active)
        taken = {who: sum(_whose(f.row) == who for f in active) for who in places}
        for row in due:
            if len(active) >= PARALLEL or len(self._flights) >= MAX_THREADS:
                break
            who = _whose(row)
            if row.url in busy or taken[who] >= places[who]:
                continue
            busy.add(row.url)
            taken[who] += 1
            active.append(self._launch(row, now))
        waits = [f.deadline - now for f in self._flights.values() if not f.late]
        waits += [self._due[row.id] - now for row in rows
                  if row.id in self._due and row.id not in self._flights]  # fmt: skip
        return max(0.05, min([IDLE_WAIT, *waits]))

    @staticmethod
    def _places(due: list[Pending], active: list[_Flight]) -> dict[str, int]:
        """Each sender's (a workspace's runs', or the config's entries') share of the
        PARALLEL places: an even share of them among those with a send due or under way,
        at least one; all of them when only one has any."""
        who = {_whose(row) for row in due} | {_whose(f.row) for f in active}
        share = max(1, PARALLEL // max(1, len(who)))
        return dict.fromkeys(who, share)

    def idle(self, timeout: float) -> bool:
        """Wait until no send is under way (for tests and a clean stop); True if none is."""
        end = time.monotonic() + timeout
        while True:
            futures = [f.future for f in self._flights.values() if f.future is not None]
            if all(f.done() for f in futures):
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)

    def _launch(self, row: Pending, now: float) -> _Flight:
        """The send on a thread of its own: one past its deadline is cut and no longer
        takes a place, whether or not its thread has ended yet."""
        flight = _Flight(row, now + self.deadline)
        self._flights[row.id] = flight
        future: Future[str | None] = Future()
        flight.future = future

        def send() -> None:
            try:
                future.set_result(self._send(flight))
            except BaseException as exc:  # recorded as the send's failure
                future.set_exception(exc)
            finally:
                self._wake.set()

        threading.Thread(target=send, name="astraeus-notify-send", daemon=True).start()
        return flight

    def _settle(self, now: float) -> None:
        for flight in list(self._flights.values()):
            future = flight.future
            if future is not None and future.done():
                del self._flights[flight.row.id]
                if not flight.late:  # a late one was recorded at its deadline
                    self._record(flight.row, None if future.cancelled() else future.result())
            elif not flight.late and now >= flight.deadline:
                flight.late = True
                for thread in flight.thread:
                    self.cut(thread)  # its read ends; until then it keeps its URL busy
                self._record(flight.row, f"no answer within {self.deadline:g} s")

    def _send(self, flight: _Flight) -> str | None:
        flight.thread.append(threading.get_ident())
        row = flight.row
        if flight.late:  # past its deadline before a thread took it: not sent now
            return None
        try:
            return self.send(row.url, row.notice)
        except Exception as e:  # Apprise's own failure is this notification's, not ours
            log.info("notification %d to %s failed: %s: %s", row.id, row.label,
                     type(e).__name__, e)  # fmt: skip
            return "the service failed"  # its words may say what it found on this machine

    def _record(self, row: Pending, error: str | None) -> None:
        if error is None:
            self.outbox.delivered(row)
            self._due.pop(row.id, None)
            return
        tries = row.attempts + 1
        if tries >= self.attempts:
            self.outbox.fail(row, error)
            self._due.pop(row.id, None)
            return
        self.outbox.retry(row, error)
        delay = backoff(tries, self.first_delay)
        self._due[row.id] = self.monotonic() + delay
        log.info("notification %d to %s: %s; again in %.0f s", row.id, row.label, error, delay)
