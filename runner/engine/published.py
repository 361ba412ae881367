"""What a back end publishes after each plan: the plan and every waiting run's start
estimate, as one immutable :class:`Published` that the API and the change stream only read.

The loop publishes a plan at once, with the estimates made before it (``current``
False). Estimates replay the queue forward (about 0.3 s at 10,000 waiting runs), so a
helper thread the loop owns (:class:`Publisher`) makes them off the loop's tick and off
the API's event loop, and publishes them with the plan they were made for: after a plan,
not sooner after the last than twice what the last took (a burst of plans is estimated
once, for the latest), and every ``ESTIMATE_EVERY`` seconds while runs wait (the clock
moves their starts). A request that shows estimates waits for the current ones
(runner/api/published.py); the stream renders each publication as it comes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from runner.planner.estimates import Estimate
from runner.planner.plan import Plan

log = logging.getLogger(__name__)

ESTIMATE_EVERY = 5.0  # seconds: estimates made again while runs wait, the plan or not
MIN_GAP = 0.005  # seconds between two estimates at the least ...
GAP_FACTOR = 2.0  # ... or twice what the last took: at most a third of a core in a burst
STOP_SLICE = 0.25  # seconds: how soon the helper sees the daemon stop


@dataclass(frozen=True, slots=True)
class Published:
    """One plan and the start estimates shown with it. ``current``: the estimates were
    made for this plan (else they are an earlier plan's, until the helper's are made)."""

    version: int
    plan: Plan | None
    estimates: Mapping[str, Estimate]
    current: bool


NOTHING = Published(0, None, {}, False)


class Holder(Protocol):
    """Where it is published: the back end's status (runner.engine.backend.LoopStatus)."""

    published: Published
    estimating: bool  # a helper makes the estimates: not current until it has


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
        self._wake = threading.Event()
        self._cost = 0.0  # what the last estimates took, seconds

    def planned(self, plan: Plan) -> None:
        """The loop made ``plan``: published at once, its estimates to follow."""
        with self._lock:
            was = self.holder.published
            if plan is was.plan:  # the same plan, kept: what was made from it stays valid
                return
            self.holder.published = Published(was.version + 1, plan, was.estimates, False)
        self._wake.set()

    def start(self, stop: threading.Event) -> threading.Thread:
        """The helper thread, until ``stop`` is set."""
        self.holder.estimating = True
        thread = threading.Thread(target=self._run, args=(stop,), name="astraeus-estimates",
                                  daemon=True)  # fmt: skip
        thread.start()
        return thread

    def _run(self, stop: threading.Event) -> None:
        last = -1e9
        try:
            while not stop.is_set():
                waited = self._woken(stop)
                if stop.is_set():
                    return
                rest = last + max(MIN_GAP, GAP_FACTOR * self._cost) - time.monotonic()
                if rest > 0 and stop.wait(rest):
                    return
                self._wake.clear()
                made_for = self.holder.published
                if made_for.plan is None or (not waited and not made_for.plan.order):
                    continue  # nothing planned yet, or nothing waits for the clock to move
                last = time.monotonic()
                try:
                    values = self._estimate()
                except Exception:  # the next plan or interval tries again
                    log.exception("start estimates failed")
                    continue
                self._cost = time.monotonic() - last
                self.made(made_for, values)
        finally:
            self.holder.estimating = False

    def _woken(self, stop: threading.Event) -> bool:
        """Whether a plan woke it within ESTIMATE_EVERY; looks at ``stop`` every slice."""
        deadline = time.monotonic() + ESTIMATE_EVERY
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self._wake.wait(min(left, STOP_SLICE)):
                return True
        return False

    def made(self, made_for: Published, values: Mapping[str, Estimate]) -> None:
        """Estimates made after ``made_for`` was published: published with the plan of now
        (current when that is still ``made_for``'s)."""
        with self._lock:
            now = self.holder.published
            moved = values != now.estimates
            estimates = values if moved else now.estimates  # equal: the same object kept
            current = now.version == made_for.version
            if not moved and current == now.current:
                return
            self.holder.published = Published(now.version + 1, now.plan, estimates, current)
        if moved:
            self._notify()
