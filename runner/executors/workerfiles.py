"""The files of a process worker's folder, written by the executor and its supervisor.

``launch.json`` (a :class:`Job`), ``meta.json``, ``exit.json`` and its reserved room, and
``supervisor.log``: see :mod:`runner.executors.process`. Only the standard library (and
runner/plainjson.py): the supervisor imports this module on its start path, where json,
dataclasses and tempfile would cost every worker's start ~15 ms (they import re, inspect,
random, shutil).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from runner import plainjson

META = "meta.json"
EXIT = "exit.json"
LAUNCH = "launch.json"
SUPERVISOR_LOG = "supervisor.log"
EXIT_RESERVED = ".exit.reserved"  # the room for exit.json, taken when the worker starts
EXIT_ROOM = 4096


def write_json_atomic(path: Path, data: Mapping[str, object]) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(plainjson.dumps(data))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path`` (``.NAME.XXXXXXXX``, mode 0600), as tempfile.mkstemp
    makes one: created exclusively, never through a link."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def read_json(path: Path) -> dict[str, Any] | None:
    """The object in ``path``; None when it is absent or not a JSON object."""
    try:
        data = plainjson.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Job(NamedTuple):
    """What ``launch.json`` asks for; built by the executor (its ``_asdict()`` is the file)."""

    run: str
    attempt: int
    worker: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    uid: int | None  # None: run as the supervisor's own user
    gid: int | None
    log_path: str
    sandbox: list[str]  # bubblewrap (then its command line without "--info-fd", "--"); or []
    drives: list[tuple[str, str, bool]]  # (host source, mount path, read-only)
    log_limit: int = 0  # bytes; 0: none (see runner.executors.logcap)
    log_reserve: int = 0  # bytes kept free on the log's file system; 0: none
    interactive: bool = False  # a terminal for the command (runner.executors.terminal)
    groups: Sequence[int] = ()  # the member's groups, its supplementary ones (as a login gives)
    # the folder to start in, entered as the member (``cwd`` when it cannot be: the home);
    # ``folder_asked``: named by --chdir, so a folder that cannot be entered fails the start
    folder: str = ""
    folder_asked: bool = False
    # the worker's cgroup (runner/executors/cgroups.py: WorkerGroup.to_json), which the
    # command joins before it runs; None: none could be made (nothing enforced)
    cgroup: dict[str, object] | None = None
    memory: int = 0  # bytes asked: what an out-of-memory end says
    # the devices folder and the nodes in it the worker must not see (other GPUs'); []: none
    hidden: Sequence[str] = ()

    @classmethod
    def load(cls, path: Path) -> Job:
        data = read_json(path)
        if data is None:
            raise ValueError(f"{path} is missing or unreadable")
        path.unlink()
        data["drives"] = [tuple(d) for d in data.get("drives", [])]
        return cls(**data)


def reserve_exit(folder: Path) -> None:
    """Take the room for ``exit.json`` now: a full disk later cannot lose the exit."""
    fd = os.open(folder / EXIT_RESERVED, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o600)  # fmt: skip
    try:
        os.write(fd, b" " * EXIT_ROOM)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_exit(folder: Path, code: int, signum: int | None, error: str | None) -> None:
    """Write ``exit.json``, into the room taken at the start; retried until it is written.

    The daemon sees the worker running while this supervisor lives and ``exit.json`` is
    not there, so an exit is never lost, only learned late, if the disk refuses it.
    """
    error = error[:1000] if error else error
    result = {"exit_code": code, "signal": signum, "finished_at": time.time(), "error": error}
    delay = 0.1
    while True:
        try:
            _fill_reserved(folder, plainjson.dumps(result).encode())
            return
        except OSError as exc:
            print(f"cannot write {EXIT} into its reserved room: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError):
            write_json_atomic(folder / EXIT, result)
            return
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _fill_reserved(folder: Path, data: bytes) -> None:
    """Overwrite the reserved file in place (no new blocks, no new inode), then rename it."""
    if len(data) > EXIT_ROOM:
        raise OSError(f"{len(data)} bytes do not fit in {EXIT_ROOM}")
    fd = os.open(folder / EXIT_RESERVED, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.pwrite(fd, data + b" " * (EXIT_ROOM - len(data)), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(folder / EXIT_RESERVED, folder / EXIT)
