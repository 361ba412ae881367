"""A strict little option parser: it accepts only what click would read the same way.

``parse`` returns None for anything it is not sure of (an unknown option, ``-h``,
combined short flags, an option's value that looks like an option, a flag given a
value), and the caller then hands the whole command to typer.
"""

from __future__ import annotations

import os

from astraeus_tui.cli.fast.options import FLAG, MULTI, VALUE

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import Any

    from astraeus_tui.cli.fast.options import Options


class Parsed:
    """Options by destination, positional arguments, and what follows ``--`` (if given)."""

    def __init__(self) -> None:  # not a dataclass: dataclasses imports inspect, slow
        self.options: dict[str, object] = {}
        self.positional: list[str] = []
        self.rest: list[str] | None = None


def parse(argv: list[str], spec: dict[str, tuple[str, str]]) -> Parsed | None:
    """``spec`` maps each option (``--json``, ``-a``) to (destination, FLAG|VALUE|MULTI),
    as cli/fast/options.py's ``spec`` makes it."""
    out = Parsed()
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            out.rest = argv[i:]
            return out
        if not token.startswith("-") or token == "-":
            out.positional.append(token)
            continue
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if name not in spec:
            return None
        dest, kind = spec[name]
        if kind == FLAG:
            if eq:
                return None
            out.options[dest] = True
            continue
        if eq:
            value = inline
        elif i < len(argv) and not argv[i].startswith("-"):
            value, i = argv[i], i + 1
        else:
            return None  # no value, or one click might read otherwise
        if kind == MULTI:
            listed = out.options.setdefault(dest, [])
            assert isinstance(listed, list)
            listed.append(value)
        else:
            out.options[dest] = value
    return out


def text(parsed: Parsed, dest: str) -> str | None:
    value = parsed.options.get(dest)
    return value if isinstance(value, str) else None


def texts(parsed: Parsed, dest: str) -> list[str] | None:
    value = parsed.options.get(dest)
    return [str(v) for v in value] if isinstance(value, list) else None


def values(parsed: Parsed, options: Options) -> dict[str, Any] | None:
    """The parsed options by destination, each value option of ``options`` (a table of
    cli/fast/options.py) converted by its row as the typer command receives it: given, else
    from its environment variable, else its default (also for an empty ``--gpus=``); None
    when a value does not convert (typer then says what is wrong, in its words)."""
    out: dict[str, Any] = dict(parsed.options)
    for dest, (_, kind, _, of, default, envvar) in options.items():
        if kind != VALUE:
            continue
        raw = out.get(dest)
        if raw is None and envvar is not None:
            raw = os.environ.get(envvar) or None  # an empty variable is not set, for click
        if default is not None:
            raw = raw or default
        if raw is not None:
            try:
                out[dest] = of(raw)
            except ValueError:
                return None
    return out
