"""Run specs as text: JSON or TOML decoded strictly, files read, #SBATCH scripts told apart.

The decoding rules (no duplicate keys, no NaN, bounded size and nesting) hold for
every document the daemon reads: run specs, group documents, API request bodies.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from runner.model import RunSpec
from runner.runspec.parse import (
    DOCUMENT,
    MAX_DEPTH,
    MAX_DOCUMENT,
    JsonObject,
    SpecError,
    parse_spec,
    show_value,
)


def load_spec_text(text: str, fmt: str | None = None) -> RunSpec:
    """Decode JSON or TOML (or an #SBATCH script, fmt="sbatch") and validate it.

    Without ``fmt``: JSON when the first non-blank character is ``{``, else TOML.
    """
    text = text.removeprefix("\ufeff")
    if fmt is None:
        fmt = "json" if text.lstrip().startswith("{") else "toml"
    if fmt == "sbatch":
        from runner.runspec.sbatch import parse_sbatch

        return parse_sbatch(text)
    if fmt not in ("json", "toml"):
        raise SpecError(DOCUMENT, f"unknown format {show_value(fmt)} (use json, toml or sbatch)")
    return parse_spec(decode_document(text, fmt))


def decode_document(text: str, fmt: str) -> object:
    """JSON (``fmt="json"``) or TOML text as plain values; SpecError when it is not that.

    Strict: no duplicate keys, no NaN or Infinity, nesting at most MAX_DEPTH deep, at
    most MAX_DOCUMENT characters. The API decodes every request body with it.
    """
    data = _decode(text, fmt)
    if _depth(data) > MAX_DEPTH:
        raise SpecError(DOCUMENT, f"is nested more than {MAX_DEPTH} levels deep")
    return data


def spec_file_document(file: str, text: str | None = None) -> object | None:
    """The JSON or TOML document of spec file ``file`` (or of ``text``, read from stdin),
    decoded but not checked as a spec; None for an #SBATCH script or a file that cannot
    be read (``load_spec_file`` says what is wrong with it). SpecError when the text is
    neither JSON nor TOML."""
    if text is None:
        if Path(file).suffix.lower() in (".sbatch", ".sh"):
            return None
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    fmt = "json" if text.lstrip().startswith("{") else "toml"
    return decode_document(text, fmt)


def _depth(data: object) -> int:
    """How deeply lists and objects nest in ``data`` (without recursion)."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            if depth > MAX_DEPTH:
                return depth
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in _children(node))
    return deepest


def _children(node: dict[object, object] | list[object]) -> list[object]:
    return list(node.values()) if isinstance(node, dict) else node


def _decode(text: str, fmt: str) -> object:
    if len(text) > MAX_DOCUMENT:
        raise SpecError(DOCUMENT, f"is too large ({len(text)} characters, at most {MAX_DOCUMENT})")
    try:
        if fmt == "json":
            return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        return tomllib.loads(text)
    except SpecError:
        raise
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise SpecError(DOCUMENT, f"not valid JSON: {error.msg} ({where})") from None
    except ValueError as error:  # TOMLDecodeError says where; also over-long numbers
        raise SpecError(DOCUMENT, f"not valid {fmt.upper()}: {_first_line(error)}") from None
    except RecursionError:
        raise SpecError(DOCUMENT, f"not valid {fmt.upper()}: nested too deeply") from None


def _first_line(error: Exception) -> str:
    lines = str(error).splitlines()
    return lines[0][:200] if lines else type(error).__name__


def _no_constant(name: str) -> object:
    raise SpecError(DOCUMENT, f"not valid JSON: {name} is not a number JSON allows")


def _no_duplicates(pairs: list[tuple[str, object]]) -> JsonObject:
    out: JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise SpecError(DOCUMENT, f"duplicate key {show_value(key)}")
        out[key] = value
    return out


def load_spec_file(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> RunSpec:
    """A spec from a file: by extension (.json, .toml, .sbatch, .sh), else by its content.

    ``environ``: the submitting shell's, which a #SBATCH script carries as its ``--export``
    says (default ALL), as sbatch does; a JSON or TOML spec says its environment itself.
    A file that cannot be read is a SpecError on the file's path.
    """
    file = Path(path)
    try:
        with open(file, encoding="utf-8", newline="") as f:  # as written: \r\n stays
            text = f.read()
    except UnicodeDecodeError:
        raise SpecError(str(file), "cannot read: not UTF-8 text") from None
    except OSError as error:
        raise SpecError(str(file), f"cannot read: {error.strerror or error}") from None
    suffix = file.suffix.lower()
    if suffix in (".sbatch", ".sh") or (suffix not in (".json", ".toml") and _is_sbatch(text)):
        from runner.runspec.sbatch import parse_sbatch

        return parse_sbatch(text, name_hint=file.stem, environ=environ)
    return load_spec_text(text, {".json": "json", ".toml": "toml"}.get(suffix))


def _is_sbatch(text: str) -> bool:
    return text.startswith("#!") and "#SBATCH" in text
