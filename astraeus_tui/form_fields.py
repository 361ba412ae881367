"""The New run form's fields and the run-spec document, kept in step.

Each field of the form reads one place of the document (``text_of``) and writes it
(``with_values``). ``with_values`` writes only the fields whose text differs from
what the document already says, so what the form cannot show (``per_gpu``, ``env``,
``notify``, a memory given in bytes) stays as the JSON gave it, and a document read
into the fields and written back is the same document.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable
from typing import Any

from runner.runspec.build import FieldError, drive_list, folder_given, time_limit

Document = dict[str, Any]
FIELDS = ("name", "workspace", "image", "command", "gpus", "drives", "folder", "priority",
          "limit", "cpus", "memory", "restarts")  # fmt: skip


def _get(doc: Document, *path: str) -> Any:
    here: Any = doc
    for key in path:
        if not isinstance(here, dict):
            return None
        here = here.get(key)
    return here


def _place(doc: Document, *path: str) -> dict[str, Any]:
    """The object at ``path``, made where missing (or where not an object)."""
    here = doc
    for key in path:
        if not isinstance(here.get(key), dict):
            here[key] = {}
        here = here[key]
    return here


def _put(doc: Document, path: tuple[str, ...], value: Any) -> None:
    """Set ``path`` to ``value``; None removes the key."""
    parent = _place(doc, *path[:-1])
    if value is None:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value


TASK = ("spec", "task_template")
RESOURCES = (*TASK, "requested_resources")


def _number_text(value: Any) -> str:
    """What a number field shows: nothing for 0 or absent (its placeholder says 0)."""
    if value in (None, 0) or isinstance(value, bool):
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _limit_text(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return "" if value is None else str(value)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def _command_text(doc: Document) -> str:
    command, args = _get(doc, *TASK, "command"), _get(doc, *TASK, "args")
    argv = command if isinstance(command, list) else [] if command is None else [command]
    argv = [*argv, *(args if isinstance(args, list) else [])]
    return shlex.join(str(a) for a in argv)


def _drives_text(doc: Document) -> str:
    refs = _get(doc, *TASK, "datavolume_refs")
    if not isinstance(refs, list):
        return ""
    shown = []
    for ref in refs:
        if not isinstance(ref, dict):
            return ""
        ro = ":ro" if ref.get("mode") == "ReadOnly" else ""
        shown.append(f"{ref.get('name', '')}:{ref.get('mount_path', '')}{ro}")
    return ", ".join(shown)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _folder_text(doc: Document) -> str:
    """Where it starts: its ``working_dir`` (--chdir), else the folder it is sent from."""
    return _text(_get(doc, *TASK, "working_dir") or _get(doc, *TASK, "submit_dir"))


def _write_folder(doc: Document, text: str) -> None:
    """A folder typed in is a --chdir (the start fails if the member cannot enter it);
    emptied, the run starts in the member's home."""
    if text.strip():
        _put(doc, (*TASK, "working_dir"), folder_given(text.strip()))
    else:
        _put(doc, (*TASK, "working_dir"), None)
        _put(doc, (*TASK, "submit_dir"), None)


READERS: dict[str, Callable[[Document], str]] = {
    "name": lambda d: _text(_get(d, "metadata", "name")),
    "workspace": lambda d: _text(_get(d, "metadata", "workspace")),
    "image": lambda d: _text(_get(d, *TASK, "image")),
    "command": _command_text,
    "gpus": lambda d: _number_text(_get(d, *RESOURCES, "gpu_requests", "count")),
    "drives": _drives_text,
    "folder": _folder_text,
    "priority": lambda d: _number_text(_get(d, "spec", "priority")),
    "limit": lambda d: _limit_text(_get(d, *TASK, "time_limit_seconds")),
    "cpus": lambda d: _number_text(_get(d, *RESOURCES, "cpu_cores")),
    "memory": lambda d: _text(_get(d, *RESOURCES, "memory_bytes")),
    "restarts": lambda d: _text(_get(d, "spec", "restart_limit")),
}


def text_of(doc: Document, field: str) -> str:
    """What ``field`` shows for ``doc``."""
    return READERS[field](doc)


def values_of(doc: Document) -> dict[str, str]:
    """Every field's text for ``doc``."""
    return {field: text_of(doc, field) for field in FIELDS}


def _whole(field: str, text: str, default: int | None = 0) -> int | None:
    if not text.strip():
        return default
    try:
        return int(text.strip())
    except ValueError:
        raise FieldError(field, f"{text.strip()!r} is not a whole number") from None


def _cores(text: str) -> float | int:
    if not text.strip():
        return 0
    try:
        value = float(text.strip())
    except ValueError:
        raise FieldError("cpus", f"{text.strip()!r} is not a number") from None
    return int(value) if value.is_integer() else value


def _write_command(doc: Document, text: str) -> None:
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise FieldError("command", str(e)) from None
    if not argv:
        raise FieldError("command", "give the command to run")
    _put(doc, (*TASK, "command"), argv[0])
    _put(doc, (*TASK, "args"), argv[1:])


WRITERS: dict[str, Callable[[Document, str], None]] = {
    "name": lambda d, t: _put(d, ("metadata", "name"), t.strip()),
    "workspace": lambda d, t: _put(d, ("metadata", "workspace"), t.strip() or None),
    "image": lambda d, t: _put(d, (*TASK, "image"), t.strip() or None),
    "command": _write_command,
    "gpus": lambda d, t: _put(d, (*RESOURCES, "gpu_requests", "count"), _whole("gpus", t)),
    "drives": lambda d, t: _put(d, (*TASK, "datavolume_refs"), drive_list(t)),
    "folder": _write_folder,
    "priority": lambda d, t: _put(d, ("spec", "priority"), _whole("priority", t)),
    "limit": lambda d, t: _put(
        d, (*TASK, "time_limit_seconds"), time_limit(t) if t.strip() else None
    ),
    "cpus": lambda d, t: _put(d, (*RESOURCES, "cpu_cores"), _cores(t)),
    "memory": lambda d, t: _put(d, (*RESOURCES, "memory_bytes"), t.strip() or None),
    "restarts": lambda d, t: _put(
        d, ("spec", "restart_limit"), _whole("restarts", t, default=None)
    ),
}


def with_values(doc: Document, values: dict[str, str]) -> Document:
    """``doc`` with each field of ``values`` whose text differs from ``doc``'s written in
    (FieldError at the first that cannot be read); ``doc`` itself is left as it was."""
    out = copy.deepcopy(doc)
    for field in FIELDS:
        if field in values and values[field] != text_of(doc, field):
            WRITERS[field](out, values[field])
    return out
