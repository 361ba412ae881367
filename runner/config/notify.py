"""The config's ``[[notify]]`` entries: Apprise URLs told of every run's chosen events.

::

    [[notify]]
    url = "json://127.0.0.1:9000/hook"
    events = ["succeeded", "failed", "preempted", "started", "timelimit"]
    workspaces = ["vision"]   # optional: only these workspaces' runs

    [[notify]]
    url_file = "/etc/astraeus/notify.d/team-slack"   # the URL, in a file of mode 0600

    [[notify]]
    url_env = "ASTRAEUS_NOTIFY_PAGER"   # the URL, in the daemon's environment

Each URL is held to the schemes of runner/notify/targets.py and must be one Apprise can
parse; ``events`` defaults to succeeded and failed. A URL that holds a secret (a token,
a password) belongs in ``url_file`` or ``url_env``, not in the config that every user
may read: ``url_file`` must be a regular file (not a symlink) of root's or the
daemon's, that neither its group nor others may read or write.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from runner.config.checks import _Invalid, _show, _strings, _table
from runner.model import Workspace
from runner.notify.targets import (
    DEFAULT_EVENTS,
    MAX_CONFIG_TARGETS,
    MAX_URL,
    Target,
    check_events,
    check_url,
)

_KEYS = ("url", "url_file", "url_env", "events", "workspaces")
_SOURCES = ("url", "url_file", "url_env")


def parse_notify(value: object, workspaces: Mapping[str, Workspace]) -> tuple[Target, ...]:
    """The ``[[notify]]`` array of tables, checked; ``_Invalid`` naming the entry's key."""
    if not isinstance(value, list):
        raise _Invalid("notify", f"must be an array of tables ([[notify]]), got {_show(value)}")
    if len(value) > MAX_CONFIG_TARGETS:
        raise _Invalid("notify", f"must have at most {MAX_CONFIG_TARGETS} entries")
    return tuple(_entry(item, f"notify[{i}]", workspaces) for i, item in enumerate(value))


def _entry(value: object, path: str, workspaces: Mapping[str, Workspace]) -> Target:
    table = _table(value, path, _KEYS)
    given = [key for key in _SOURCES if key in table]
    if len(given) != 1:
        why = "required: one of" if not given else "give only one of"
        raise _Invalid(
            f"{path}.{given[1] if given else 'url'}",
            f"{why} url (an Apprise URL such as 'json://host/hook'), url_file, url_env",
        )
    key = given[0]
    try:
        url = check_url(_url_from(key, table[key]))
    except ValueError as e:
        raise _Invalid(f"{path}.{key}", str(e)) from None
    try:
        events = check_events(table.get("events", [e.value for e in DEFAULT_EVENTS]))
    except ValueError as e:
        raise _Invalid(f"{path}.events", str(e)) from None
    named = _strings(table.get("workspaces", []), f"{path}.workspaces")
    for index, ws in enumerate(named):
        if ws not in workspaces:
            raise _Invalid(
                f"{path}.workspaces[{index}]",
                f"no workspace named {_show(ws)} (defined: {', '.join(workspaces)})",
            )
    return Target(url, events, tuple(dict.fromkeys(named)))


def _url_from(key: str, value: object) -> object:
    """The URL an entry gives: as written, from its file, or from the environment."""
    if key == "url":
        return value
    if not isinstance(value, str) or not value:
        raise ValueError("must be a string")
    if key == "url_env":
        found = os.environ.get(value)
        if not found:
            raise ValueError(f"{_show(value)} is not set in the daemon's environment")
        return found.strip()
    return _read_secret(Path(value))


def _read_secret(path: Path) -> str:
    """The first line of a root-only file (not a symlink, not readable by others)."""
    if not path.is_absolute():
        raise ValueError(f"{_show(str(path))} must be an absolute path")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o077:
            raise ValueError(
                f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid}) may be read"
                f" or changed by others: chown root {path} && chmod 600 {path}"
            )
        data = os.read(fd, MAX_URL + 256)
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else ""
