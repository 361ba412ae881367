"""The outbox of notifications: written with the event that causes it, read by the sender.

``Events.add`` notes each event a notification may follow (a run started,
succeeded, failed, was preempted or reached its time limit); just before that
transaction commits, :meth:`Outbox.queue` reads the run as the transaction leaves it
and writes one row per URL that asks for the event: the run's own (``spec.notify``) and
the config's ``[[notify]]`` entries (``Outbox.targets``, set by the daemon). Committed
together, nothing acknowledged loses its notification in a crash.
The sender (runner/notify/sender.py) marks each row delivered (deleted, a ``NOTIFIED``
event), tried again, or given up (kept with ``failed``, a ``NOTIFY_FAILED`` event).

Bounded: :data:`MAX_PENDING_PER_RUN` rows waiting per run,
:data:`MAX_PENDING_PER_WORKSPACE` per workspace, :data:`MAX_PENDING` in all; past one,
the notification is not queued and an event says so. The sender reads the rows of every
workspace in turn (the first of each, then the second of each, …), so a workspace that
floods the outbox delays only its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from runner.notify.outbox import Notice, Pending, StartForecast
from runner.notify.targets import EVENT_OF_CODE, Target, label, stored_targets
from runner.reasons import Reason, ReasonCode, Viewer
from runner.rows import RunRow
from runner.store.core import Core
from runner.store.events import Events
from runner.store.rows import RUN_COLUMNS, RUN_TEMPLATE, run_from_tuple
from runner.store.templates import Templates
from runner.store.tx import Tx

log = logging.getLogger(__name__)

MAX_PENDING_PER_RUN = 32
MAX_PENDING_PER_WORKSPACE = 1000
MAX_PENDING = 10_000
MAX_FAILED_KEPT = 1000  # rows given up on, kept to be looked at; the oldest go first


class Outbox:
    """Reads and writes of ``outbox``: the notifications queued with their events, and
    the sender's marks."""

    def __init__(self, core: Core, events: Events, templates: Templates) -> None:
        self._core = core
        self._events = events
        self._templates = templates
        # the config's [[notify]] entries (the daemon sets them, at start and on a change)
        self.targets: tuple[Target, ...] = ()
        # called after a commit that queued notifications (the sender's wake)
        self.listener: Callable[[], None] | None = None

    def wake(self) -> None:
        """After a commit that queued notifications: the listener called, if any."""
        if self.listener is not None:
            self.listener()

    def queue(self, tx: Tx) -> int:
        """Just before COMMIT: the rows of the events noted in ``tx``; how many."""
        notes, tx._notes = tx._notes, []
        queued = 0
        for name, code, message, now, forecast in notes:
            try:
                queued += self._queue_notice(tx, name, code, message, now, forecast)
            except Exception:  # this notification's, never the change it follows
                log.exception("the notification of run %s's %s was not queued", name, code)
                text = (f"Notification ({EVENT_OF_CODE[code].value}) not queued: the daemon"
                        " failed to queue it (its log says why)")  # fmt: skip
                with contextlib.suppress(Exception):
                    found = tx._sql("SELECT workspace FROM runs WHERE name = ?", (name,)).fetchone()
                    if found is not None:
                        self._events.add(
                            tx,
                            name,
                            found[0],
                            ReasonCode.NOTIFY_FAILED,
                            Reason(text, code=ReasonCode.MESSAGE),
                            now,
                        )
        return queued

    def _queue_notice(
        self, tx: Tx, name: str, code: ReasonCode, message: Reason, now: float,
        forecast: StartForecast | None = None,
    ) -> int:  # fmt: skip
        """The outbox rows of one noted event: its run's URLs and the config's; how many."""
        queued = 0
        sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE name = ?"
        row = tx._sql(sql, (name,)).fetchone()
        if row is None:
            return 0
        tid = row[RUN_TEMPLATE]
        run = run_from_tuple(tuple(row), None if tid is None else self._templates.doc(tid))
        event = EVENT_OF_CODE[code]
        targets = [(t, "") for t in _run_targets(run) if t.wants(event, run.workspace)]
        targets += [
            (t, f"the config's [[notify]] entry {i}: ")
            for i, t in enumerate(self.targets, 1)
            if t.wants(event, run.workspace)
        ]
        if not targets:
            return 0
        notice = Notice(
            event=event,
            run=run.name,
            run_uid=run.run_uid,
            workspace=run.workspace,
            state=run.state.value,
            exit_code=run.exit_code,
            reason=message.render(Viewer(frozenset({run.workspace}))),
            time=now,
            forecast=forecast,
        )
        urls: set[str] = set()
        for target, prefix in targets:
            if target.url in urls:
                continue
            urls.add(target.url)
            if self._outbox_full(tx, run.run_uid, run.workspace):
                text = f"Notification ({event.value}) not queued: too many waiting to be sent"
                self._events.add(
                    tx,
                    run.name,
                    run.workspace,
                    ReasonCode.NOTIFY_FAILED,
                    Reason(text, code=ReasonCode.MESSAGE),
                    now,
                )
                break
            tx._sql(
                "INSERT INTO outbox (run_uid, workspace, event, url, label, notice,"
                " created_at) VALUES (?,?,?,?,?,?,?)",
                (
                    run.run_uid,
                    run.workspace,
                    event.value,
                    target.url,
                    prefix + label(target.url),
                    notice.to_json(),
                    now,
                ),
            )
            queued += 1
        return queued

    def _outbox_full(self, tx: Tx, run_uid: str, workspace: str) -> bool:
        waiting = "SELECT COUNT(*) FROM outbox WHERE failed = 0"
        for where, args, most in (
            (" AND run_uid = ?", (run_uid,), MAX_PENDING_PER_RUN),
            (" AND workspace = ?", (workspace,), MAX_PENDING_PER_WORKSPACE),
            ("", (), MAX_PENDING),
        ):
            if tx._sql(waiting + where, args).fetchone()[0] >= most:
                return True
        return False

    # ------------------------------------------------------------ the sender's side

    def pending(self, limit: int) -> list[Pending]:
        """``limit`` notifications still to be delivered: each workspace's oldest, then
        each one's second oldest, and so on."""
        sql = (
            "SELECT id, url, label, notice, attempts FROM (SELECT *, ROW_NUMBER() OVER"
            " (PARTITION BY workspace ORDER BY id) AS turn FROM outbox WHERE failed = 0)"
            " ORDER BY turn, id LIMIT ?"
        )
        return [
            Pending(r[0], r[1], r[2], Notice.from_json(r[3]), r[4])
            for r in self._core.connect().execute(sql, (limit,))
        ]

    def failed(self) -> list[tuple[Pending, str]]:
        """The notifications given up on, with their last error, oldest first."""
        sql = (
            "SELECT id, url, label, notice, attempts, last_error FROM outbox WHERE failed = 1"
            " ORDER BY id"
        )
        return [
            (Pending(r[0], r[1], r[2], Notice.from_json(r[3]), r[4]), r[5] or "")
            for r in self._core.connect().execute(sql)
        ]

    def delivered(self, row: Pending) -> None:
        with self._core.transaction() as tx:
            tx._sql("DELETE FROM outbox WHERE id = ?", (row.id,))
            text = f"Notification ({row.notice.event.value}) delivered to {row.label}"
            self._run_event(tx, row, ReasonCode.NOTIFIED, Reason(text, code=ReasonCode.MESSAGE))

    def retry(self, row: Pending, error: str) -> None:
        with self._core.transaction() as tx:
            sql = "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?"
            tx._sql(sql, (error, row.id))

    def fail(self, row: Pending, error: str) -> None:
        with self._core.transaction() as tx:
            tx._sql(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, failed = 1"
                " WHERE id = ?",
                (error, row.id),
            )
            tx._sql(
                "DELETE FROM outbox WHERE failed = 1 AND id NOT IN"
                " (SELECT id FROM outbox WHERE failed = 1 ORDER BY id DESC LIMIT ?)",
                (MAX_FAILED_KEPT,),
            )
            tries = row.attempts + 1
            text = (
                f"Notification ({row.notice.event.value}) to {row.label} not delivered after"
                f" {tries} attempt{'s' if tries != 1 else ''}: {error}"
            )
            self._run_event(
                tx,
                row,
                ReasonCode.NOTIFY_FAILED,
                Reason(text, private=True, code=ReasonCode.MESSAGE),
            )

    def _run_event(self, tx: Tx, row: Pending, code: ReasonCode, message: Reason) -> None:
        """An event on the run the notification is of, if it is still kept (by its id)."""
        sql = "SELECT name, workspace FROM runs WHERE run_uid = ?"
        found = tx._sql(sql, (row.notice.run_uid,)).fetchone()
        if found is not None:
            self._events.add(tx, found[0], found[1], code, message)


def _run_targets(run: RunRow) -> tuple[Target, ...]:
    if run.template is None and '"notify"' not in run.spec_text:
        return ()  # the common case, without reading the spec
    try:
        spec = run.spec().get("spec")
    except ValueError:
        return ()
    return stored_targets(spec.get("notify")) if isinstance(spec, dict) else ()
