"""What callers may do, checked and written: the operations behind the API.

Every operation takes the caller (kernel-attested uid, resolved to a user, its
groups and workspaces) and either changes nothing and raises
:class:`ServiceError` with its error code (docs/api.md), or commits before returning.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from runner.config.load import Config
from runner.drives import Member, latest_checkpoint
from runner.engine.holds import begin_reason
from runner.engine.settings import LoopSettings
from runner.model import RunSpec, RunState, StopReason, format_size
from runner.reasons import Reason, ReasonCode, held_reason
from runner.rows import DrainRow
from runner.runspec.groups import schedule_of_firing
from runner.runspec.parse import parse_spec, spec_to_dict
from runner.runspec.printable import check_spec
from runner.service.caller import (
    WRONG_STATE,
    Caller,
    ServiceError,
    caller_for,
    spec_errors,
    start_refusal,
)
from runner.service.drain import drain, resume
from runner.service.reads import Reads
from runner.store.db import (
    NameInUse,
    RunRow,
    Store,
    new_run_uid,
)
from runner.store.tx import Tx

LOCAL_IMAGE = "local"  # the process executor runs the command on the host
BATCH_SPACING = 1e-6  # seconds between a batch's runs' submit times: they queue in its order
Template = tuple[int, dict[str, Any], dict[str, Any]]  # a group's: id, document, a run's part
__all__ = ["LOCAL_IMAGE", "Caller", "Service", "ServiceError", "caller_for", "start_refusal"]


class Submitted(NamedTuple):
    """One document of a batch: its run's row and spec once accepted, else its refusal."""

    row: RunRow | None
    spec: RunSpec | None
    error: ServiceError | None = None


