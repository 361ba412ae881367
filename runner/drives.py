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
from typing import Any

from runner.model import MountMode, RunSpec

MAX_ENTRIES = 1000  # a folder with more is not scanned further


def latest_checkpoint(spec: RunSpec, drives: Mapping[str, Path], run: str) -> dict[str, Any] | None:
    """``{"path", "drive", "modified", "size"}`` of the newest file, or None."""
    best: tuple[float, dict[str, Any]] | None = None
    for ref in spec.task.drives:
        root = drives.get(ref.name)
        if root is None or ref.mode is MountMode.READ_ONLY:
            continue
        for entry, info in _files(Path(root) / run):
            if best is None or info.st_mtime > best[0]:
                where = f"{ref.mount_path.rstrip('/')}/{run}/{entry}"
                found = {"path": where, "drive": ref.name, "modified": info.st_mtime,
                         "size": info.st_size}  # fmt: skip
                best = (info.st_mtime, found)
    return None if best is None else best[1]


def _files(folder: Path) -> list[tuple[str, os.stat_result]]:
    """Regular files directly in ``folder``; no symlink is followed, also not ``folder``.

    The scan runs as root on a drive a run writes to: a run that left its folder as a
    symlink (``/ckpt/probe -> ~bob/.ssh``) must not get the target's names shown.
    """
    out: list[tuple[str, os.stat_result]] = []
    try:
        fd = _open_folder(folder)
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


def _open_folder(folder: Path) -> int:
    """An fd of ``folder``, its last two parts (drive root, run) opened with O_NOFOLLOW."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    root = os.open(folder.parent, flags)
    try:
        return os.open(folder.name, flags, dir_fd=root)
    finally:
        os.close(root)
