"""The events table: what happened to each run (and to each group), in order.

An event a notification may follow is noted in its transaction; the outbox queues its
notifications just before that transaction commits (runner/store/outbox.py).
"""

from __future__ import annotations

import time

from runner.notify.outbox import StartForecast
from runner.notify.targets import EVENT_OF_CODE
from runner.reasons import Reason, ReasonCode, event_kind
from runner.rows import EventRow
from runner.store.core import Core
from runner.store.rows import _event, reason_json
from runner.store.tx import Tx


class Events:
    """Reads and writes of ``events``."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def add(
        self, tx: Tx, run: str, workspace: str, code: ReasonCode, message: Reason,
        now: float | None = None, grp: str | None = None, forecast: StartForecast | None = None,
    ) -> None:  # fmt: skip
        """An event of a run; of a group when ``grp`` is given (``run`` then names the group).

        ``code`` says what happened; the kind people read is its name (``event_kind``).
        ``forecast``: a start's, what the run was first forecast (its notification says it)."""
        when = time.time() if now is None else now
        if grp is None and code in EVENT_OF_CODE:  # a notification may follow it
            tx._notes.append((run, code, message, when, forecast))
        tx._sql(
            "INSERT INTO events (run, workspace, time, kind, message, grp, code)"
            " VALUES (?,?,?,?,?,?,?)",
            (
                run,
                workspace,
                when,
                event_kind(code),
                reason_json(message),
                grp,
                code.value,
            ),
        )

    def all(
        self, run: str | None = None, *, after: int = 0, grp: str | None = None
    ) -> list[EventRow]:
        """The events after id ``after``, oldest first: of run ``run``, or of group ``grp``."""
        sql, args = "SELECT * FROM events WHERE id > ?", [after]
        if run is not None:
            sql += " AND run = ? AND grp IS NULL"
            args.append(run)  # type: ignore[arg-type]  # mixed int/str parameters
        if grp is not None:
            sql += " AND grp = ? AND run = grp"
            args.append(grp)  # type: ignore[arg-type]  # mixed int/str parameters
        rows = self._core.connect().execute(sql + " ORDER BY id", args)
        return [_event(r) for r in rows]
