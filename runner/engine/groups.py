"""The daemon's part in groups: fire schedules, keep replica groups at their size.

Called by the loop on every tick, before it plans. Each action is one transaction
(a schedule's firing writes its run and its next time together, so a crash fires it
once, not twice), and each run it makes passes a submit's checks for the group's
owner at that moment: a lowered priority cap, or an owner who left the workspace,
stops later runs with the same message a submit would get, in the group's events.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from typing import Any, Protocol

from runner.model import RunSpec, RunState, StopReason
from runner.reasons import Reason, ReasonCode, RunRef
from runner.rows import GroupRow
from runner.runspec.fields import MAX_NAME
from runner.runspec.groups import (
    QUICK_EXIT,
    GroupSpec,
    next_fire,
    parse_group,
    replica_backoff,
    replica_name,
    replica_slot,
    schedule_run_name,
)
from runner.runspec.templates import run_part
from runner.store.db import NameInUse, RunRow, Store
from runner.store.tx import Tx

log = logging.getLogger("astraeus.groups")


def _due(group: GroupRow, now: float) -> bool:
    return group.next_at is not None and now >= group.next_at


Template = tuple[int, dict[str, Any], dict[str, Any]]  # a group's: id, document, a run's part


class GroupRules(Protocol):
    """A submit's rules, which group control applies for a group's owner (the service
    implements them: runner/service/groups.py)."""

    def group_run(
        self, group: GroupRow, spec: RunSpec, template: Template | None, now: float
    ) -> RunRow | str:
        """The row of the run ``spec``, checked as the owner's submit now; or why not."""

    def room_for(self, tx: Tx, group: GroupRow) -> str | None:
        """Why the owner may not have one more unfinished run now (max_submit_per_user)."""

    def delete_in(self, tx: Tx, name: str, workspace: str, by: Reason) -> str:
        """Delete the run within ``tx``, as a delete by ``by``."""


