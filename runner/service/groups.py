"""What callers may do with groups (sweeps, replica groups, schedules), checked and written.

Like :mod:`runner.service.runs`: each operation changes nothing and raises ServiceError,
or commits before it returns. A group's template passes every check a submitted run
passes (workspace, the priority cap, drives, image), and a sweep's runs and a
replica group's first runs are written in the same transaction as the group.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from runner.model import RunSpec, RunState, StopReason
from runner.reasons import Reason, ReasonCode, RunRef
from runner.rows import GroupRow
from runner.runspec.groups import (
    MAX_REPLICAS,
    GroupSpec,
    group_to_dict,
    next_fire,
    parse_group,
    replica_name,
    sweep_part,
    sweep_runs,
)
from runner.runspec.parse import spec_to_dict
from runner.runspec.templates import run_part
from runner.service.caller import spec_errors
from runner.service.runs import Caller, Service, ServiceError, Template, caller_for
from runner.store.db import NameInUse, RunRow, Store
from runner.store.tx import Tx

SWEEP_SPACING = 1e-6  # seconds between a sweep's runs' submit times: they queue in index order


class GroupService:
    def __init__(self, service: Service) -> None:
        self.service = service

    @property
    def store(self) -> Store:
        return self.service.store

    # ------------------------------------------------ rules for group control

    def group_run(
        self, group: GroupRow, spec: RunSpec, template: Template | None, now: float
    ) -> RunRow | str:
        """The row of a group's run ``spec`` (engine.groups.GroupRules), checked as its
        owner's submit now; or the refusal's text."""
        owner = caller_for(group.uid, group.gid, self.service.config)
        try:
            self.service.check_state_room(owner)
            workspace = self.service._check_spec(spec, owner)
        except ServiceError as e:
            return str(e)
        return self.service.new_row(spec, workspace, owner, now, group.name, template)

    def room_for(self, tx: Tx, group: GroupRow) -> str | None:
        """Why the group's owner may not have one more unfinished run now."""
        owner = caller_for(group.uid, group.gid, self.service.config)
        try:
            self.service.check_room(tx, owner, 1, "the group")
        except ServiceError as e:
            return str(e)
        return None

    def delete_in(self, tx: Tx, name: str, workspace: str, by: Reason) -> str:
        return self.service.delete_in(tx, name, workspace, by)

    # ------------------------------------------------------------- reading

    def visible(self, caller: Caller, kind: str | None = None) -> list[GroupRow]:
        return [g for g in self.store.groups.all(kind) if caller.viewer.sees(g.workspace)]

    def get(self, name: str, caller: Caller) -> GroupRow:
        group = self.store.groups.get(name)
        if group is None or not caller.viewer.sees(group.workspace):
            raise ServiceError(404, "NOT_FOUND", f"no group {name}")
        return group

    def _own(self, name: str, caller: Caller, kind: str | None = None) -> GroupRow:
        group = self.get(name, caller)
        caller.check_acts_on(group.workspace, f"group {name}")
        if kind is not None and group.kind != kind:
            raise ServiceError(409, "WRONG_KIND", f"{name} is a {group.kind}, not a {kind}")
        return group

    # ------------------------------------------------------------ creating

    def check(self, document: object, caller: Caller) -> tuple[GroupSpec, str]:
        """Everything a create checks, writing nothing."""
        with spec_errors():
            group = parse_group(document)
        return group, self.service._check_spec(group.template, caller)

    def create(self, document: object, caller: Caller, now: float | None = None) -> GroupRow:
        self.service.check_state_room(caller)
        group, workspace = self.check(document, caller)
        resolved = self.service.resolved(group.template, workspace)  # the image, stored
        group = replace(group, template=replace(resolved, workspace=workspace))  # pinned
        now = time.time() if now is None else now
        row = GroupRow(
            group.name, group.kind, workspace, caller.user, caller.uid, caller.gid,
            json.dumps(group_to_dict(group)), now, group.replicas, False,
            next_fire(group.cron, now) if group.kind == "schedule" else None,
        )  # fmt: skip
        doc = spec_to_dict(group.template)
        first = self._first_runs(group)
        try:
            with self.store.transaction() as tx:
                if first:
                    what = "the sweep" if group.kind == "sweep" else "the replica group"
                    self.service.check_room(tx, caller, len(first), what)
                template = self.store.templates.insert(tx, doc)
                row = replace(row, template=template)
                if not self.store.groups.insert(tx, row):
                    raise ServiceError(409, "NAME_IN_USE", f"a group named {group.name} exists")
                text = f"{group.kind.capitalize()} created by {caller.user}"
                self.store.events.add(
                    tx,
                    group.name,
                    workspace,
                    ReasonCode.CREATED,
                    Reason(text, code=ReasonCode.MESSAGE),
                    now,
                    group.name,
                )
                made = Reason.of(f"Submitted by {caller.user} ({group.kind} {{0}})",
                                 RunRef(group.name, workspace),
                                 code=ReasonCode.MESSAGE)  # fmt: skip
                for i, (spec, part) in enumerate(first):
                    stored = (template, doc, part)
                    run = self.service.new_row(
                        spec, workspace, caller, now + i * SWEEP_SPACING, group.name, stored
                    )
                    self.store.runs.insert_in(tx, run, made)
        except NameInUse as e:
            raise ServiceError(409, "NAME_IN_USE", f"a run named {e} exists") from e
        self.service.poke()
        return row

    @staticmethod
    def _first_runs(group: GroupSpec) -> list[tuple[RunSpec, dict[str, Any]]]:
        """The runs a group makes at once, each with the part it keeps of its own."""
        if group.kind == "sweep":
            specs = sweep_runs(group)
            return [(spec, sweep_part(group, i)) for i, spec in enumerate(specs)]
        if group.kind == "replicas":
            names = [replica_name(group.name, i) for i in range(group.replicas)]
            return [(template_for(group.template, n), run_part(n)) for n in names]
        return []

    # ------------------------------------------------------------ changing

    def scale(self, name: str, replicas: int, caller: Caller) -> GroupRow:
        """A replica group's size: replicas start or stop on the next cycle."""
        group = self._own(name, caller, "replicas")
        if not 0 <= replicas <= MAX_REPLICAS:
            raise ServiceError(
                422, "INVALID_SPEC", f"replicas: must be between 0 and {MAX_REPLICAS}"
            )
        if replicas > group.replicas:
            template = parse_group(group.document(), stored=True).template
            self.service.check_priority(group.workspace, template.priority)
        with self.store.transaction() as tx:
            self.store.groups.set_replicas(tx, name, replicas)
            text = f"Scaled from {group.replicas} to {replicas} by {caller.user}"
            self.store.events.add(
                tx,
                name,
                group.workspace,
                ReasonCode.SCALED,
                Reason(text, code=ReasonCode.MESSAGE),
                None,
                name,
            )
        self.service.poke()
        return self.get(name, caller)

    def set_paused(
        self, name: str, paused: bool, caller: Caller, now: float | None = None
    ) -> GroupRow:
        """Pause or resume a schedule; resumed, it fires next at its next time from now."""
        group = self._own(name, caller, "schedule")
        now = time.time() if now is None else now
        cron = str(group.document()["cron"])
        with self.store.transaction() as tx:
            self.store.groups.set_paused(tx, name, paused, next_fire(cron, now))
            code, text = (
                (ReasonCode.PAUSED, "Paused") if paused else (ReasonCode.RESUMED, "Resumed")
            )
            self.store.events.add(
                tx,
                name,
                group.workspace,
                code,
                Reason(f"{text} by {caller.user}", code=ReasonCode.MESSAGE),
                now,
                name,
            )
        self.service.poke()
        return self.get(name, caller)

    def delete(self, name: str, caller: Caller) -> dict[str, int]:
        """The group and its runs together: queued runs cancelled, live ones stopped with
        the grace, finished ones forgotten. Returns how many of each."""
        group = self._own(name, caller)
        outcomes: dict[str, int] = {}
        with self.store.transaction() as tx:
            for run in self.store.runs.of_group(name):
                if run.state == RunState.CANCELLED and run.stop_request == StopReason.DELETE:
                    outcome = "cancelled"  # already being deleted
                elif run.stop_request == StopReason.DELETE:
                    outcome = "stopping"
                else:
                    by = Reason.of(f"Deleted with {group.kind} {{0}} by {caller.user}",
                                   RunRef(name, group.workspace),
                                   code=ReasonCode.MESSAGE)  # fmt: skip
                    outcome = self.service.delete_in(tx, run.name, run.workspace, by)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
            self.store.groups.release_runs(tx, name)  # the name is free
            self.store.groups.delete(tx, name)
        self.service.poke()
        return outcomes


def template_for(template: RunSpec, name: str) -> RunSpec:
    """The template as the run ``name``."""
    return replace(template, name=name)
