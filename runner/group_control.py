"""The daemon's part in groups: fire schedules, keep replica groups at their size.

Called by the loop on every tick, before it plans. Each action is one transaction
(a schedule's firing writes its run and its next time together, so a crash fires it
once, not twice), and each run it makes passes a submit's checks for the group's
owner at that moment: a lowered priority cap, or an owner who left the workspace,
stops later runs with the same message a submit would get, in the group's events.
"""

from __future__ import annotations

import logging
import time

from runner.groups import (
    QUICK_EXIT,
    GroupSpec,
    next_fire,
    parse_group,
    replica_backoff,
    replica_name,
    replica_slot,
    schedule_run_name,
)
from runner.model import Reason
from runner.service import Service, ServiceError, caller_for
from runner.service_groups import template_for
from runner.store import ACTIVE_STATES, NameInUse, RunRow, Store
from runner.store_groups import GroupRow

log = logging.getLogger("astraeus.groups")
FINISHED = ("Succeeded", "Failed", "Cancelled")


def _due(group: GroupRow, now: float) -> bool:
    return group.next_at is not None and now >= group.next_at


class GroupControl:
    def __init__(self, service: Service) -> None:
        self.service = service
        self._specs: dict[str, tuple[str, GroupSpec]] = {}
        self._refused: dict[str, str] = {}  # replica group -> the refusal last recorded

    @property
    def store(self) -> Store:
        return self.service.store

    def tick(self, now: float) -> bool:
        changed = False
        for group in self.store.groups():
            if group.kind == "replicas":
                changed |= self._replicas(group, now)
            elif group.kind == "schedule" and not group.paused and _due(group, now):
                self._fire(group, now)
                changed = True
        return changed

    def _spec(self, group: GroupRow) -> GroupSpec:
        cached = self._specs.get(group.name)
        if cached is None or cached[0] != group.spec_text:
            cached = self._specs[group.name] = (group.spec_text, parse_group(group.document()))
        return cached[1]

    def _checked(self, group: GroupRow, name: str) -> tuple[RunRow | None, str | None]:
        """The run ``name`` from the template, checked for the owner now; or why not."""
        spec = template_for(self._spec(group).template, name)
        owner = caller_for(group.uid, group.gid, self.service.config)
        try:
            workspace = self.service._check_spec(spec, owner)
        except ServiceError as e:
            return None, str(e)
        return self.service.new_row(spec, workspace, owner, time.time(), group.name), None

    # ------------------------------------------------------------ schedules

    def _fire(self, group: GroupRow, now: float) -> None:
        spec = self._spec(group)
        fired = group.next_at or now
        name = schedule_run_name(group.name, fired)
        previous = [
            r for r in self.store.runs_of_group(group.name)
            if r.state in ACTIVE_STATES and r.stop_request != "delete"
        ]  # fmt: skip
        row, refusal = self._checked(group, name)
        if row is None:
            kind, text = "Refused", f"Not submitted ({name}): {refusal}"
        elif previous and spec.policy == "skip":
            row = None
            kind, text = (
                "Skipped",
                f"Skipped {name}: {previous[-1].name} is still {previous[-1].state}",
            )
        else:
            kind, text = "Fired", f"Submitted {name}"
            if previous and spec.policy == "replace":
                text += " in place of " + ", ".join(r.name for r in previous)
        try:
            with self.store.transaction() as tx:
                self.store.update_group(
                    tx, group.name, next_at=next_fire(spec.cron, now), last_fired_at=now
                )
                if row is not None:
                    if spec.policy == "replace":
                        for r in previous:
                            by = f"Replaced by {name} (schedule {group.name})"
                            self.service.delete_in(tx, r.name, r.workspace, by)
                    self.store.insert_run_in(tx, row, f"Submitted by schedule {group.name}")
                self.store.add_event(
                    tx, group.name, group.workspace, kind, Reason(text), now, group.name
                )
        except NameInUse:
            with self.store.transaction() as tx:
                self.store.update_group(
                    tx, group.name, next_at=next_fire(spec.cron, now), last_fired_at=now
                )
                text = f"Not submitted ({name}): 409 NAME_IN_USE: a run named {name} exists"
                self.store.add_event(
                    tx, group.name, group.workspace, "Refused", Reason(text), now, group.name
                )

    # ------------------------------------------------------------- replicas

    def _replicas(self, group: GroupRow, now: float) -> bool:
        runs: dict[int, RunRow] = {}
        for row in self.store.runs_of_group(group.name):
            slot = replica_slot(group.name, row.name)
            if slot is not None:
                runs[slot] = row
        changed = False
        for slot in range(group.replicas):
            run = runs.get(slot)
            if run is None:
                changed |= self._new_replica(group, slot, now)
            elif run.state in FINISHED:
                changed |= self._restart_replica(group, run, now)
        extra = [r for s, r in runs.items() if s >= group.replicas and r.state in ACTIVE_STATES]
        extra = [r for r in extra if r.stop_request != "delete"]
        if extra:
            with self.store.transaction() as tx:
                for r in extra:
                    by = f"Scaled down ({group.name} to {group.replicas})"
                    self.service.delete_in(tx, r.name, r.workspace, by)
            changed = True
        return changed

    def _refuse(self, group: GroupRow, text: str, now: float) -> None:
        if self._refused.get(group.name) == text:
            return  # once, not on every tick
        self._refused[group.name] = text
        with self.store.transaction() as tx:
            self.store.add_event(
                tx, group.name, group.workspace, "Refused", Reason(text), now, group.name
            )

    def _new_replica(self, group: GroupRow, slot: int, now: float) -> bool:
        name = replica_name(group.name, slot)
        row, refusal = self._checked(group, name)
        if row is None:
            self._refuse(group, f"Replica {name} not started: {refusal}", now)
            return False
        try:
            with self.store.transaction() as tx:
                self.store.insert_run_in(tx, row, f"Submitted by replica group {group.name}")
        except NameInUse:
            self._refuse(
                group,
                f"Replica {name} not started: a run named {name} exists outside the group",
                now,
            )
            return False
        self._refused.pop(group.name, None)
        return True

    def _restart_replica(self, group: GroupRow, run: RunRow, now: float) -> bool:
        ended = run.finished_at if run.finished_at is not None else now
        lived = ended - (run.started_at if run.started_at is not None else ended)
        streak = 0 if lived >= QUICK_EXIT else run.streak + 1
        if now < ended + replica_backoff(streak):
            return False
        _, refusal = self._checked(group, run.name)
        if refusal is not None:
            self._refuse(group, f"Replica {run.name} not restarted: {refusal}", now)
            return False
        self._refused.pop(group.name, None)
        why = run.reason.render() if run.reason is not None else run.state
        text = f"Replica restarted: it ended ({run.state}: {why})"
        if streak:
            text += f"; quick exit {streak} in a row, waited {replica_backoff(streak):g} s"
        with self.store.transaction() as tx:
            self.store.update_run(
                tx, run.name, state="Queued", reason=Reason("Waiting for the scheduler"),
                started_at=None, finished_at=None, exit_code=None, restarts=0,
                stop_request=None, preempted_by=None, quota_noted=0, streak=streak,
            )  # fmt: skip
            self.store.add_event(tx, run.name, run.workspace, "Restarting", Reason(text), now)
        return True
