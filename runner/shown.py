"""What the faces show of the last plan: the queue's head, each waiting run's place and
every waiting run's start estimate, as one immutable value.

The back end publishes it with each plan and each round of estimates
(runner/engine/published.py ``Published.shown``); the API and the change stream read
only this, never the plan: what a plan decides is the planner's, what people are shown
of it is here, made once per publication.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runner.model import Estimate


@dataclass(frozen=True, slots=True)
class QueueHead:
    """The run at the head of the queue, which the planner protects: its ``shadow``
    time (the start it is promised; None: work without a time limit is in its way),
    the GPUs held for it, and whether it preempts to start."""

    run: str
    workspace: str
    shadow: float | None
    held_gpus: tuple[int, ...] = ()
    preempting: bool = False


@dataclass(frozen=True, slots=True)
class Shown:
    """One publication. ``planned``: a plan was made (else nothing is placed yet);
    ``positions``: each run left waiting, its place among them, from 1; ``placed``: every
    run the plan took in its order (started by it, too); ``current``: the
    estimates were made for this plan (else an earlier plan's, until new ones are made);
    ``made_at``: when (monotonic); ``fresh_until``: till when they are fresh (monotonic;
    the publisher's rule); ``version`` grows with each publication."""

    version: int
    planned: bool
    head: QueueHead | None
    positions: Mapping[str, int] = field(default_factory=dict)
    estimates: Mapping[str, Estimate] = field(default_factory=dict)
    current: bool = False
    made_at: float = -1e9
    fresh_until: float = -1e9
    placed: frozenset[str] = frozenset()

    def fresh(self, now: float) -> bool:
        """The estimates are this plan's and not yet to be made again."""
        return now < self.fresh_until

    def is_head(self, run: str) -> bool:
        return self.head is not None and self.head.run == run
