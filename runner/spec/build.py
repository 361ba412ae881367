"""The run-spec document from what a person gives: ``astra run``'s options, the form.

Pure (but for the random digits of a default name): values in, the document
``POST /v1/runs`` takes out (``runner.spec.parse`` checks it, the same as the daemon
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
    from runner.spec.begin import begin_from_text, iso_begin

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
    after: Sequence[str] = (),
    interactive: bool = False,
    hold: bool = False,
    begin_at: str | None = None,
    notify: Sequence[str] = (),
    notify_on: Sequence[str] = (),
    gpu_memory: str | None = None,
    working_dir: str | None = None,
    submit_dir: str | None = None,
) -> Document:
    """The document for one run of ``argv`` (the command, then its arguments).

    Left out when not given: the image (the daemon's default), the memory (none
    asked), the time limit (none), the workspace (the caller's default), ``env``,
    ``workers`` (one), ``after``, ``hold`` and ``begin_at`` (see begin_time), and
    ``notify`` (Apprise URLs, each for the events of ``notify_on``; succeeded and failed
    when it is empty); ``interactive`` adds ``spec.interactive`` (and no restarts);
    ``gpu_memory`` (``--gpu-mem 20GiB``) shares GPUs: that memory on each of ``gpus``
    GPUs (one when none is given). ``working_dir`` (``--chdir``) is where the command
    starts; ``submit_dir`` where it was submitted from (the process executor's default).
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
    meta = {"name": name}
    if workspace:
        meta["workspace"] = workspace
    spec: dict[str, Any] = {"priority": priority}
    if workers is not None:
        spec["workers"] = workers
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
