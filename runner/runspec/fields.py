"""The checks of single fields of a run spec, and the bounds they hold values to.

Each check looks at the type before using a value and raises :class:`SpecError`, whose
one-line message names the field; :mod:`runner.runspec.parse` builds a spec from them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TypeVar

from runner.model import format_size, parse_size

# Bounds on absurd values: a larger run than any machine is fine, these are not.
MAX_WORKERS = 1024
MAX_GPUS = 1024
MAX_SHARDS = 1024  # Slurm shards of one GPU (#SBATCH --gres=shard:N)
MAX_CPU_CORES = 100_000
MAX_MEMORY = 1024**5  # 1 PiB
MIN_MEMORY = 6 * 1024**2  # Docker's own least memory limit for a container (6MiB)
MAX_RESTART_LIMIT = 1000
MAX_TIME_LIMIT = 3650 * 86400  # ten years; no limit at all is null/absent
MAX_STRING = 4096  # image, command, env values, paths
MAX_ARG = 128 * 1024  # one argument (Linux's MAX_ARG_STRLEN): a `bash -c` script fits
# The command, its arguments and the environment (names and values) together: what a
# run costs to keep in the state and to pass to its processes. A larger input belongs
# in a file on a drive. Documented in docs/api.md (POST /v1/runs).
MAX_TASK_TEXT = 64 * 1024
MAX_ARGS = 1024
MAX_ENV = 1024
MAX_DRIVES = 64
MAX_DOCUMENT = 4 * 1024 * 1024  # characters in a spec file
MAX_DEPTH = 32  # nesting of lists and objects in a document (a spec needs 5)

DOCUMENT = "<document>"
SCRIPT = "<script>"

MAX_NAME = 63  # characters of a run's or a group's name
_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME_RULE = "1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"

_T = TypeVar("_T")
_D = TypeVar("_D")
JsonObject = dict[str, object]
_Check = Callable[[object, str], _T]


class SpecError(ValueError):
    """A bad run spec: ``field`` is the dotted path of the culprit, ``reason`` says why."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = one_line(field)
        self.reason = one_line(reason)
        super().__init__(self.field, self.reason)

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


def one_line(text: str) -> str:
    """Escape anything that would break the message over lines (or hide in it)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def show_value(value: object) -> str:
    """A short, safe rendering of any user value for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**18 else "a number too large to use"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 50 else repr(value[:47]) + "..."
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _child(parent: str, key: object) -> str:
    if isinstance(key, str) and _PLAIN_KEY_RE.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent or DOCUMENT}[{show_value(key)}]"


# ----------------------------------------------------------------- field checks


def _object(value: object, path: str, keys: tuple[str, ...]) -> JsonObject:
    """A JSON object with only the given keys."""
    if not isinstance(value, dict):
        raise SpecError(path or DOCUMENT, f"must be an object, got {show_value(value)}")
    for key in value:
        if not isinstance(key, str):
            raise SpecError(_child(path, key), "keys must be strings")
        if key not in keys:
            raise SpecError(_child(path, key), f"unknown key (expected one of: {', '.join(keys)})")
    return value


def _required(obj: JsonObject, parent: str, key: str, check: _Check[_T]) -> _T:
    value = obj.get(key)
    if value is None:
        raise SpecError(_child(parent, key), "required")
    return check(value, _child(parent, key))


def _optional(obj: JsonObject, parent: str, key: str, check: _Check[_T], default: _D) -> _T | _D:
    """``default`` when the key is absent or null."""
    value = obj.get(key)
    return default if value is None else check(value, _child(parent, key))


