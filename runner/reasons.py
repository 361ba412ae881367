"""Reasons and events as the daemon gives them: a code for programs, text for people.

A :class:`Reason` names runs by :class:`RunRef` and is rendered per :class:`Viewer`:
a run of a workspace the viewer may not see reads ``a job in another namespace``.
Every reason and event carries a :class:`ReasonCode` (docs/api.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

ANONYMOUS_RUN = "a job in another namespace"


class ReasonCode(StrEnum):
    """What a reason or an event says, for code to decide on; its text is for people.

    The table of codes and their meaning is in docs/api.md."""

    MESSAGE = "MESSAGE"  # free text no decision reads (an error, a note, Slurm's words)
    LEGACY = "LEGACY"  # an event stored before events had codes, its kind unknown
    # why a queued run waits (the planner)
    HEAD_WAITS = "HEAD_WAITS"  # the head: next to run, waits for running work to end
    QUEUED_BEHIND = "QUEUED_BEHIND"
    QUOTA_WAIT = "QUOTA_WAIT"  # over its namespace's quota for now
    QUOTA_OVER = "QUOTA_OVER"  # asks for more than the quota allows at all
    TOO_LARGE = "TOO_LARGE"
    GPU_MEMORY_WAIT = "GPU_MEMORY_WAIT"  # the head, shared: waits for memory on its GPUs
    PREEMPTING = "PREEMPTING"  # preempting lower-priority workers to start
    STARTING = "STARTING"  # waiting for preempted workers to stop
    PREEMPTED_WAITING = "PREEMPTED_WAITING"  # was preempted; waiting to run again
    WAITING = "WAITING"  # waiting for the scheduler
    DEPENDENCY_WAIT = "DEPENDENCY_WAIT"
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"
    DRAINING = "DRAINING"  # the machine (or the GPUs it needs) is drained by an admin
    HELD = "HELD"  # held (astra hold): out of the order until released; an event too
    BEGIN_WAIT = "BEGIN_WAIT"  # waits for its begin time
    # why a waiting run preempts nothing (astra why's verdict)
    NO_PREEMPTION_PRIORITY = "NO_PREEMPTION_PRIORITY"  # work in the way is not lower
    NO_PREEMPTION_ROOM = "NO_PREEMPTION_ROOM"  # lower-priority work would not free enough
    NO_PREEMPTION_GANG = "NO_PREEMPTION_GANG"  # room for some of a gang's workers, not all
    NO_PREEMPTION_DRAINED = "NO_PREEMPTION_DRAINED"  # lower work only on drained GPUs
    NO_PREEMPTION_QUOTA = "NO_PREEMPTION_QUOTA"  # over its quota: waits, only the head preempts
    # the rule that let a run start (the planner), and events
    FITS = "FITS"
    BACKFILLED = "BACKFILLED"
    STARTED = "STARTED"
    SUBMITTED = "SUBMITTED"
    PRIORITY_CHANGED = "PRIORITY_CHANGED"
    QUOTA_REACHED = "QUOTA_REACHED"
    PREEMPTED = "PREEMPTED"
    PREEMPTION_WITHDRAWN = "PREEMPTION_WITHDRAWN"
    STOPPING = "STOPPING"
    TIME_LIMIT = "TIME_LIMIT"
    RESTARTING = "RESTARTING"  # a restart spent; a reason too, while its back-off lasts
    EXITS_AT_ONCE = "EXITS_AT_ONCE"  # restarting, and it failed at once 3 times in a row
    REQUEUED = "REQUEUED"
    RELEASED = "RELEASED"  # a held run released: back in the order, in its place
    REQUEUING = "REQUEUING"  # astra requeue: stopping with the grace, to be queued again
    START_FAILED = "START_FAILED"
    KILLED = "KILLED"
    DELETING = "DELETING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SLURM = "SLURM"
    CREATED = "CREATED"  # a group's events
    SCALED = "SCALED"
    FIRED = "FIRED"
    SKIPPED = "SKIPPED"
    REFUSED = "REFUSED"
    PAUSED = "PAUSED"
    RESUMED = "RESUMED"
    ENDED = "ENDED"  # a schedule out of firings (its cron's years are past)
    SET_ASIDE = "SET_ASIDE"  # a group whose handling failed in the tick: the others go on
    UPDATED = "UPDATED"  # a run's time limit, resources or priority edited (astra update)
    DRAINED = "DRAINED"  # the machine's events: drained, and resumed again
    UNDRAINED = "UNDRAINED"
    NOTIFIED = "NOTIFIED"  # a notification delivered (runner/notify)
    NOTIFY_FAILED = "NOTIFY_FAILED"  # a notification given up on, or not queued
    GPU_IDLE = "GPU_IDLE"  # a run's GPUs idle for [machine] idle_gpu_after (an event)
    GPU_BUSY = "GPU_BUSY"  # an idle run's GPUs in use again (an event)
    IDLE_STOPPED = "IDLE_STOPPED"  # stopped for idle GPUs (idle_gpu_policy = "stop")


# an event's kind, as people read it, where it is not its code's name in CamelCase
_KINDS = {ReasonCode.PRIORITY_CHANGED: "Priority", ReasonCode.BACKFILLED: "Started"}


def event_kind(code: ReasonCode) -> str:
    """The kind an event with ``code`` is shown as (``TIME_LIMIT``: ``TimeLimit``; a run
    started by backfill is ``Started``, its code ``BACKFILLED``)."""
    return _KINDS.get(code) or code.title().replace("_", "")


@dataclass(frozen=True, slots=True)
class RunRef:
    """A reference to a run inside a message; rendered per viewer."""

    name: str
    workspace: str


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads a message. ``workspaces=None`` sees every name (an admin)."""

    workspaces: frozenset[str] | None = None

    def sees(self, workspace: str) -> bool:
        return self.workspaces is None or workspace in self.workspaces


