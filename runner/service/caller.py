"""Who calls, and how a refusal is told: the caller (a kernel-attested uid, resolved to a
user, its groups and workspaces) and :class:`ServiceError`."""

from __future__ import annotations

import contextlib
import grp
import pwd
from collections.abc import Iterator
from dataclasses import dataclass

from runner.config.load import Config
from runner.engine.revocation import NO_WORKSPACE, NOT_A_MEMBER
from runner.reasons import Viewer
from runner.runspec.fields import SpecError
from runner.store.db import DiskFull as DiskFull  # a write found no space: the API says 507

WRONG_STATE = "WRONG_STATE"  # 409: the run is not in a state the change is for


class ServiceError(Exception):
    """A refusal for the caller: HTTP status, an error code (docs/api.md), one line."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


@contextlib.contextmanager
def spec_errors() -> Iterator[None]:
    """A SpecError in the block is the caller's: 422 INVALID_SPEC with its message."""
    try:
        yield
    except SpecError as e:
        raise ServiceError(422, "INVALID_SPEC", str(e)) from e


@dataclass(frozen=True)
class Caller:
    uid: int
    gid: int
    user: str
    admin: bool
    workspaces: frozenset[str]

    @property
    def viewer(self) -> Viewer:
        return Viewer(None if self.admin else self.workspaces)

    def may_act_on(self, workspace: str) -> bool:
        return self.admin or workspace in self.workspaces

    def check_acts_on(self, workspace: str, what: str) -> None:
        """403 unless the caller may act on ``what`` (``run a``, ``group b``) in ``workspace``."""
        if not self.may_act_on(workspace):
            raise ServiceError(
                403, "FORBIDDEN", f"{what} belongs to a namespace you are not a member of"
            )


def caller_for(uid: int, gid: int, config: Config) -> Caller:
    """Who a uid is, for this config: a user name, admin or not, its workspaces."""
    try:
        entry = pwd.getpwuid(uid)
        user, groups = entry.pw_name, _groups(entry.pw_name, entry.pw_gid)
    except KeyError:
        user, groups = str(uid), []
    return Caller(uid, gid, user, config.is_admin(user, groups), config.workspaces_of(user))


def start_refusal(config: Config, user: str, workspace: str) -> str | None:
    """Why ``user``'s run in ``workspace`` may not start under ``config``; None: it may.

    The rules of a submit (runner.engine.revocation): the workspace exists, and its owner is an
    admin or one of its members.
    """
    if workspace not in config.workspaces:
        return NO_WORKSPACE.format(workspace=workspace)
    if workspace in config.workspaces_of(user):
        return None
    try:
        groups = _groups(user, pwd.getpwnam(user).pw_gid)
    except KeyError:
        groups = []
    if config.is_admin(user, groups):
        return None
    return NOT_A_MEMBER.format(workspace=workspace)


def _groups(user: str, primary: int) -> list[str]:
    names = [g.gr_name for g in grp.getgrall() if user in g.gr_mem]
    with contextlib.suppress(KeyError):
        names.append(grp.getgrgid(primary).gr_name)
    return names
