"""``GET /v1/runs``: the queue for one caller, encoded once from the wire Structs.

The runs are rendered for the caller (runner/api/views.py ``run_views``), sorted as the
queue shows them (running first, then the planner's order) and encoded with msgspec
straight from the Structs: the documented keys in their order (runner/schema.py).
``?fields=`` sends only the named fields of each run (in the object's order).

A body is kept for the next identical request (same caller's view, same query) while
nothing it was made from has moved: the store's generation (bumped by every transaction
that changed a row) and the published plan's version (bumped by every new plan and every
change of its estimates). A list with a run stopping under a deadline (its grace left
changes by the second) is never kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
from aiohttp import web

from runner import schema
from runner.api.views import run_views
from runner.model import RunState
from runner.reasons import Viewer
from runner.service.runs import Caller, ServiceError
from runner.shown import Shown

if TYPE_CHECKING:
    from runner.api.served import Daemon

RUN_FIELDS = schema.Run.__struct_fields__
_RUNNING = (RunState.RUNNING, RunState.STOPPING, RunState.STARTING)
KEPT = 2  # bodies kept (each a whole queue): one caller's repeated `astra ls`, and one more


def fields_of(query: Mapping[str, str]) -> tuple[str, ...] | None:
    """``?fields=id,name,state``: the run fields to send, in the object's order; None: all."""
    if "fields" not in query:
        return None
    wanted = {f.strip() for f in query["fields"].split(",") if f.strip()}
    unknown = sorted(wanted.difference(RUN_FIELDS))
    if unknown:
        raise ServiceError(400, "BAD_REQUEST", f"fields: no run field {', '.join(unknown)[:200]}")
    return tuple(f for f in RUN_FIELDS if f in wanted)


@dataclass(frozen=True, slots=True)
class _Made:
    """What a kept body was made from: the store's generation, the published version."""

    generation: int
    published: int


class ListCache:
    """The last bodies, by (viewer, query)."""

    def __init__(self) -> None:
        self._bodies: dict[tuple[Viewer, tuple[tuple[str, str], ...]], tuple[_Made, bytes]] = {}

    def get(self, key: tuple[Viewer, tuple[tuple[str, str], ...]], made: _Made) -> bytes | None:
        kept = self._bodies.get(key)
        return kept[1] if kept is not None and kept[0] == made else None

    def put(
        self, key: tuple[Viewer, tuple[tuple[str, str], ...]], made: _Made, body: bytes
    ) -> None:
        if key not in self._bodies and len(self._bodies) >= KEPT:
            self._bodies.pop(next(iter(self._bodies)))
        self._bodies[key] = (made, body)


LISTS: web.AppKey[ListCache] = web.AppKey("lists", ListCache)


def list_body(
    daemon: Daemon, caller: Caller, query: Mapping[str, str],
    shown: Shown, cache: ListCache,
) -> bytes:  # fmt: skip
    """The body of ``GET /v1/runs?{query}`` for ``caller``, with the plan and estimates
    ``shown``."""
    fields = fields_of(query)
    made = _Made(daemon.service.runs_generation(), shown.version)  # before the reads
    key = (caller.viewer, tuple(sorted(query.items())))
    body = cache.get(key, made)
    if body is not None:
        return body
    states = [s.strip() for s in query["state"].split(",")] if "state" in query else None
    runs = daemon.service.list_runs(
        caller, everything=query.get("all") in ("1", "true"), workspace=query.get("workspace"),
        group=query.get("group"), states=states,
    )  # fmt: skip
    loop = daemon.loop
    views = run_views(runs, loop.spec_shown, caller.viewer, shown, daemon.service.live_by_run(),
                      loop.clock(), shown.estimates, loop.idle)  # fmt: skip
    views.sort(key=lambda v: (v.state not in _RUNNING, v.position or 1 << 30))
    if fields is None:
        body = msgspec.json.encode(schema.RunList(runs=views))
    else:
        body = msgspec.json.encode({"runs": [
            {f: getattr(v, f) for f in fields if getattr(v, f) is not schema.UNSET}
            for v in views
        ]})  # fmt: skip
    if not any(v.stop_deadline is not None for v in views):  # no grace counting down
        cache.put(key, made, body)
    return body