ADMIN = Viewer(None)


@dataclass(frozen=True, slots=True)
class Reason:
    """A message naming runs, rendered per viewer.

    ``template`` holds ``{0}``, ``{1}``…; placeholder ``{i}`` takes the group
    of runs ``refs[i]``, joined (``"a, b"``). A run the viewer may not see is
    rendered as ``a job in another namespace``.
    """

    template: str
    refs: tuple[tuple[RunRef, ...], ...] = ()
    # says what only the run's own workspace may read (an error naming a path, a program):
    # another workspace reads PRIVATE_REASON instead (runner/api/views.py)
    private: bool = False
    # what it says, for code to decide on: always given (MESSAGE for free text no decision
    # reads), so that a message's code is chosen where it is written, never by default
    code: ReasonCode = field(kw_only=True)

    @staticmethod
    def of(template: str, *groups: RunRef | tuple[RunRef, ...], code: ReasonCode) -> Reason:
        refs = tuple(g if isinstance(g, tuple) else (g,) for g in groups)
        return Reason(template, refs, code=code)

    def render(self, viewer: Viewer = ADMIN) -> str:
        if not self.refs:  # plain text, braces and all (an error message, a command line)
            return self.template
        groups = [
            join_runs([r.name if viewer.sees(r.workspace) else ANONYMOUS_RUN for r in group])
            for group in self.refs
        ]
        return self.template.format(*groups)

    def then(self, other: Reason) -> Reason:
        """This message followed by ``other``, as one: its code is ``other``'s, or this
        one's when ``other`` is plain text (a prefix does not hide what follows it)."""
        private = self.private or other.private
        code = self.code if other.code is ReasonCode.MESSAGE else other.code
        if not self.refs and not other.refs:
            return Reason(f"{self.template} {other.template}", (), private, code=code)
        left = self.template if self.refs else _escape(self.template)
        shift = len(self.refs)
        moved = (
            other.template.format(*(f"{{{i + shift}}}" for i in range(len(other.refs))))
            if other.refs
            else _escape(other.template)
        )
        return Reason(f"{left} {moved}", self.refs + other.refs, private, code=code)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "template": self.template,
            "refs": [[[r.name, r.workspace] for r in group] for group in self.refs],
        }
        if self.private:
            data["private"] = True
        if self.code is not ReasonCode.MESSAGE:
            data["code"] = self.code.value
        return data

    @staticmethod
    def from_json(data: dict[str, object]) -> Reason:
        refs = data.get("refs") or []
        if not isinstance(refs, list):
            raise ValueError("reason refs must be a list")
        groups = tuple(tuple(RunRef(str(n), str(w)) for n, w in group) for group in refs)
        code = ReasonCode(str(data.get("code", ReasonCode.MESSAGE)))
        return Reason(str(data["template"]), groups, bool(data.get("private", False)), code=code)


def _escape(text: str) -> str:
    """Plain text as part of a template: its braces are not placeholders."""
    return text.replace("{", "{{").replace("}", "}}")


def join_runs(names: list[str]) -> str:
    """``["a", "b"]`` -> ``"a, b"``; several anonymous runs are counted, not repeated."""
    named = [n for n in names if n != ANONYMOUS_RUN]
    hidden = len(names) - len(named)
    if hidden == 1:
        named.append(ANONYMOUS_RUN)
    elif hidden > 1:
        named.append(f"{hidden} jobs in other namespaces")
    return ", ".join(named)


HELD_ANONYMOUS = "Held"  # what another workspace reads of a held run's reason


def held_reason(user: str) -> Reason:
    """A held run's reason (astra hold): who holds it, which its workspace alone reads."""
    return Reason(f"Held by {user}", code=ReasonCode.HELD)
