"""Placing a process worker's drives with bubblewrap, as the member sees the machine.

A drive's mount path is a path in the run's own view, which under bubblewrap
(``--dev-bind / /``) is the host as the member sees it. So the path is resolved, its
deepest existing folder listed and the program looked up by the supervisor's child
that has dropped to the run's uid:gid and the member's supplementary groups
(:func:`runner.executors.member.as_member`): never with root's rights. A symlink
the member made (``/tmp/x -> /home/alice/hidden``) is followed only as far as the
member could follow it, and whatever it leads to is checked again: a path that
leads under a system folder (``/tmp/rtetc -> /etc``) is refused like the literal one.

bwrap would create a missing target directory on the host itself, so a target that does not
exist is placed on a tmpfs laid over its deepest existing ancestor, into which every entry of
that ancestor is bound back from the host: the host gains no directory, and the worker sees
the ancestor as before (only new entries made directly in it stay in the worker's view).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def load_rules() -> None:
    """Import the spec's system-folder rule (``runner.runspec.parse``), which only placing
    drives needs: off the start of every worker without drives. Called by the supervisor
    before its child drops to the member, who may not be able to read this package."""
    import runner.runspec.parse  # noqa: F401


class PlacementError(Exception):
    """A drive that cannot be placed; the message is one line for the run's reason."""


def sandbox_args(
    bwrap: str, drives: list[tuple[str, str, bool]], hidden: Sequence[str] = ()
) -> tuple[list[str], list[list[str]]]:
    """The bubblewrap command line (without ``--``) placing ``drives`` (source, target,
    read-only), and the [target, source] pairs that map sandbox paths to host ones.

    ``hidden``: a devices folder (``/dev``) and the device nodes of it the worker must
    not see (other runs' GPUs): the folder is laid out again without them (a tmpfs
    holding every other entry of it, bound back from the host)."""
    targets = _checked_targets([target for _, target, _ in drives])
    anchors = {a for a in (_missing_anchor(t) for t in targets) if a is not None}
    args = [bwrap, "--dev-bind", "/", "/"]
    if hidden:
        args += _mirror(hidden[0], skip=frozenset(hidden[1:]))
    for anchor in sorted(anchors, key=_depth):
        args += _mirror(anchor)
    placed = sorted(zip(drives, targets, strict=True), key=lambda p: _depth(p[1]))
    mapping: list[list[str]] = []
    for (source, target, read_only), real in placed:
        args += ["--ro-bind" if read_only else "--bind", source, real]
        mapping += [[os.path.normpath(target), source], [real, source]]
    return [*args, "--new-session", "--die-with-parent"], mapping


def _checked_targets(asked: list[str]) -> list[str]:
    """Each target with symlinks resolved; refuse what bubblewrap cannot or may not place."""
    # imported already (load_rules): in the member's child no file of this package is read
    from runner.runspec.parse import SYSTEM_DIRS_SHOWN, is_system_dir

    targets: list[str] = []
    for target in asked:
        real = os.path.realpath(target)
        if real == "/" or is_system_dir(real):
            where = "" if real == os.path.normpath(target) else f" leads to {real}, which"
            raise PlacementError(
                f"drive mount path {target}{where} must not be / or under {SYSTEM_DIRS_SHOWN}"
            )
        for other in targets:
            if _within(real, other) or _within(other, real):
                raise PlacementError(
                    f"drive mount paths {other} and {real} overlap: "
                    "the process executor cannot nest drives"
                )
        targets.append(real)
    return targets


def _missing_anchor(target: str) -> str | None:
    """The deepest existing folder above a missing ``target``; None when it exists."""
    if os.path.isdir(target):
        return None
    if os.path.lexists(target):
        raise PlacementError(f"drive mount path {target} exists on this machine as a file")
    parent = os.path.dirname(target)
    while not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise PlacementError(f"drive mount path {target} lies under the file {parent}")
        parent = os.path.dirname(parent)
    return parent


def _mirror(folder: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """A tmpfs over ``folder`` holding every entry of the host's ``folder`` (but those
    named in ``skip``), bound back."""
    mode = os.stat(folder).st_mode & 0o7777
    args = ["--perms", f"{mode:04o}", "--tmpfs", folder]
    try:
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda e: e.name)
    except OSError as e:
        raise PlacementError(
            f"cannot place a drive in {folder}: the run's user cannot list it ({e.strerror})"
        ) from None
    for entry in listed:
        if entry.name in skip:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        else:
            args += ["--dev-bind", entry.path, entry.path]
    return args


def program_exists(argv0: str, cwd: str, path: str, mapping: list[list[str]]) -> bool:
    """Whether the sandbox can execute ``argv0``: drive targets mapped to their sources.

    Called as the member, so its answer about a path only root could look into
    (``/root/secret-prog``) is the same whether that path exists or not.
    """
    if "/" in argv0:
        candidates = [os.path.join(cwd, argv0)]
    else:
        candidates = [os.path.join(cwd, d, argv0) for d in path.split(":")]
    for candidate in candidates:
        host = _host_path(os.path.normpath(candidate), mapping)
        if os.path.isfile(host) and os.access(host, os.X_OK):
            return True
    return False


def _host_path(path: str, mapping: list[list[str]]) -> str:
    for target, source in mapping:
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return source + path[len(target) :]
    return path


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")
