"""The run-spec document from what a person gives: ``astra run``'s options, the form.

Pure (but for the random digits of a default name): values in, the document
``POST /v1/runs`` takes out (``runner.runspec.parse`` checks it, the same as the daemon
does). Both faces build their document here, so
a run submitted from the CLI and the same run from the dashboard's form are the
same document. The text helpers read what only a person types (``NAME:/path:ro``,
``KEY=VALUE``) and raise :class:`FieldError` naming the field.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: `astra run` starts without typing, re, pathlib

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    Document = dict[str, Any]
else:
    Document = dict

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


class FieldError(ValueError):
    """A field a person filled in that cannot be read; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def drive_ref(text: str) -> dict[str, str]:
    """``NAME:/path`` (read-write), ``NAME:/path:rw`` or ``NAME:/path:ro`` as a drive ref."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise FieldError("drives", f"{text!r}: use NAME:/path or NAME:/path:ro")
    mode = "ReadOnly" if len(parts) == 3 and parts[2] == "ro" else "ReadWrite"
    return {"name": parts[0], "mount_path": parts[1], "mode": mode}


def drive_list(text: str) -> list[dict[str, str]]:
    """Drive refs from a comma-separated list (``a:/x, b:/y:ro``); empty items skipped."""
    return [drive_ref(item) for item in filter(None, (p.strip() for p in text.split(",")))]


def env_vars(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs as a dict; the value may hold ``=``."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise FieldError("env", f"{pair!r}: use KEY=VALUE")
        env[key] = value
    return env


def time_limit(text: str) -> int:
    """A time limit as typed (``2h``, ``90m``, ``1-00:00:00``), in seconds."""
    from runner.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise FieldError("limit", str(e)) from None


def begin_time(text: str, now: float | None = None) -> str:
    """A begin time as typed (``2026-12-02T03:00``, UTC unless it has an offset, or
    ``+2h`` from now) in the spec's form, ``2026-12-02T03:00:00Z``."""
    from runner.runspec.begin import begin_from_text, iso_begin

    try:
        return iso_begin(begin_from_text(text, time.time() if now is None else now))
    except ValueError as e:
        raise FieldError("begin", str(e)) from None