class GroupControl:
    def __init__(self, store: Store, rules: GroupRules) -> None:
        self.store = store
        self.rules = rules
        self._specs: dict[str, tuple[str, GroupSpec]] = {}
        self._refused: dict[tuple[str, str], Reason] = {}  # (group, replica) -> last refusal
        self._last_cause: dict[str, str | None] = {}  # schedule -> why its last firing made none
        self._failed: dict[str, str] = {}  # group -> the failure that set it aside last

    def tick(self, now: float) -> bool:
        """Each group's due action. One that fails is set aside until the next tick, with
        an event (once for the same failure): it never stops the others, nor the plan."""
        changed = False
        for group in self.store.groups.all():
            try:
                if group.kind == "replicas":
                    changed |= self._replicas(group, now)
                elif group.kind == "schedule" and not group.paused and _due(group, now):
                    self._fire(group, now)
                    changed = True
            except Exception as exc:
                self._set_aside(group, exc, now)
            else:
                self._failed.pop(group.name, None)
        return changed

    def _set_aside(self, group: GroupRow, exc: Exception, now: float) -> None:
        what = f"{type(exc).__name__}: {exc}"
        if self._failed.get(group.name) == what:
            return
        log.exception("group %s set aside in this tick", group.name)
        self._failed[group.name] = what
        text = Reason(
            "Set aside: handling it failed in the scheduler's tick (the daemon's log says "
            "why); tried again at the next tick, the other runs go on",
            code=ReasonCode.SET_ASIDE,
        )
        with contextlib.suppress(Exception), self.store.transaction() as tx:
            self.store.events.add(
                tx, group.name, group.workspace, ReasonCode.SET_ASIDE, text, now, group.name
            )

    def _spec(self, group: GroupRow) -> GroupSpec:
        cached = self._specs.get(group.name)
        if cached is None or cached[0] != group.spec_text:
            cached = self._specs[group.name] = (
                group.spec_text,
                parse_group(group.document(), stored=True),
            )
        return cached[1]

    def _checked(self, group: GroupRow, name: str, now: float) -> tuple[RunRow | None, str | None]:
        """The run ``name`` from the template, checked for the owner now; or why not. It is
        submitted at the tick's ``now``: a start in the same tick is never before it."""
        spec = replace(self._spec(group).template, name=name)
        stored = None
        if group.template is not None:  # else made before templates were stored once
            stored = (group.template, self.store.templates.doc(group.template), run_part(name))
        row = self.rules.group_run(group, spec, stored, now)
        return (None, row) if isinstance(row, str) else (row, None)

    def _room(self, tx: Tx, group: GroupRow) -> str | None:
        """Why the owner may not have one more unfinished run now (max_submit_per_user)."""
        return self.rules.room_for(tx, group)

    def _still_there(self, tx: Tx, group: GroupRow) -> bool:
        """The group still exists, as read (a delete may have come between read and write)."""
        return self.store.groups.created_at(tx, group.name) == group.created_at

    # ------------------------------------------------------------ schedules

    def _fire(self, group: GroupRow, now: float) -> None:
        """One firing, written whole: the run (or why not), its event, the next time.

        A firing skipped or refused for the same cause as the one before it writes no
        event: a per-second schedule behind a long run adds one event, not one a second.
        A firing whose name is taken (a run of the schedule's own namespace took it first)
        is named with a suffix (``-2`` … ``-9``) and starts anyway; its event says so.
        """
        spec = self._spec(group)
        base = schedule_run_name(group.name, group.next_at or now)
        ws = group.workspace
        previous = [
            r for r in self.store.runs.of_group(group.name)
            if r.state in RunState.ACTIVE and r.stop_request != StopReason.DELETE
        ]  # fmt: skip
        cause: str | None = None
        for name in firing_names(base):
            ref = RunRef(name, ws)
            row, refusal = self._checked(group, name, now)
            try:
                with self.store.transaction() as tx:
                    if not self._still_there(tx, group):
                        return  # deleted meanwhile: it fires no more
                    self._fired(tx, group, spec, now)
                    if previous and spec.policy == "skip":
                        row = None
                    elif row is not None:
                        refusal = self._room(tx, group)
                        row = row if refusal is None else None
                    code, text, cause = _firing(spec, ref, row, refusal, previous)
                    if row is not None:
                        self._submit_fired(tx, group, spec, row, previous)
                        if name != base:
                            text = Reason(f"{text.template} ({_literal(base)} was taken)",
                                          text.refs, code=text.code)  # fmt: skip
                    if cause is None or self._last_cause.get(group.name) != cause:
                        self.store.events.add(tx, group.name, ws, code, text, now, group.name)
                break
            except NameInUse:
                continue
        else:  # every name taken
            cause = "name in use"
            with self.store.transaction() as tx:
                self._fired(tx, group, spec, now)
                text = Reason.of(
                    "Not submitted ({0}): 409 NAME_IN_USE: a run named {0} exists",
                    RunRef(base, ws),
                    code=ReasonCode.MESSAGE,
                )
                self.store.events.add(tx, group.name, ws, ReasonCode.REFUSED, text, now, group.name)
        self._last_cause[group.name] = cause

    def _fired(self, tx: Tx, group: GroupRow, spec: GroupSpec, now: float) -> None:
        """Its next firing written; a schedule out of firings ends, and says so."""
        upcoming = next_fire(spec.cron, now)
        self.store.groups.schedule_fired(tx, group.name, upcoming, now)
        if upcoming is None:
            text = Reason(
                f"Ended: {spec.cron} fires no more (its dates are past)", code=ReasonCode.ENDED
            )
            self.store.events.add(
                tx, group.name, group.workspace, ReasonCode.ENDED, text, now, group.name
            )

    def _submit_fired(
        self, tx: Tx, group: GroupRow, spec: GroupSpec, row: RunRow,
        previous: list[RunRow],
    ) -> None:  # fmt: skip
        ref, by_schedule = RunRef(row.name, group.workspace), RunRef(group.name, group.workspace)
        if spec.policy == "replace":
            for r in previous:
                by = Reason.of(
                    "Replaced by {0} (schedule {1})", ref, by_schedule, code=ReasonCode.MESSAGE
                )
                self.rules.delete_in(tx, r.name, r.workspace, by)
        made = Reason.of("Submitted by schedule {0}", by_schedule, code=ReasonCode.MESSAGE)
        self.store.runs.insert_in(tx, row, made)

    # ------------------------------------------------------------- replicas

    def _replicas(self, group: GroupRow, now: float) -> bool:
        runs: dict[int, RunRow] = {}
        for row in self.store.runs.of_group(group.name):
            slot = replica_slot(group.name, row.name)
            if slot is not None:
                runs[slot] = row
        changed = False
        for slot in range(group.replicas):
            run = runs.get(slot)
            if run is None:
                changed |= self._new_replica(group, slot, now)
            elif run.state in RunState.FINISHED:
                changed |= self._restart_replica(group, run, now)
        extra = [r for s, r in runs.items() if s >= group.replicas and r.state in RunState.ACTIVE]
        extra = [r for r in extra if r.stop_request != StopReason.DELETE]
        if extra:
            with self.store.transaction() as tx:
                if self._still_there(tx, group):
                    for r in extra:
                        by = Reason.of(f"Scaled down ({{0}} to {group.replicas})",
                                       RunRef(group.name, group.workspace),
                                       code=ReasonCode.MESSAGE)  # fmt: skip
                        self.rules.delete_in(tx, r.name, r.workspace, by)
            changed = True
        return changed

    def _refuse(self, group: GroupRow, replica: str, text: Reason, now: float) -> None:
        key = (group.name, replica)
        if self._refused.get(key) == text:
            return  # once, not on every tick
        self._refused[key] = text
        with self.store.transaction() as tx:
            self.store.events.add(
                tx, group.name, group.workspace, ReasonCode.REFUSED, text, now, group.name
            )

    def _new_replica(self, group: GroupRow, slot: int, now: float) -> bool:
        name = replica_name(group.name, slot)
        ref = RunRef(name, group.workspace)
        row, refusal = self._checked(group, name, now)
        if row is None:
            text = Reason.of(
                f"Replica {{0}} not started: {_literal(refusal)}", ref, code=ReasonCode.MESSAGE
            )
            self._refuse(group, name, text, now)
            return False
        try:
            with self.store.transaction() as tx:
                if not self._still_there(tx, group):
                    return False
                refusal = self._room(tx, group)
                if refusal is None:
                    made = Reason.of(
                        "Submitted by replica group {0}",
                        RunRef(group.name, group.workspace),
                        code=ReasonCode.MESSAGE,
                    )
                    self.store.runs.insert_in(tx, row, made)
        except NameInUse:
            text = Reason.of(
                "Replica {0} not started: a run named {0} exists outside the group",
                ref,
                code=ReasonCode.MESSAGE,
            )
            self._refuse(group, name, text, now)
            return False
        if refusal is not None:
            text = Reason.of(
                f"Replica {{0}} not started: {_literal(refusal)}", ref, code=ReasonCode.MESSAGE
            )
            self._refuse(group, name, text, now)
            return False
        self._refused.pop((group.name, name), None)
        return True

    def _restart_replica(self, group: GroupRow, run: RunRow, now: float) -> bool:
        ended = run.finished_at if run.finished_at is not None else now
        lived = ended - (run.started_at if run.started_at is not None else ended)
        streak = 0 if lived >= QUICK_EXIT else run.streak + 1
        if now < ended + replica_backoff(streak):
            return False
        ref = RunRef(run.name, run.workspace)
        fresh, refusal = self._checked(group, run.name, now)
        if fresh is None:
            text = Reason.of(
                f"Replica {{0}} not restarted: {_literal(refusal)}", ref, code=ReasonCode.MESSAGE
            )
            self._refuse(group, run.name, text, now)
            return False
        text = _restarted(run, streak)
        with self.store.transaction() as tx:
            if not self._still_there(tx, group):
                return False
            refusal = self._room(tx, group)
            if refusal is None:
                self.store.runs.restart_replica(
                    tx, run.name, Reason("Waiting for the scheduler", code=ReasonCode.WAITING),
                    streak, fresh.priority,  # the template's, checked against the cap now
                )  # fmt: skip
                self.store.events.add(tx, run.name, run.workspace, ReasonCode.RESTARTING, text, now)
        if refusal is not None:
            text = Reason.of(
                f"Replica {{0}} not restarted: {_literal(refusal)}", ref, code=ReasonCode.MESSAGE
            )
            self._refuse(group, run.name, text, now)
            return False
        self._refused.pop((group.name, run.name), None)
        return True


