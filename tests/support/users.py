"""Real Unix users for the tests about who may: made for a test, removed after it.

Every test that needs users (a member, another workspace's member, a user outside the
socket's group) makes them here, so that each is made and removed the same way: a
user is removed with whatever still runs as it (``userdel`` refuses while a process
of the user lives: a run or an exec that a failed test left behind), its home and its
own group.

A test acts as a member in a forked child (``fork_as``), not in a new interpreter: the
member may not read the checkout, its virtual environment or the interpreter's own
library (a checkout in a private folder, a home folder of mode 0700). Whatever the
child imports after it has dropped to the member must already be loaded, so
``fork_as`` first imports every module the CLI and the client could load lazily.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import pwd
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

# what a member's command in a child may import after the fork: the CLI stack (typer
# vendors click and loads parts of it on first use, and parses with pydantic), the
# dashboard and client, the daemon's modules the CLI reads from
_PRELOADED = ("typer", "click", "rich", "pydantic", "pydantic_core", "astraeus_tui", "runner")
_preloaded = False


def preload() -> None:
    """Import every module of ``_PRELOADED`` (once a process): after a fork and a drop
    to a member who cannot read them, nothing is left to load from disk."""
    global _preloaded
    if _preloaded:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated modules say so as they load
        for name in _PRELOADED:
            try:
                package = importlib.import_module(name)
            except ImportError:  # click and pydantic only where they are installed
                continue
            for found in pkgutil.walk_packages(
                package.__path__, f"{name}.", onerror=lambda _: None
            ):
                if found.name.rsplit(".", 1)[-1] == "__main__":  # runs a program when imported
                    continue
                with contextlib.suppress(Exception):  # another platform's (Windows consoles)
                    importlib.import_module(found.name)
        with contextlib.suppress(ImportError):
            # typer makes an adapter for each parameter it parses; pydantic reads the
            # installed packages' plugins as it makes its first one, and keeps them
            from pydantic import TypeAdapter

            TypeAdapter(int)
    _preloaded = True


def fork_as(entry: pwd.struct_passwd, groups: list[int] | None = None) -> int:
    """``os.fork()``, the child already ``entry`` (its gid, its uid, and ``groups`` as
    its supplementary groups: by default those the system gives it). The child never
    returns into the test when it cannot become ``entry``."""
    preload()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups(os.getgrouplist(entry.pw_name, entry.pw_gid) if groups is None else groups)
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    return pid


def remove_user(user: str) -> None:
    """The user, its home, its own group and anything still running as it."""
    subprocess.run(["pkill", "-KILL", "-u", user], check=False, capture_output=True)
    subprocess.run(["userdel", "-r", "-f", user], check=False, capture_output=True)
    subprocess.run(["groupdel", user], check=False, capture_output=True)


@contextlib.contextmanager
def unix_users(
    group: str | None, *names: str, home: bool = False, own_group: bool = False,
    shell: str = "/bin/false", primary: bool = False, fresh: bool = False,
) -> Iterator[dict[str, pwd.struct_passwd]]:  # fmt: skip
    """Real Unix users ``names``, by name, removed afterwards (and ``group`` with them).

    ``group``: a supplementary group of theirs (the socket's), or with ``primary`` their
    primary group (a group file edited by another test at the same time cannot take it
    away); None: none. ``home``: a home folder is made; ``own_group``: each has a group
    of its own name as its primary one; ``shell``: its login shell. ``fresh``: a user
    left by an earlier run is removed first and made again, else it is taken as it is
    (with ``primary``, moved into ``group``)."""
    if group is not None:
        subprocess.run(["groupadd", "-f", group], check=True)
    try:
        for user in names:
            if fresh:
                remove_user(user)
            try:
                pwd.getpwnam(user)
            except KeyError:
                made = ["useradd", "-m" if home else "-M", "-U" if own_group else "-N"]
                if group is not None:
                    made += ["-g" if primary else "-G", group]
                subprocess.run([*made, "-s", shell, user], check=True)
                continue
            if primary and group is not None:
                subprocess.run(["usermod", "-g", group, user], check=True)
        yield {u: pwd.getpwnam(u) for u in names}
    finally:
        for user in names:
            remove_user(user)
        if group is not None:
            subprocess.run(["groupdel", group], check=False, capture_output=True)


def lab_users(group: str, *names: str) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """Real Unix users ``names`` (no home, no shell) whose primary group is ``group``, the
    socket's: a group file edited by another test at the same time cannot take it away."""
    return unix_users(group, *names, primary=True)
