"""The last checkpoint a run left on its drives (docs/scheduling.md, "Checkpoints").

A checkpoint-friendly run saves to ``<mount>/<run name>/`` on a read-write
drive (``/ckpt/ft-lowprio/latest.pt``). The newest regular file there is what
it resumes from; temporary files of a save in progress (``*.tmp``) are not.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from runner.model import MountMode, RunSpec

MAX_ENTRIES = 1000  # a folder with more is not scanned further


def login_groups(uid: int, gid: int) -> list[int]:
    """The groups the member has as a login gives them (``su - member``): its primary
    ``gid`` and the supplementary groups the system lists for it now; only ``gid`` for
    a uid without a name."""
    import pwd

    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return [gid]
    return sorted(set(os.getgrouplist(name, gid)))


class Member(NamedTuple):
    """Whose eyes a scan looks with: the run's owner (uid and login groups)."""

    uid: int
    groups: frozenset[int]

    @classmethod
    def of(cls, uid: int | None, gid: int | None) -> Member | None:
        """The owner of a run, or None (root, or a daemon that runs as its members)."""
        if uid is None or gid is None or uid == 0 or os.geteuid() != 0:
            return None
        return cls(uid, frozenset(login_groups(uid, gid)))

    def may(self, info: os.stat_result, bits: int) -> bool:
        """Whether the mode bits give this member ``bits`` (of r=4, w=2, x=1)."""
        if info.st_uid == self.uid:
            shift = 6
        elif info.st_gid in self.groups:
            shift = 3
        else:
            shift = 0
        return (info.st_mode >> shift) & bits == bits


def latest_checkpoint(
    spec: RunSpec, drives: Mapping[str, Path], run: str, owner: Member | None = None
) -> dict[str, Any] | None:
    """``{"path", "drive", "modified", "size"}`` of the newest file, or None.

    ``owner``: the run's, when it is not root: a folder it may not list (``r`` and
    ``x``, under a drive root it may enter) is not scanned, as the run could not read
    it either; so a run named as another user's private folder on a shared drive
    learns nothing of what it holds."""
    best: tuple[float, dict[str, Any]] | None = None
    for ref in spec.task.drives:
        root = drives.get(ref.name)
        if root is None or ref.mode is MountMode.READ_ONLY:
            continue
        for entry, info in _files(Path(root) / run, owner):
            if best is None or info.st_mtime > best[0]:
                where = f"{ref.mount_path.rstrip('/')}/{run}/{entry}"
                found = {"path": where, "drive": ref.name, "modified": info.st_mtime,
                         "size": info.st_size}  # fmt: skip
                best = (info.st_mtime, found)
    return None if best is None else best[1]


def _files(folder: Path, owner: Member | None = None) -> list[tuple[str, os.stat_result]]:
    """Regular files directly in ``folder``; no symlink is followed, also not ``folder``.

    The scan runs as root on a drive a run writes to: a run that left its folder as a
    symlink (``/ckpt/probe -> ~bob/.ssh``) must not get the target's names shown, nor
    (``owner``) the names in a folder its owner may not list.
    """
    out: list[tuple[str, os.stat_result]] = []
    try:
        fd = _open_folder(folder, owner)
    except OSError:
        return []
    try:
        with os.scandir(fd) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_ENTRIES:
                    break
                if entry.name.endswith(".tmp"):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    out.append((entry.name, info))
    except OSError:
        return []
    finally:
        os.close(fd)
    return out


def _open_folder(folder: Path, owner: Member | None = None) -> int:
    """An fd of ``folder``, its last two parts (drive root, run) opened with O_NOFOLLOW;
    PermissionError where ``owner`` may not enter the root or list the folder."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    root = os.open(folder.parent, flags)
    try:
        if owner is not None and not owner.may(os.fstat(root), 1):
            raise PermissionError(folder.parent)
        fd = os.open(folder.name, flags, dir_fd=root)
        if owner is not None and not owner.may(os.fstat(fd), 4 | 1):
            os.close(fd)
            raise PermissionError(folder)
        return fd
    finally:
        os.close(root)