class Service(Reads):
    def __init__(
        self,
        store: Store,
        config: Config,
        poke: Callable[[], None] = lambda: None,
        executor: str = "process",
        backend_check: Callable[[RunSpec, str], str | None] = lambda spec, workspace: None,
        *,
        settings: LoopSettings,
    ) -> None:
        self.store = store
        self.config = config
        self.poke = poke
        self.executor = executor
        self.backend_check = backend_check  # why the back end cannot run a spec, or None
        # the machine and the drives the back end runs on (the loop's settings, which a
        # config change updates in place): what drains, edits and checkpoints are read by
        self.settings = settings
        # a Slurm shard's memory on this machine ([machine] gpu_shards): a shared request in
        # shards is stored as memory_bytes; 0 (in front of Slurm) keeps the shards
        self.shard_bytes = 0

    # --------------------------------------------------------------- drains

    def drain(
        self, caller: Caller, reason: object, gpus: list[int] | None, plans_locally: bool = True
    ) -> list[DrainRow]:
        """Drain the machine or those GPUs, admins only (runner/service/drain.py)."""
        machine = self.settings.machine.gpus
        return drain(self.store, caller, reason, gpus, machine, plans_locally)

    def resume(self, caller: Caller, gpus: list[int] | None) -> list[DrainRow]:
        """Resume the machine or those GPUs, admins only (runner/service/drain.py)."""
        return resume(self.store, caller, gpus, self.settings.machine.gpus)

    def latest_checkpoint(
        self, spec: RunSpec, name: str, owner: Member | None
    ) -> dict[str, Any] | None:
        """The newest checkpoint of run ``name`` on its drives, as its owner may list them
        (runner/drives.py)."""
        return latest_checkpoint(spec, self.settings.drives, name, owner)

    # --------------------------------------------------------------- checks

    def _workspace_for(self, spec: RunSpec, caller: Caller) -> str:
        name = spec.workspace or self._default_workspace(caller)
        if name not in self.config.workspaces:
            raise ServiceError(422, "INVALID_SPEC", f"metadata.workspace: no workspace {name}")
        if not caller.may_act_on(name):
            raise ServiceError(
                403, "FORBIDDEN", f"{caller.user} is not a member of namespace {name}"
            )
        return name

    def default_workspace_of(self, caller: Caller) -> str:
        """Where ``caller``'s runs go when they name no workspace."""
        return self._default_workspace(caller)

    def _default_workspace(self, caller: Caller) -> str:
        default = self.config.default_workspace
        if caller.admin or default in caller.workspaces or not caller.workspaces:
            return default
        return sorted(caller.workspaces)[0]

    def check_priority(self, workspace: str, priority: int) -> None:
        """The workspace's cap applies to everyone, admins included."""
        cap = self.config.workspaces[workspace].max_priority
        if priority > cap:
            raise ServiceError(
                403,
                "PRIORITY_NOT_ALLOWED",
                f"priority {priority} is above namespace {workspace}'s maximum of {cap}",
            )

    def _check_drives(self, spec: RunSpec, workspace: str) -> None:
        for ref in spec.task.drives:
            if ref.name not in self.config.drives:
                raise ServiceError(422, "INVALID_SPEC", f"drive {ref.name} does not exist")
            if not self.config.drive_allowed(ref.name, workspace):
                raise ServiceError(
                    403, "DRIVE_NOT_ALLOWED", f"namespace {workspace} may not mount {ref.name}"
                )

    def _visible_run(self, name: str, caller: Caller) -> RunRow:
        return self.find_run(name)

    def start_refusal(self, user: str, workspace: str) -> str | None:
        """Why ``user``'s run in ``workspace`` may not start now (the current config)."""
        return start_refusal(self.config, user, workspace)

    def _own_run(self, name: str, caller: Caller) -> RunRow:
        run = self._visible_run(name, caller)
        caller.check_acts_on(run.workspace, f"run {name}")
        return run

    # ------------------------------------------------------------ operations

    def check(self, document: object, caller: Caller) -> tuple[RunSpec, str]:
        """Everything a submit checks, writing nothing: the spec and its workspace."""
        with spec_errors():
            spec = parse_spec(document)
        return spec, self._check_spec(spec, caller)

    def _check_spec(
        self, spec: RunSpec, caller: Caller, pending: dict[str, str] | None = None
    ) -> str:
        with spec_errors():
            check_spec(spec)  # no escape sequences for others' terminals
        workspace = self._workspace_for(spec, caller)
        self._check_not_a_firing(spec.name, workspace)
        self.check_priority(workspace, spec.priority)
        self._check_drives(spec, workspace)
        self._check_after(spec, caller, pending)
        image = spec.task.image or self.default_image(workspace)
        if image == LOCAL_IMAGE and self.executor not in ("process", "slurm"):
            raise ServiceError(
                422, "INVALID_SPEC",
                f"spec.task_template.image: {LOCAL_IMAGE} runs on the host, which this daemon"
                f" does not do (executor {self.executor}): name a container image,"
                " or set [machine] default_image (or executor = \"process\" to run"
                " commands on the host)",
            )  # fmt: skip
        # the back end judges the run as it will be stored: with the image filled in
        refusal = self.backend_check(dataclasses.replace(spec, task=dataclasses.replace(
            spec.task, image=image)), workspace)  # fmt: skip
        if refusal is not None:
            raise ServiceError(422, "INVALID_SPEC", refusal)
        return workspace

    def _check_not_a_firing(self, name: str, workspace: str) -> None:
        """A name of the form a schedule of another namespace gives its firings
        (``<schedule>-YYYYMMDD-HHMMSS``, with a suffix or not) is kept for it: taken
        first, it would keep that schedule from firing."""
        schedule = schedule_of_firing(name)
        if schedule is None:
            return
        group = self.store.groups.get(schedule)
        if group is not None and group.kind == "schedule" and group.workspace != workspace:
            raise ServiceError(
                409, "NAME_IN_USE",
                f"{name} is a name kept for a schedule's runs ({schedule}-YYYYMMDD-HHMMSS):"
                " choose another",
            )  # fmt: skip

    def default_image(self, workspace: str | None = None) -> str:
        """The image of a run naming none: the workspace's, the machine's, else local."""
        ws = self.config.workspaces.get(workspace or self.config.default_workspace)
        if ws is not None and ws.default_image:
            return ws.default_image
        return self.config.machine.default_image or LOCAL_IMAGE

    def resolved(self, spec: RunSpec, workspace: str) -> RunSpec:
        """``spec`` with the default image filled in when it names none, shards of a GPU
        as the memory they are on this machine, and the submit's environment only where
        the process executor gives it to the run: stored so."""
        task = spec.task
        if task.gpu_shards and self.shard_bytes:
            task = dataclasses.replace(
                task, gpu_share=task.gpu_shards * self.shard_bytes, gpu_shards=0
            )
        if not task.image:
            task = dataclasses.replace(task, image=self.default_image(workspace))
        if task.submit_env and self.executor != "process":  # a container: its image's own
            task = dataclasses.replace(task, submit_env=())  # not kept: never used
        return spec if task is spec.task else dataclasses.replace(spec, task=task)

    def _check_after(
        self, spec: RunSpec, caller: Caller, pending: dict[str, str] | None = None
    ) -> None:
        """Each run waited for exists, may be seen by the caller, and can still succeed.
        ``pending``: the runs (name: workspace) accepted before it in the same batch."""
        if spec.name in spec.after:
            raise ServiceError(422, "INVALID_SPEC", "spec.after: a run cannot wait for itself")
        if not spec.after:
            return
        states = self.store.runs.states(spec.after)
        for name in spec.after:
            if pending and name in pending and name not in states:
                states[name] = (RunState.QUEUED, pending[name])
        for name in spec.after:
            state, workspace = states.get(name, ("", ""))
            if not state or not caller.viewer.sees(workspace):
                raise ServiceError(422, "INVALID_SPEC", f"spec.after: no run {name}")
            if state in (RunState.FAILED, RunState.CANCELLED):
                raise ServiceError(
                    409, "DEPENDENCY_FAILED",
                    f"spec.after: run {name} is {state}, so this run could never start",
                )  # fmt: skip

    def new_row(
        self, spec: RunSpec, workspace: str, owner: Caller, now: float, grp: str | None = None,
        template: Template | None = None,
    ) -> RunRow:  # fmt: skip
        """The row of a newly acknowledged run (written by the caller). A group's run
        made from its stored ``template`` (id, document, this run's part) keeps its part."""
        tid, doc, part = template if template is not None else (None, None, None)
        text = json.dumps(part if part is not None else spec_to_dict(spec))
        reason = Reason("Waiting for the scheduler", code=ReasonCode.WAITING)
        if spec.begin_at is not None and spec.begin_at > now:
            reason = begin_reason(spec.begin_at)
        if spec.hold:  # submitted held (astra run --hold, spec.hold)
            reason = held_reason(owner.user)
        return RunRow(
            spec.name, workspace, owner.user, owner.uid, owner.gid, text,
            spec.priority, RunState.QUEUED, reason, now,
            None, None, None, 0, 0, 0, None, None, False, grp,
            template=tid, template_doc=doc, run_uid=new_run_uid(now),
            held_by=owner.user if spec.hold else None,
        )  # fmt: skip

    def check_room(self, tx: Tx, owner: Caller, adding: int, what: str) -> None:
        """``owner`` may have ``adding`` more unfinished runs (max_submit_per_user, admins
        too): 429 TOO_MANY_RUNS otherwise. Within the transaction that writes them."""
        self.room_left(self.store.runs.unfinished_of(tx, owner.uid), owner, adding, what)

    def room_left(self, have: int, owner: Caller, adding: int, what: str) -> None:
        """check_room's rule for an owner with ``have`` unfinished runs."""
        limit = self.config.machine.max_submit_per_user
        if have + adding > limit:
            message = (
                f"user {owner.user} has {have} runs queued or running and may have at most"
                f" {limit} (max_submit_per_user)"
            )
            if adding > 1:
                message += f": {what}'s {adding} runs would make {have + adding}"
            raise ServiceError(429, "TOO_MANY_RUNS", message)

    def submit(self, document: object, caller: Caller, now: float | None = None) -> RunRow:
        """Validate and acknowledge a run: committed when this returns."""
        self.check_state_room(caller)
        spec, workspace = self.check(document, caller)
        return self._insert(self.resolved(spec, workspace), workspace, caller, now)

    def check_state_room(self, caller: Caller) -> None:
        """A member's new run or group needs ``[machine] state_reserve`` free on the state
        database's disk: below it, what admins do (delete, drain, quota) and the daemon's
        own records still have room, and nothing a member sends takes it."""
        reserve = self.config.machine.state_reserve
        if caller.admin or reserve <= 0:
            return
        try:
            st = os.statvfs(self.store.path.parent)
        except OSError:
            return
        if st.f_bavail * st.f_frsize < reserve:
            raise ServiceError(
                507, "DISK_FULL",
                f"less than state_reserve ({format_size(reserve)}) is free for the state"
                " database: nothing new is taken until an admin makes room (deleting runs,"
                " or freeing the disk)",
            )  # fmt: skip

    def submit_batch(
        self, documents: Sequence[object], caller: Caller, now: float | None = None
    ) -> list[Submitted]:
        """Many documents, each checked as ``submit`` checks it, in order (a run may come
        after one before it in the batch); the valid ones committed in one transaction
        before this returns, in the order given. Each outcome is the run's row and spec, or
        the refusal of that document, of which nothing is stored (docs/api.md)."""
        now = time.time() if now is None else now
        self.check_state_room(caller)
        outcomes: list[Submitted] = []
        pending: dict[str, str] = {}  # the names accepted so far: their workspaces
        for document in documents:
            try:
                if isinstance(document, ServiceError):
                    raise document  # the API could not read it
                with spec_errors():
                    spec = parse_spec(document)
                workspace = self._check_spec(spec, caller, pending)
                if spec.name in pending:
                    raise ServiceError(409, "NAME_IN_USE", f"a run named {spec.name} exists")
            except ServiceError as e:
                outcomes.append(Submitted(None, None, e))
                continue
            pending[spec.name] = workspace
            resolved = self.resolved(spec, workspace)
            at = now + len(outcomes) * BATCH_SPACING  # in the batch's order
            outcomes.append(Submitted(self.new_row(resolved, workspace, caller, at), resolved))
        if pending:
            self._insert_batch(outcomes, caller)
            self.poke()
        return outcomes

    def _insert_batch(self, outcomes: list[Submitted], caller: Caller) -> None:
        """Write the accepted rows of ``outcomes`` together; those whose name is taken or
        past the caller's max_submit_per_user become refusals (in place)."""
        with self.store.transaction() as tx:
            taken = self.store.runs.names_in_use(tx, (o.row.name for o in outcomes if o.row))
            have = self.store.runs.unfinished_of(tx, caller.uid)
            rows: list[RunRow] = []
            refused: set[str] = set()  # accepted before, refused here: not for runs after them
            for i, o in enumerate(outcomes):
                if o.row is None or o.spec is None:
                    continue
                try:
                    self.room_left(have + len(rows), caller, 1, "the run")  # as submit: first
                    if o.row.name in taken:
                        raise ServiceError(409, "NAME_IN_USE", f"a run named {o.row.name} exists")
                    if refused.intersection(o.spec.after):  # checked again without them
                        self._check_after(o.spec, caller, {r.name: r.workspace for r in rows})
                except ServiceError as e:
                    outcomes[i] = Submitted(None, None, e)
                    refused.add(o.row.name)
                    continue
                rows.append(o.row)
            self.store.runs.insert_many(
                tx, rows, Reason(f"Submitted by {caller.user}", code=ReasonCode.MESSAGE)
            )

    def _insert(self, spec: RunSpec, workspace: str, caller: Caller, now: float | None) -> RunRow:
        row = self.new_row(spec, workspace, caller, time.time() if now is None else now)
        try:
            with self.store.transaction() as tx:
                self.check_room(tx, caller, 1, "the run")
                self.store.runs.insert_in(tx, row, f"Submitted by {row.owner}")
                if row.held_by is not None:
                    held = Reason(f"Held by {row.held_by} at submit", code=ReasonCode.HELD)
                    self.store.events.add(
                        tx, row.name, workspace, ReasonCode.HELD, held, row.submitted_at
                    )
        except NameInUse as e:
            raise ServiceError(409, "NAME_IN_USE", f"a run named {spec.name} exists") from e
        self.poke()
        return row

    def set_priority(self, name: str, priority: int, caller: Caller) -> RunRow:
        run = self._own_run(name, caller)
        if not -1000 <= priority <= 1000:
            raise ServiceError(422, "INVALID_SPEC", "priority: must be between -1000 and 1000")
        if run.state in RunState.FINISHED:  # as hold, release and update refuse it
            raise ServiceError(
                409, WRONG_STATE, f"run {name} is {run.state}: a finished run keeps its priority"
            )
        self.check_priority(run.workspace, priority)
        with self.store.transaction() as tx:
            self.store.runs.set_priority(tx, name, priority)
            message = Reason(
                f"Priority changed from {run.priority} to {priority} by {caller.user}",
                code=ReasonCode.MESSAGE,
            )
            self.store.events.add(tx, name, run.workspace, ReasonCode.PRIORITY_CHANGED, message)
        self.poke()
        updated = self.store.runs.get(name)
        assert updated is not None
        return updated

    def delete(self, name: str, caller: Caller) -> str:
        """Queued: cancelled now. Live: stopped with the grace, then cancelled.

        Finished: forgotten (its name may be used again). Returns what happened. Its owner
        may delete a run also once no longer a member of its workspace (or the workspace is
        gone from the config): a delete only takes away.
        """
        run = self._visible_run(name, caller)
        if run.uid != caller.uid:
            run = self._own_run(name, caller)
        with self.store.transaction() as tx:
            outcome = self.delete_in(
                tx,
                name,
                run.workspace,
                Reason(f"Deleted by {caller.user}", code=ReasonCode.MESSAGE),
            )
        self.poke()
        return outcome

    def delete_in(self, tx: Tx, name: str, workspace: str, by: Reason) -> str:
        """Delete within ``tx`` (see delete); ``by`` opens the event's message.

        A run with a live worker is stopped, whatever its state says: a front for Slurm
        keeps a queued run's pending job as its worker, and that job must be cancelled.
        """
        state = self.store.runs.state_in(tx, name)
        live = self.store.workers.has_live(tx, name)
        if state in RunState.FINISHED and not live:
            self.store.runs.delete(tx, name)
            return "forgotten"
        if state == RunState.QUEUED and not live:
            self.store.runs.cancel_queued(tx, name, time.time())
            message = Reason(by.template + " while queued", by.refs, code=by.code)
            self.store.events.add(tx, name, workspace, ReasonCode.CANCELLED, message)
            return "cancelled"
        self.store.runs.request_stop(tx, name, StopReason.DELETE)
        message = Reason(by.template + ": stopping", by.refs, code=by.code)
        self.store.events.add(tx, name, workspace, ReasonCode.DELETING, message)
        return "stopping"
