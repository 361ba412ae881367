"""The dashboard's only door to the daemon while the main screen is up.

An invisible widget that runs the I/O in workers and posts what it learns as
messages (up to the screen, which hands the data down to the panels):

- the change stream (``GET /v1/stream``): a snapshot, then changes, merged
  into one pending ``Batch``; ``RunsChanged`` carries nothing and replaces an
  unhandled one, so a burst of changes costs the screen one merge (Toolong's
  ``can_replace``);
- ``/v1/gpus`` every 2 s, ``/v1/status`` and ``/v1/workspaces`` every 5 s,
  ``/v1/telemetry?history=5m`` every 5 s (the GPU panel's sparklines);
- for each run that starts, whether it was backfilled: its run object's
  ``backfilled``, as the stream last sent it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from textual import work
from textual.message import Message
from textual.widget import Widget

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.queue_model import Batch
from astraeus_tui.widgets import Latest
from runner.schema import Change, GpuList, Run, Snapshot, Telemetry

GPU_EVERY = 2.0
TELEMETRY_EVERY = 5.0
TELEMETRY_BACK = "5m"  # what the sparklines show
MACHINE_EVERY = 5.0
RETRY_EVERY = 2.0


class LiveFeed(Widget):
    DEFAULT_CSS = "LiveFeed { display: none; }"

    class RunsChanged(Latest):
        """Runs changed; ``LiveFeed.drain()`` has them."""

    class Gpus(Latest):
        def __init__(self, gpus: GpuList) -> None:
            super().__init__()
            self.gpus = gpus

    class Machine(Latest):
        def __init__(self, status: dict[str, Any], workspaces: list[dict[str, Any]]) -> None:
            super().__init__()
            self.status, self.workspaces = status, workspaces

    class Sampled(Latest):
        """The daemon's telemetry, with the last minutes of each GPU's samples."""

        def __init__(self, telemetry: Telemetry) -> None:
            super().__init__()
            self.telemetry = telemetry

    class Connection(Message):
        def __init__(self, connected: bool, error: str = "") -> None:
            super().__init__()
            self.connected, self.error = connected, error

    class Started(Message):
        """How a run's latest attempt started: planned, or backfilled behind the head."""

        def __init__(self, run_id: str, started_at: str | None, backfilled: bool) -> None:
            super().__init__()
            self.run_id, self.started_at, self.backfilled = run_id, started_at, backfilled

    def __init__(self, client: DashboardApi, clock: Callable[[], float]) -> None:
        super().__init__()
        self.client, self.clock = client, clock
        self._batch = Batch()
        self._backfilled: dict[str, bool] = {}  # run id -> its run object's ``backfilled``

    def on_mount(self) -> None:
        self.follow_stream()
        self.poll_gpus()
        self.poll_machine()
        self.poll_telemetry()

    @property
    def idle(self) -> bool:
        """No change waits to be merged and no start waits to be looked up."""
        batch = self._batch
        return batch.snapshot is None and not (batch.upsert or batch.remove or batch.moved)

    def drain(self) -> Batch:
        batch, self._batch = self._batch, Batch()
        return batch

    def look_up_starts(self, runs: dict[str, str | None]) -> None:
        """Say, for these run ids (with their ``started_at``), whether they backfilled."""
        for rid, started_at in sorted(runs.items()):
            self.post_message(self.Started(rid, started_at, self._backfilled.get(rid, False)))

    # ------------------------------------------------------------ workers

    @work(exclusive=True, group="stream", exit_on_error=False)
    async def follow_stream(self) -> None:
        while True:
            try:
                async for event, data in self.client.changes():
                    self._take(event, data)
                error = "the daemon closed the change stream"
            except ApiError as e:
                error = str(e)
            except Exception as e:
                error = f"lost the daemon: {e or type(e).__name__}"
            self.post_message(self.Connection(False, error))
            await asyncio.sleep(RETRY_EVERY)

    def _take(self, event: str, data: Snapshot | Change) -> None:
        at = self.clock()
        if isinstance(data, Snapshot):
            self._batch = Batch(snapshot=list(data.runs), at=at)
            self._backfilled.clear()
            self._note_backfilled(self._batch.snapshot or ())
            self.post_message(self.Connection(True))
        elif isinstance(data, Change):
            self._batch.add_change(data.upsert, data.remove, at, data.moved)
            self._note_backfilled(data.upsert)
            for rid in data.remove:
                self._backfilled.pop(rid, None)
        else:
            return
        self.post_message(self.RunsChanged())

    def _note_backfilled(self, runs: Iterable[Run]) -> None:
        for run in runs:
            self._backfilled[run.id] = bool(run.backfilled)

    @work(exclusive=True, group="gpus", exit_on_error=False)
    async def poll_gpus(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the stream reports a lost daemon
                self.post_message(self.Gpus(await self.client.gpus()))
            await asyncio.sleep(GPU_EVERY)

    @work(exclusive=True, group="machine", exit_on_error=False)
    async def poll_machine(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the stream reports a lost daemon
                status = await self.client.status()
                workspaces = await self.client.workspaces()
                self.post_message(self.Machine(status, workspaces))
            await asyncio.sleep(MACHINE_EVERY)

    @work(exclusive=True, group="telemetry", exit_on_error=False)
    async def poll_telemetry(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the stream reports a lost daemon
                found = await self.client.telemetry(history=TELEMETRY_BACK)
                if found.time is not None:  # sampled at least once (never before Slurm)
                    self.post_message(self.Sampled(found))
            await asyncio.sleep(TELEMETRY_EVERY)
