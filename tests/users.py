"""Real Unix users for the tests about who may: made for a test, removed after it.

Every test that needs users (a member, another workspace's member, a user outside the
socket's group) makes them here, so that each is made and removed the same way: a
user is removed with whatever still runs as it (``userdel`` refuses while a process
of the user lives: a run or an exec that a failed test left behind), its home and its
own group.
"""

from __future__ import annotations

import contextlib
import pwd
import subprocess
from collections.abc import Iterator


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
