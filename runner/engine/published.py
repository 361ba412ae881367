"""What a back end publishes after each plan: the plan and every waiting run's start
estimate, as one immutable :class:`Published` that the API and the change stream only read.

The loop publishes a plan at once, with the estimates made before it (``current``
False). Estimates replay the queue forward (about 0.3 s at 10,000 waiting runs), so a
helper thread the loop owns (:class:`Publisher`) makes them off the loop's tick and off
the API's event loop, and publishes them with the plan they were made for: after a plan,
not sooner after the last than twice what the last took (a burst of plans is estimated
once, for the latest), and every ``ESTIMATE_EVERY`` seconds while runs wait (the clock
moves their starts). Only while somebody looks: while a dashboard's change stream is
open they follow every plan; else a plan leaves them to be made when a request asks (a
script submitting a thousand runs pays for no replay of the queue). A request that
shows estimates asks for fresh ones and waits for them (runner/api/why.py
``published``); the stream renders each publication as it comes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from runner.planner.estimates import Estimate
from runner.planner.plan import Plan
from runner.shown import QueueHead, Shown

log = logging.getLogger(__name__)

ESTIMATE_EVERY = 5.0  # seconds estimates are fresh: made again after, the plan or not
MIN_GAP = 0.005  # seconds between two estimates at the least ...
GAP_FACTOR = 2.0  # ... or twice what the last took: at most a third of a core in a burst
STOP_SLICE = 0.25  # seconds: how soon the helper sees the daemon stop


@dataclass(frozen=True, slots=True)
class Published:
    """One plan and the start estimates shown with it. ``current``: the estimates were
    made for this plan (else they are an earlier plan's, until the helper's are made);
    ``made_at``: when (monotonic). ``shown``: what the faces show of it
    (runner/shown.py), made once here: the API reads that, never the plan."""

    version: int
    plan: Plan | None
    estimates: Mapping[str, Estimate]
    current: bool
    made_at: float = -1e9
    shown: Shown = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plan, head = self.plan, None
        if plan is not None and plan.head is not None:
            h = plan.head
            head = QueueHead(h.run, h.workspace, h.shadow, h.held_gpus, h.preempting)
        positions = {} if plan is None else plan.queue_positions
        placed = frozenset() if plan is None else frozenset(plan.order)
        fresh_until = self.made_at + ESTIMATE_EVERY if self.current else -1e9
        shown = Shown(self.version, plan is not None, head, positions, self.estimates,
                      self.current, self.made_at, fresh_until, placed)  # fmt: skip
        object.__setattr__(self, "shown", shown)

    def fresh(self, now: float) -> bool:
        """The estimates are this plan's, made less than ESTIMATE_EVERY ago."""
        return self.shown.fresh(now)


NOTHING = Published(0, None, {}, False)


class Holder(Protocol):
    """Where it is published: the back end's status (runner.engine.backend.LoopStatus)."""

    published: Published
    estimating: bool  # a helper makes the estimates: not current until it has
    watchers: int  # change streams open (dashboards): estimates follow every plan
    asking: int  # requests waiting for fresh estimates
    wake_estimates: threading.Event  # set by a plan or a request: the helper looks


class Publisher:
    """Publishes into ``holder.published``: a plan from the loop's thread
    (:meth:`planned`), its estimates from a helper thread (:meth:`start`), each a new
    :class:`Published`; ``notify`` is told when estimates moved (the change stream)."""

    def __init__(
        self, holder: Holder, estimate: Callable[[], dict[str, Estimate]],
        notify: Callable[[], None],
    ) -> None:  # fmt: skip
        self.holder = holder
        self._estimate = estimate
        self._notify = notify
        self._lock = threading.Lock()
        self._wake = holder.wake_estimates
        self._cost = 0.0  # what the last estimates took, seconds

    def planned(self, plan: Plan) -> None:
        """The loop made ``plan``: published at once, its estimates to follow."""
        with self._lock:
            was = self.holder.published
            if plan is was.plan:  # the same plan, kept: what was made from it stays valid
                return
            self.holder.published = Published(
                was.version + 1, plan, was.estimates, False, was.made_at
            )
        self._wake.set()

    def start(self, stop: threading.Event) -> threading.Thread:
        """The helper thread, until ``stop`` is set."""
        self.holder.estimating = True
        thread = threading.Thread(target=self._run, args=(stop,), name="astraeus-estimates",
                                  daemon=True)  # fmt: skip
        thread.start()
        return thread

    def wanted(self, published: Published, now: float) -> bool:
        """Whether estimates are to be made now for ``published``: they are not fresh, and
        a request waits for them, or a dashboard looks (and runs wait, or the plan's own
        were never made)."""
        holder = self.holder
        if published.plan is None or published.fresh(now):
            return False
        if holder.asking > 0:
            return True
        return holder.watchers > 0 and (not published.current or bool(published.plan.order))

    def _run(self, stop: threading.Event) -> None:
        last = -1e9
        try:
            while not stop.is_set():
                self._woken(stop)
                if stop.is_set():
                    return
                rest = last + max(MIN_GAP, GAP_FACTOR * self._cost) - time.monotonic()
                if rest > 0 and stop.wait(rest):
                    return
                self._wake.clear()
                made_for = self.holder.published
                if not self.wanted(made_for, time.monotonic()):
                    continue
                last = time.monotonic()
                try:
                    values = self._estimate()
                except Exception:  # the next plan, request or interval tries again
                    log.exception("start estimates failed")
                    continue
                self._cost = time.monotonic() - last
                self.made(made_for, values, last)
        finally:
            self.holder.estimating = False

    def _woken(self, stop: threading.Event) -> None:
        """Until a plan or a request wakes it, or ESTIMATE_EVERY has passed; looks at
        ``stop`` every slice."""
        deadline = time.monotonic() + ESTIMATE_EVERY
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self._wake.wait(min(left, STOP_SLICE)):
                return

    def made(
        self, made_for: Published, values: Mapping[str, Estimate], at: float | None = None
    ) -> None:
        """Estimates made (from ``at``, monotonic) after ``made_for`` was published:
        published with the plan of now (current when that is still ``made_for``'s)."""
        at = time.monotonic() if at is None else at
        with self._lock:
            now = self.holder.published
            moved = values != now.estimates
            estimates = values if moved else now.estimates  # equal: the same object kept
            current = now.version == made_for.version
            changed = moved or current != now.current
            version = now.version + 1 if changed else now.version
            self.holder.published = Published(version, now.plan, estimates, current, at)
        if moved:
            self._notify()