def _restarted(run: RunRow, streak: int) -> Reason:
    """The event of a replica queued again after it ended."""
    why = run.reason if run.reason is not None else Reason(run.state, code=ReasonCode.MESSAGE)
    text = Reason(f"Replica restarted: it ended ({run.state}:", code=ReasonCode.MESSAGE).then(why)
    text = Reason(text.template + ")", text.refs, code=text.code)
    if streak:
        wait = f"; quick exit {streak} in a row, waited {replica_backoff(streak):g} s"
        text = Reason(text.template + wait, text.refs, code=text.code)
    return text


def _firing(
    spec: GroupSpec, ref: RunRef, row: RunRow | None, refusal: str | None,
    previous: list[RunRow],
) -> tuple[ReasonCode, Reason, str | None]:  # fmt: skip
    """A firing's event code and text, and its cause when it made no run (else None)."""
    if row is None and refusal is not None:
        return (
            ReasonCode.REFUSED,
            Reason.of(f"Not submitted ({{0}}): {_literal(refusal)}", ref, code=ReasonCode.MESSAGE),
            refusal,
        )
    if previous and spec.policy == "skip":
        last = previous[-1]
        text = Reason.of(f"Skipped {{0}}: {{1}} is still {last.state}", ref,
                         RunRef(last.name, last.workspace), code=ReasonCode.MESSAGE)  # fmt: skip
        return ReasonCode.SKIPPED, text, f"skipped for {last.name} {last.state}"
    if previous and spec.policy == "replace":
        olds = tuple(RunRef(r.name, r.workspace) for r in previous)
        return (
            ReasonCode.FIRED,
            Reason.of("Submitted {0} in place of {1}", ref, olds, code=ReasonCode.MESSAGE),
            None,
        )
    return ReasonCode.FIRED, Reason.of("Submitted {0}", ref, code=ReasonCode.MESSAGE), None


def firing_names(base: str) -> list[str]:
    """The names a firing tries in turn: its own, then ``-2`` … ``-9`` that are names."""
    return [base] + [f"{base}-{n}" for n in range(2, 10) if len(base) + 2 <= MAX_NAME]


def _literal(text: str | None) -> str:
    """Text put into a Reason's template as it is (its braces are not placeholders)."""
    return (text or "").replace("{", "{{").replace("}", "}}")