def event_names(text: str | None) -> list[str]:
    """``--notify-on succeeded,failed`` as a list of names (the daemon checks them)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def default_name(command: str) -> str:
    """A run's name when none is given: the command's base name, made a name, and four
    random hex digits (``train-3f2a``): ``Path(command).name``, lower case, each run of
    other characters than ``a-z0-9-`` one ``-``."""
    parts = [part for part in command.split("/") if part not in ("", ".")]
    out: list[str] = []
    gap = False  # inside a run of other characters
    for c in (parts[-1] if parts else "").lower():
        if c in _NAME_CHARS:
            out.append(c)
            gap = False
        elif not gap:
            out.append("-")
            gap = True
    base = "".join(out).strip("-")[:40] or "run"
    return f"{base}-{os.urandom(2).hex()}"


def run_document(
    name: str,
    argv: Sequence[str],
    *,
    image: str = "",
    gpus: int = 0,
    cpus: float = 0,
    memory: str | None = None,
    time_limit_seconds: int | None = None,
    priority: int = 0,
    workspace: str | None = None,
    drives: Sequence[Mapping[str, str]] = (),
    env: Mapping[str, str] | None = None,
    workers: int | None = None,
    restart_limit: int | None = None,
    after: Sequence[str] = (),
    interactive: bool = False,
    hold: bool = False,
    begin_at: str | None = None,
    notify: Sequence[str] = (),
    notify_on: Sequence[str] = (),
    gpu_memory: str | None = None,
    working_dir: str | None = None,
    submit_dir: str | None = None,
    submit_env: Mapping[str, str] | None = None,
) -> Document:
    """The document for one run of ``argv`` (the command, then its arguments).

    Left out when not given: the image (the daemon's default), the memory (none
    asked), the time limit (none), the workspace (the caller's default), ``env``,
    ``workers`` (one), ``restart_limit`` (the daemon's), ``after``, ``hold`` and
    ``begin_at`` (see begin_time), and
    ``notify`` (Apprise URLs, each for the events of ``notify_on``; succeeded and failed
    when it is empty); ``interactive`` adds ``spec.interactive`` (and no restarts);
    ``gpu_memory`` (``--gpu-mem 20GiB``) shares GPUs: that memory on each of ``gpus``
    GPUs (one when none is given). ``working_dir`` (``--chdir``) is where the command
    starts; ``submit_dir`` where it was submitted from (the process executor's default);
    ``submit_env`` the caller's environment carried (see :func:`exported`).
    """
    gpu_request: dict[str, Any] = {"count": gpus}
    if gpu_memory is not None:
        gpu_request = {"count": gpus or 1, "memory_bytes": gpu_memory, "shared": True}
    resources: dict[str, Any] = {"gpu_requests": gpu_request, "cpu_cores": cpus}
    if memory is not None:
        resources["memory_bytes"] = memory
    task: dict[str, Any] = {**({"image": image} if image else {}), "command": argv[0],
                            "args": list(argv[1:]), "requested_resources": resources}  # fmt: skip
    if env is not None:
        task["env"] = dict(env)
    task["datavolume_refs"] = [dict(d) for d in drives]
    if time_limit_seconds is not None:
        task["time_limit_seconds"] = time_limit_seconds
    if working_dir is not None:
        task["working_dir"] = working_dir
    if submit_dir is not None:
        task["submit_dir"] = submit_dir
    if submit_env:
        task["submit_env"] = dict(submit_env)
    meta = {"name": name}
    if workspace:
        meta["workspace"] = workspace
    spec: dict[str, Any] = {"priority": priority}
    if workers is not None:
        spec["workers"] = workers
    if restart_limit is not None:  # --restarts; else the daemon's restart_limit
        spec["restart_limit"] = restart_limit
    spec["task_template"] = task
    if after:
        spec["after"] = list(after)
    if interactive:  # nobody is at a terminal that starts again: no restarts
        spec.update(interactive=True, restart_limit=0)
    if hold:
        spec["hold"] = True
    if begin_at is not None:
        spec["begin_at"] = begin_at
    if notify:  # each URL for the events of notify_on (the daemon's default without)
        events = {"events": list(notify_on)} if notify_on else {}
        spec["notify"] = [{"url": url, **events} for url in notify]
    return {"metadata": meta, "spec": spec}


def here() -> str | None:
    """The folder a command is typed in (the submit folder), or None when it is gone."""
    try:
        return os.getcwd()
    except OSError:
        return None


def folder_given(text: str) -> str:
    """``--chdir DIR`` as an absolute folder (relative to where astra was called)."""
    return os.path.normpath(os.path.join(here() or "/", os.path.expanduser(text)))


def with_submit_dir(document: object) -> object:
    """A spec document with the submit folder recorded, where it names none (astra submit,
    astra slurm sbatch): the process executor starts the run there."""
    spec = document.get("spec") if isinstance(document, dict) else None
    task = spec.get("task_template") if isinstance(spec, dict) else None
    folder = here()
    if isinstance(task, dict) and "submit_dir" not in task and folder is not None:
        task["submit_dir"] = folder
    return document


def with_submit_env(document: object, environ: Mapping[str, str]) -> object:
    """A spec document with ``environ`` carried as its submit environment, where it carries
    none (the dashboard's form, as ``astra run``'s default ``--export=ALL``): the process
    executor's runs start with it."""
    spec = document.get("spec") if isinstance(document, dict) else None
    task = spec.get("task_template") if isinstance(spec, dict) else None
    if isinstance(task, dict) and not task.get("submit_env"):
        task["submit_env"] = carry_all(environ)
    return document


# what a shell keeps for itself, not the program's environment
_SHELL_OWN = frozenset({"_", "PWD", "OLDPWD", "SHLVL"})


def exported(text: str | None, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--export`` as sbatch reads it (default ``ALL``): the environment carried from the
    submit (``submit_env``: ALL; the process executor's runs start with it), and the
    variables named (``NAME`` from ``environ``, ``NAME=value`` as given: into ``env``, for
    every executor). ``NONE``: neither. A variable a run could not be given (a name that
    is not one, a value with control characters, the shell's own) is not carried."""
    carried: dict[str, str] = {}
    named: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "ALL").split(","))):
        if item.upper() == "ALL":
            carried = carry_all(environ)
        elif "=" in item:
            key, _, value = item.partition("=")
            named[key] = value
        elif item.upper() != "NONE" and item in environ:
            named[item] = environ[item]
    return carried, named


_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_REST = _NAME_START | frozenset("0123456789")


def carry_all(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` a run may be given: a name as the spec's ``env``
    takes (runner.runspec.fields), a value without a control character but tab, newline
    and carriage return (runner.runspec.printable); told here without ``re`` (astra run
    starts on the interpreter's core)."""
    return {
        key: value for key, value in environ.items()
        if key not in _SHELL_OWN and 0 < len(key) <= 256 and key[0] in _NAME_START
        and all(c in _NAME_REST for c in key) and _plain(value)
    }  # fmt: skip


def _plain(value: str) -> bool:
    if value.isprintable():
        return True
    return not any(((o := ord(c)) < 0x20 and c not in "\t\n\r") or 0x7F <= o <= 0x9F for c in value)