def _int_between(low: int, high: int) -> _Check[int]:
    def check(value: object, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpecError(
                path, f"must be an integer between {low} and {high}, got {show_value(value)}"
            )
        if not low <= value <= high:
            raise SpecError(path, f"must be between {low} and {high}, got {show_value(value)}")
        return value

    return check


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(path, f"must be true or false, got {show_value(value)}")
    return value


def _string(value: object, path: str, limit: int = MAX_STRING, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise SpecError(path, f"must be a string, got {show_value(value)}")
    if not value and not empty:
        raise SpecError(path, "must not be empty")
    if len(value) > limit:
        raise SpecError(path, f"must be at most {limit} characters, got {len(value)}")
    if "\0" in value:
        raise SpecError(path, "must not contain NUL characters")
    return value


def _name(value: object, path: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise SpecError(path, f"must be {_NAME_RULE}, got {show_value(value)}")
    return value


def _image(value: object, path: str) -> str:
    image = _string(value, path)
    if any(c.isspace() for c in image):
        raise SpecError(path, f"must be an image reference without spaces, got {show_value(image)}")
    return image


def _list(value: object, path: str, limit: int) -> list[object]:
    if not isinstance(value, list):
        raise SpecError(path, f"must be a list, got {show_value(value)}")
    if len(value) > limit:
        raise SpecError(path, f"must have at most {limit} items, got {len(value)}")
    return value


def _strings(value: object, path: str) -> tuple[str, ...]:
    items = _list(value, path, MAX_ARGS)
    return tuple(_string(v, f"{path}[{i}]", MAX_ARG, empty=True) for i, v in enumerate(items))


def _cpu_milli(value: object, path: str) -> int:
    """Cores (int or float) as millicores."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise SpecError(path, f"must be a non-negative number of cores, got {show_value(value)}")
    if value > MAX_CPU_CORES:
        raise SpecError(path, f"must be at most {MAX_CPU_CORES} cores, got {show_value(value)}")
    return round(value * 1000)


def _memory(value: object, path: str) -> int:
    try:
        size = parse_size(value)
    except (ValueError, OverflowError) as error:
        short = isinstance(value, str) and len(value) <= 50
        raise SpecError(path, str(error) if short else _size_reason(value)) from None
    if size > MAX_MEMORY:
        raise SpecError(path, f"must be at most 1PiB ({MAX_MEMORY} bytes), got {show_value(value)}")
    return size


def _worker_memory(value: object, path: str) -> int:
    """A worker's memory limit (0: none), at least Docker's minimum. A bare number is
    bytes: ``astra run --memory 10`` meant as 10G would die out of memory at each start."""
    return _least(value, path, "must be at least 6MiB (Docker's minimum)", "--memory")


def _gpu_share(value: object, path: str) -> int:
    """The memory a shared run asks on each GPU, at least 6MiB too: ``--gpu-mem 20`` is
    20 bytes, which no program runs in."""
    return _least(value, path, "must be at least 6MiB", "--gpu-mem")


def _least(value: object, path: str, reason: str, flag: str) -> int:
    """A size of at least MIN_MEMORY (0: none asked); a bare number too small is said to be
    bytes, with how to give the unit (``astra run FLAG 10G``)."""
    size = _memory(value, path)
    if 0 < size < MIN_MEMORY:
        if isinstance(value, str) and value.strip().isdigit():  # as astra run --memory 10
            n = value.strip()
            raise SpecError(path, f"{reason}, got '{n}', which is {n} bytes: give the unit,"
                            f" e.g. {n}G (astra run {flag} {n}G)")  # fmt: skip
        got = f"{size} bytes" if size < 1024 else format_size(size)
        raise SpecError(path, f"{reason}, got {got}")
    return size


def _size_reason(value: object) -> str:
    return f"must be a whole number of bytes or a string such as '64GiB', got {show_value(value)}"


def _time_limit(value: object, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(
            path, f"must be a positive whole number of seconds or null, got {show_value(value)}"
        )
    if value > MAX_TIME_LIMIT:
        raise SpecError(
            path, f"must be at most {MAX_TIME_LIMIT} (ten years), got {show_value(value)}"
        )
    return value
