"""Parse and validate run specs: the JSON of docs/api.md, the same in TOML, and #SBATCH files.

Every bad input raises :class:`SpecError`, whose one-line message names the field
(``spec.task_template.requested_resources.gpu_requests.count: …``). Nothing else
escapes, whatever the input: each check looks at the type before using a value.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable
from typing import TypedDict

from runner.model import (
    DEFAULT_RESTART_LIMIT,
    MAX_PRIORITY,
    MIN_PRIORITY,
    DriveRef,
    MountMode,
    RunSpec,
    TaskTemplate,
)
from runner.runspec.begin import check_begin, iso_begin, iso_seconds
from runner.runspec.fields import (
    _ENV_KEY_RE,
    DOCUMENT,
    MAX_ARGS,
    MAX_CPU_CORES,
    MAX_DEPTH,
    MAX_DOCUMENT,
    MAX_DRIVES,
    MAX_ENV,
    MAX_GPUS,
    MAX_MEMORY,
    MAX_RESTART_LIMIT,
    MAX_SHARDS,
    MAX_TASK_TEXT,
    MAX_WORKERS,
    SCRIPT,
    JsonObject,
    SpecError,
    _bool,
    _cpu_milli,
    _gpu_share,
    _image,
    _int_between,
    _list,
    _memory,
    _name,
    _object,
    _optional,
    _required,
    _string,
    _strings,
    _time_limit,
    _worker_memory,
    one_line,
    show_value,
)
from runner.runspec.notify import notify_field, stored_notify_field

__all__ = [  # names importers take from here; the field checks live in runner.runspec.fields
    "DOCUMENT",
    "MAX_CPU_CORES",
    "MAX_DEPTH",
    "MAX_DOCUMENT",
    "MAX_GPUS",
    "MAX_MEMORY",
    "MAX_WORKERS",
    "SCRIPT",
    "SYSTEM_DIRS_SHOWN",
    "JsonObject",
    "SpecError",
    "check_task_text",
    "is_system_dir",
    "one_line",
    "parse_spec",
    "show_value",
    "spec_to_dict",
    "task_text_size",
]

# Container folders a drive may not cover: the kernel's, the runtime's (the Docker
# socket lives in /run), the system's own software and settings.
_SYSTEM_DIRS = (
    "proc", "sys", "dev", "run", "var/run", "etc", "boot", "bin", "sbin", "usr",
    "lib", "lib32", "lib64", "libx32",
)  # fmt: skip
_SYSTEM_DIRS_SHOWN = "/proc, /sys, /dev, /run, /var/run, /etc, /boot, /bin, /sbin, /lib*, /usr"


# ------------------------------------------------------------------ the document

_SPEC_KEYS = (
    "priority", "workers", "gang", "restart_limit", "after", "hold", "begin_at", "interactive",
    "notify", "task_template",
)  # fmt: skip
MAX_AFTER = 64  # runs one run may wait for
_TASK_KEYS = (
    "image",
    "command",
    "args",
    "env",
    "time_limit_seconds",
    "datavolume_refs",
    "requested_resources",
    "working_dir",
    "submit_dir",
    "submit_env",
)
MAX_FOLDER = 4096  # characters of a working or submit folder
_RESOURCE_KEYS = ("gpu_requests", "per_gpu", "cpu_cores", "memory_bytes")


def parse_spec(data: object, *, stored: bool = False) -> RunSpec:
    """A validated RunSpec from a decoded JSON/TOML document; SpecError on anything wrong.

    ``stored``: a spec the daemon acknowledged earlier, read back. The size bound on its
    command, args and env (:func:`check_task_text`) and the least memory a worker may ask
    (Docker's 6MiB) are rules of new submits only, so a run accepted before them still
    plans, shows and starts.
    """
    doc = _object(data, "", ("metadata", "spec"))
    meta = _required(doc, "", "metadata", lambda v, p: _object(v, p, ("name", "workspace")))
    name = _required(meta, "metadata", "name", _name)
    workspace = _optional(meta, "metadata", "workspace", _name, None)
    spec = _required(doc, "", "spec", lambda v, p: _object(v, p, _SPEC_KEYS))
    parsed = RunSpec(
        name=name,
        workspace=workspace,
        priority=_optional(spec, "spec", "priority", _int_between(MIN_PRIORITY, MAX_PRIORITY), 0),
        workers=_optional(spec, "spec", "workers", _int_between(1, MAX_WORKERS), 1),
        gang=_optional(spec, "spec", "gang", _bool, True),
        restart_limit=_optional(
            spec,
            "spec",
            "restart_limit",
            _int_between(0, MAX_RESTART_LIMIT),
            DEFAULT_RESTART_LIMIT,
        ),
        after=_optional(spec, "spec", "after", _after, ()),
        interactive=_optional(spec, "spec", "interactive", _bool, False),
        hold=_optional(spec, "spec", "hold", _bool, False),
        begin_at=_optional(spec, "spec", "begin_at", _begin_at, None),
        task=_required(spec, "spec", "task_template", _stored_task if stored else _task),
        notify=_optional(
            spec, "spec", "notify", stored_notify_field if stored else notify_field, ()
        ),
    )
    if parsed.interactive and parsed.workers != 1:
        raise SpecError("spec.interactive", "an interactive run has one worker")
    return parsed


def _after(value: object, path: str) -> tuple[str, ...]:
    names = tuple(_name(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path, MAX_AFTER)))
    if len(set(names)) != len(names):
        raise SpecError(path, "names a run twice")
    return names


def _begin_at(value: object, path: str) -> float:
    """ISO 8601, UTC unless it has an offset (runner/runspec/begin.py)."""
    text = _string(value, path, limit=64)
    try:
        return float(math.ceil(check_begin(iso_seconds(text))))  # whole seconds, never sooner
    except ValueError as e:
        raise SpecError(path, str(e)) from None


def _stored_task(value: object, path: str) -> TaskTemplate:
    return _task(value, path, bounded=False)


def _task(value: object, path: str, *, bounded: bool = True) -> TaskTemplate:
    task = _object(value, path, _TASK_KEYS)
    image = _optional(task, path, "image", _image, "")  # "": the daemon's default
    command, lead = _optional(task, path, "command", _command, (None, ()))
    args = lead + _optional(task, path, "args", _strings, ())
    _check_args_count(args, f"{path}.args")
    env = _optional(task, path, "env", _env, ())
    submit_env = _optional(task, path, "submit_env", _env, ())
    if bounded:
        check_task_text(command, args, env + submit_env, path)
    limit = _optional(task, path, "time_limit_seconds", _time_limit, None)
    drives = _optional(task, path, "datavolume_refs", _drives, ())
    read = _resources if bounded else _stored_resources
    resources = _optional(task, path, "requested_resources", read, _Resources())
    working_dir = _optional(task, path, "working_dir", _folder, None)
    submit_dir = _optional(task, path, "submit_dir", _folder, None)
    return TaskTemplate(
        image=image,
        command=command,
        args=args,
        env=env,
        time_limit_seconds=limit,
        drives=drives,
        **resources,
        working_dir=working_dir,
        submit_dir=submit_dir,
        submit_env=submit_env,
    )


def _folder(value: object, path: str) -> str:
    """An absolute folder, normalised (``/home/a/proj/`` -> ``/home/a/proj``); the member
    enters it, never the daemon as root."""
    text = _string(value, path, limit=MAX_FOLDER)
    if not text.startswith("/"):
        raise SpecError(
            path, f"must be an absolute path (starting with '/'), got {show_value(text)}"
        )
    return "/" + posixpath.normpath(text).lstrip("/")


def _command(value: object, path: str) -> tuple[str, tuple[str, ...]]:
    """A string, or a list whose first item is the command and the rest leading args."""
    if not isinstance(value, list):
        return _string(value, path), ()
    parts = _strings(value, path)
    if not parts:
        raise SpecError(path, "must not be an empty list")
    return _string(parts[0], f"{path}[0]"), parts[1:]


def _check_args_count(args: tuple[str, ...], path: str) -> None:
    if len(args) > MAX_ARGS:
        raise SpecError(
            path, f"must have at most {MAX_ARGS} items with the command's, got {len(args)}"
        )


def task_text_size(
    command: str | None, args: tuple[str, ...], env: tuple[tuple[str, str], ...]
) -> int:
    """Characters of the command, its arguments and the environment's names and values."""
    return len(command or "") + sum(map(len, args)) + sum(len(k) + len(v) for k, v in env)


def check_task_text(
    command: str | None, args: tuple[str, ...], env: tuple[tuple[str, str], ...], path: str
) -> None:
    """The command, args and env together within MAX_TASK_TEXT characters."""
    total = task_text_size(command, args, env)
    if total > MAX_TASK_TEXT:
        largest = sorted(env, key=lambda kv: -(len(kv[0]) + len(kv[1])))[:3]
        named = ", ".join(f"{k} ({len(k) + len(v)})" for k, v in largest)
        raise SpecError(
            path,
            f"command, args and env must be at most {MAX_TASK_TEXT} characters together"
            f" ({MAX_TASK_TEXT // 1024} KiB), got {total}: put larger inputs in a file on a drive"
            + (f"; the largest variables: {named} (astra run --export=NONE, or --export"
               " naming only some, carries fewer)" if largest else ""),
        )  # fmt: skip


def _env(value: object, path: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object of names to strings, got {show_value(value)}")
    if len(value) > MAX_ENV:
        raise SpecError(path, f"must have at most {MAX_ENV} variables, got {len(value)}")
    pairs: list[tuple[str, str]] = []
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_KEY_RE.fullmatch(key):
            reason = "is not a variable name (letters, digits and '_', not starting with a digit)"
            raise SpecError(path, f"{show_value(key)} {reason}")
        pairs.append((key, _string(item, f"{path}.{key}", empty=True)))
    return tuple(sorted(pairs))


def _drives(value: object, path: str) -> tuple[DriveRef, ...]:
    drives: list[DriveRef] = []
    for index, item in enumerate(_list(value, path, MAX_DRIVES)):
        drive = _drive(item, f"{path}[{index}]")
        for earlier, other in enumerate(drives):
            if other.mount_path == drive.mount_path:
                raise SpecError(
                    f"{path}[{index}].mount_path",
                    f"{show_value(drive.mount_path)} is already mounted by {path}[{earlier}]",
                )
        drives.append(drive)
    return tuple(drives)


def _drive(value: object, path: str) -> DriveRef:
    ref = _object(value, path, ("name", "mount_path", "mode"))
    name = _required(ref, path, "name", _name)
    mount_path = _required(ref, path, "mount_path", _mount_path)
    mode = _optional(ref, path, "mode", _mode, MountMode.READ_WRITE)
    return DriveRef(name=name, mount_path=mount_path, mode=mode)


def _mode(value: object, path: str) -> MountMode:
    for mode in MountMode:
        if value == mode.value:
            return mode
    raise SpecError(path, f"must be 'ReadWrite' or 'ReadOnly', got {show_value(value)}")


def _mount_path(value: object, path: str) -> str:
    """An absolute container path, normalised (``/ckpt/`` -> ``/ckpt``)."""
    text = _string(value, path)
    if not text.startswith("/"):
        raise SpecError(
            path, f"must be an absolute path (starting with '/'), got {show_value(text)}"
        )
    if ".." in text.split("/"):
        raise SpecError(path, f"must not contain '..', got {show_value(text)}")
    if ":" in text:
        raise SpecError(path, f"must not contain ':', got {show_value(text)}")
    normal = "/" + posixpath.normpath(text).lstrip("/")
    if normal == "/":
        raise SpecError(path, "must not be '/' (mount the drive on a directory such as /data)")
    if _system_dir(normal):
        shown = show_value(text)
        raise SpecError(path, f"must not be under {_SYSTEM_DIRS_SHOWN}, got {shown}")
    return normal


def _system_dir(normal: str) -> bool:
    return any(normal == f"/{d}" or normal.startswith(f"/{d}/") for d in _SYSTEM_DIRS)


is_system_dir = _system_dir  # for the executors: where a mount path leads is checked too
SYSTEM_DIRS_SHOWN = _SYSTEM_DIRS_SHOWN


class _Resources(TypedDict, total=False):
    """The TaskTemplate fields ``requested_resources`` sets (checked by name where they
    are passed on)."""

    gpus: int
    min_per_machine: int
    gpu_share: int
    gpu_shards: int
    per_gpu_cpu_milli: int
    per_gpu_memory: int
    cpu_milli: int
    memory: int


def _stored_resources(value: object, path: str) -> _Resources:
    return _resources(value, path, bounded=False)


def _resources(value: object, path: str, *, bounded: bool = True) -> _Resources:
    """The TaskTemplate fields ``requested_resources`` sets (not given: 0 each)."""
    res = _object(value, path, _RESOURCE_KEYS)
    memory = _worker_memory if bounded else _memory
    requests = lambda v, p: _gpu_requests(v, p, _gpu_share if bounded else _memory)  # noqa: E731
    gpus, least, share, shards = _optional(res, path, "gpu_requests", requests, (0, 0, 0, 0))
    per_gpu = lambda v, p: _per_gpu(v, p, memory)  # noqa: E731
    per_cpu, per_memory = _optional(res, path, "per_gpu", per_gpu, (0, 0))
    return _Resources(
        gpus=gpus,
        min_per_machine=least,
        gpu_share=share,
        gpu_shards=shards,
        per_gpu_cpu_milli=per_cpu,
        per_gpu_memory=per_memory,
        cpu_milli=_optional(res, path, "cpu_cores", _cpu_milli, 0),
        memory=_optional(res, path, "memory_bytes", memory, 0),
    )


_GPU_REQUEST_KEYS = ("count", "min_per_machine", "memory_bytes", "shared", "shards")


def _gpu_requests(
    value: object, path: str, memory: Callable[[object, str], int] = _gpu_share
) -> tuple[int, int, int, int]:
    """(count, min_per_machine, bytes on each GPU, shards of each GPU): a shared request
    asks for memory on each of its ``count`` GPUs (``memory_bytes``, or ``shards``).
    ``memory``: how that memory is read (a stored run's: without the least a submit asks)."""
    req = _object(value, path, _GPU_REQUEST_KEYS)
    count = _optional(req, path, "count", _int_between(0, MAX_GPUS), 0)
    share = _optional(req, path, "memory_bytes", memory, 0)
    shards = _optional(req, path, "shards", _int_between(1, MAX_SHARDS), 0)
    asks_share = "memory_bytes" in req or "shards" in req
    shared = _optional(req, path, "shared", _bool, asks_share)
    if shared and not asks_share:
        raise SpecError(
            f"{path}.shared", "a shared GPU needs memory_bytes, the memory wanted on each GPU"
        )
    if asks_share:
        _check_shared(req, path, count, share, shards, shared)
        return count, 0, share, shards
    least = _optional(req, path, "min_per_machine", _int_between(0, MAX_GPUS), count)
    if least > count:
        raise SpecError(
            f"{path}.min_per_machine", f"must not be more than count ({count}), got {least}"
        )
    return count, least, 0, 0


def _check_shared(
    req: JsonObject, path: str, count: int, share: int, shards: int, shared: bool
) -> None:
    """A shared request's refusals, one line each."""
    if "memory_bytes" in req and "shards" in req:
        raise SpecError(f"{path}.shards", "ask for memory_bytes or shards, not both")
    if not shared:
        raise SpecError(f"{path}.shared", "memory_bytes asks for a shared GPU: drop shared: false")
    if "memory_bytes" in req and share == 0:
        raise SpecError(f"{path}.memory_bytes", "must be more than 0 bytes on each GPU")
    if count == 0:
        raise SpecError(f"{path}.count", "a shared request needs at least 1 GPU")
    if "min_per_machine" in req:
        raise SpecError(
            f"{path}.min_per_machine", "a shared request runs on one machine: drop min_per_machine"
        )


def _per_gpu(value: object, path: str, memory: Callable[[object, str], int]) -> tuple[int, int]:
    per = _object(value, path, ("cpu_cores", "memory_bytes"))
    cpu = _optional(per, path, "cpu_cores", _cpu_milli, 0)
    return cpu, _optional(per, path, "memory_bytes", memory, 0)


# ------------------------------------------------------------------ back to JSON


def spec_to_dict(spec: RunSpec) -> dict[str, object]:
    """The JSON shape of a spec (docs/api.md); ``parse_spec`` reads it back unchanged."""
    metadata: JsonObject = {"name": spec.name}
    if spec.workspace is not None:
        metadata["workspace"] = spec.workspace
    return {
        "metadata": metadata,
        "spec": {
            "priority": spec.priority,
            "workers": spec.workers,
            "gang": spec.gang,
            "restart_limit": spec.restart_limit,
            **({"after": list(spec.after)} if spec.after else {}),
            **({"interactive": True} if spec.interactive else {}),
            **({"hold": True} if spec.hold else {}),
            **({"begin_at": iso_begin(spec.begin_at)} if spec.begin_at is not None else {}),
            "task_template": _task_to_dict(spec.task),
            **(
                {"notify": [{"url": u, "events": list(e)} for u, e in spec.notify]}
                if spec.notify
                else {}
            ),
        },
    }


def _task_to_dict(task: TaskTemplate) -> JsonObject:
    out: JsonObject = {"image": task.image} if task.image else {}
    if task.command is not None:
        out["command"] = task.command
    out["args"] = list(task.args)
    out["env"] = dict(task.env)
    if task.time_limit_seconds is not None:
        out["time_limit_seconds"] = task.time_limit_seconds
    if task.working_dir is not None:
        out["working_dir"] = task.working_dir
    if task.submit_dir is not None:
        out["submit_dir"] = task.submit_dir
    if task.submit_env:
        out["submit_env"] = dict(task.submit_env)
    out["datavolume_refs"] = [
        {"name": d.name, "mount_path": d.mount_path, "mode": d.mode.value} for d in task.drives
    ]
    out["requested_resources"] = {
        "gpu_requests": _gpu_requests_to_dict(task),
        "per_gpu": {
            "cpu_cores": _cores(task.per_gpu_cpu_milli),
            "memory_bytes": task.per_gpu_memory,
        },
        "cpu_cores": _cores(task.cpu_milli),
        "memory_bytes": task.memory,
    }
    return out


def _gpu_requests_to_dict(task: TaskTemplate) -> JsonObject:
    if task.gpu_share:
        return {"count": task.gpus, "memory_bytes": task.gpu_share, "shared": True}
    if task.gpu_shards:
        return {"count": task.gpus, "shards": task.gpu_shards, "shared": True}
    return {"count": task.gpus, "min_per_machine": task.min_per_machine}


def _cores(milli: int) -> int | float:
    return milli // 1000 if milli % 1000 == 0 else milli / 1000
