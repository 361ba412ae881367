"""`astra submit FILE...` and `astra submit --ndjson`: many runs, one request a part.

Each spec file (or NDJSON line) is one run document, checked as `astra submit FILE` checks
it and then by the daemon as a single submit is; the valid ones are committed together
(``POST /v1/runs:batch``, one transaction a part of up to PART documents) and acknowledged
after the commit. A refusal is one line on stderr, ``SOURCE: 409 NAME_IN_USE: …`` (the file,
or ``FILE:LINE`` of an NDJSON line), and nothing of that run is stored; the exit code is 1
when any was refused. Shared by the fast path and its typer twin (cli/runs.py).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, NamedTuple

from astraeus_tui.cli.fast.out import Failed, call, echo, print_json_line

if TYPE_CHECKING:
    from runner.schema import Batch, Run

PART = 2000  # documents a request (the daemon takes at most 10,000 and 8 MiB)
PART_BYTES = 4 * 1024 * 1024
STDIN = "<stdin>"


class Source(NamedTuple):
    """One run document to send (its JSON, one line) or its refusal here, and its label."""

    label: str
    line: bytes | None
    refusal: tuple[int, str, str] | None = None  # status, code, message: as the daemon's


def submit_many(files: list[str], ndjson: bool, after: list[str] | None, as_json: bool) -> int:
    """Submit every document of ``files`` (``-``: stdin; with ``ndjson`` and no file, stdin)."""
    stdin = sys.stdin.read() if "-" in files or (ndjson and not files) else None
    if ndjson:
        sources = ndjson_sources(files or ["-"], stdin, after)
    else:
        sources = [file_source(f, stdin, after) for f in files]
    if not sources:
        raise Failed(f"422 INVALID_SPEC: {STDIN if not files else files[0]}: no run documents")
    refused = submitted = i = 0
    while i < len(sources):
        part = _within_bytes(sources[i : i + PART])
        i += len(part)
        lines = [s.line for s in part if s.line is not None]
        try:
            results = iter(_send(lines).results if lines else ())
        except Failed as e:
            if submitted or refused:
                e.args = (f"{e} (the runs from {part[0].label} on were not submitted)",)
            raise
        for source in part:
            item = next(results) if source.line is not None else None
            if item is not None and item.run is not None:
                submitted += 1
                _accepted(source, item.run, as_json)
                continue
            refused += 1
            if item is not None and item.error is not None:
                status, code, message = item.error.status, item.error.code, item.error.message
            else:
                status, code, message = source.refusal or (0, "", "")
            why = {"status": status, "code": code, "message": message}
            text = f"{status} {code}: {message}"
            if as_json:
                print_json_line({"source": source.label, "error": why})
            echo(f"{source.label}: {text}", err=True)
    if refused:
        echo(f"{refused} of {refused + submitted} refused, nothing of them stored;"
             f" {submitted} submitted", err=True)  # fmt: skip
    return 1 if refused else 0


def _send(lines: list[bytes]) -> Batch:
    return call(lambda c: c.submit_batch(b"\n".join(lines)))


def _within_bytes(part: list[Source]) -> list[Source]:
    size = 0
    for i, s in enumerate(part):
        size += len(s.line or b"") + 1
        if size > PART_BYTES and i:
            return part[:i]
    return part


def _accepted(source: Source, run: Run, as_json: bool) -> None:
    if as_json:
        import msgspec

        print_json_line({"source": source.label, "run": msgspec.to_builtins(run)})
    else:
        echo(f"Submitted run {run.name} ({run.workspace}, priority {run.priority})")


def file_source(file: str, stdin: str | None, after: list[str] | None) -> Source:
    """One spec file (JSON, TOML or #SBATCH) as `astra submit FILE` reads and checks it."""
    from astraeus_tui.cli.fast.document import checked_document
    from runner.runspec.parse import SpecError

    text = stdin if file == "-" else None
    label = STDIN if file == "-" else file
    try:
        document = checked_document(file, text)  # a sweep is not a run's spec: refused here
    except SpecError as e:
        if not _is_sweep(file, text):  # read again only then, to say what it is
            return Source(label, None, (422, "INVALID_SPEC", str(e)))
        sweep = f"spec.sweep: a sweep is submitted on its own: astra submit {file}"
        return Source(label, None, (422, "INVALID_SPEC", sweep))
    if after:
        document["spec"]["after"] = after
    return Source(label, _encode(document))


def _is_sweep(file: str, text: str | None) -> bool:
    from runner.runspec.documents import spec_file_document
    from runner.runspec.parse import SpecError

    try:
        document = spec_file_document(file, text)
    except SpecError:
        return False
    spec = document.get("spec") if isinstance(document, dict) else None
    return isinstance(spec, dict) and "sweep" in spec


def ndjson_sources(files: list[str], stdin: str | None, after: list[str] | None) -> list[Source]:
    """Each non-blank line of each file (``-``: stdin) is one run document, sent as it is
    (``--after`` set in it); the daemon checks it."""
    sources = []
    for file in files:
        label = STDIN if file == "-" else file
        if file == "-":
            text = stdin or ""
        else:
            try:
                with open(file, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else e.strerror or e
                sources.append(
                    Source(label, None, (422, "INVALID_SPEC", f"{file}: cannot read: {why}"))
                )
                continue
        for number, line in enumerate(text.split("\n"), 1):
            if line.strip():
                sources.append(Source(f"{label}:{number}", _with_after(line, after)))
    return sources


def _with_after(line: str, after: list[str] | None) -> bytes:
    if after:
        try:
            document = json.loads(line)
        except ValueError:
            document = None  # sent as it is: the daemon says what is wrong with it
        if isinstance(document, dict) and isinstance(document.get("spec"), dict):
            document["spec"]["after"] = after
            return _encode(document)
    return line.strip().encode()


def _encode(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
