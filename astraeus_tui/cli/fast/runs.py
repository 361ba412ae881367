"""`run`, `submit`, `show`, `priority`, `delete` and `wait` without typer.

Each mirrors its typer twin in cli/runs.py line for line (same requests, same
text, same exit codes); a shape it does not handle returns None before it has
done anything, and typer takes the call.
"""

from __future__ import annotations

import os
import sys
import time

from astraeus_tui.cli.fast.args import parse, texts, values
from astraeus_tui.cli.fast.options import RUN, SHOW, SUBMIT, WAIT, spec
from astraeus_tui.cli.fast.out import Failed, Row, call, call_json, echo, finish, print_json
from astraeus_tui.wire import quoted


def _one_name(argv: list[str], spec: dict[str, tuple[str, str]]) -> tuple[str, bool] | None:
    """The run's name and ``--json`` of ``CMD NAME [--json]``, or None."""
    parsed = parse(argv, spec)
    if parsed is None or parsed.rest is not None or len(parsed.positional) != 1:
        return None
    return parsed.positional[0], bool(parsed.options.get("as_json"))


def fast_show(argv: list[str]) -> int | None:
    if (got := _one_name(argv, spec(SHOW))) is None:
        return None
    name, as_json = got

    def work() -> int:
        if as_json:
            print_json(call(lambda c: c.show(name)))
            return 0
        from astraeus_tui.cli.fast.show import show_lines, show_row

        for line in show_lines(show_row(call_json("GET", f"/v1/runs/{quoted(name)}"))):
            echo(line)
        return 0

    return finish(work)


def fast_priority(argv: list[str]) -> int | None:
    """``priority NAME VALUE``; a negative VALUE is the value, as typer reads it."""
    if len(argv) != 2 or argv[0].startswith("-"):
        return None
    name, raw = argv
    digits = raw[1:] if raw.startswith("-") else raw
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(raw)

    def work() -> int:
        run = call_json("PATCH", f"/v1/runs/{quoted(name)}", {"priority": value})
        echo(f"{run['name']}: priority {run['priority']}")
        return 0

    return finish(work)


def fast_wait(argv: list[str]) -> int | None:
    parsed = parse(argv, spec(WAIT))
    if parsed is None or parsed.rest is not None or len(parsed.positional) != 1:
        return None
    if (given := values(parsed, WAIT)) is None:
        return None
    return finish(lambda: wait_until_finished(parsed.positional[0], given.get("timeout")))


def wait_until_finished(name: str, timeout: float | None) -> int:
    """Poll until ``name`` finishes; its exit code (0 once it succeeded, 124 on timeout)."""
    from runner.states import RunState

    deadline = None if timeout is None else time.monotonic() + timeout
    interval = float(os.environ.get("ASTRAEUS_WAIT_POLL", "0.5"))
    path = f"/v1/runs/{quoted(name)}"
    while True:
        run = call_json("GET", path)
        state, reason = run["state"], run.get("reason")
        if state in RunState.FINISHED:
            break
        if deadline is not None and time.monotonic() > deadline:
            raise Failed(f"{name}: still {state} after {timeout:g} s", 124)
        time.sleep(interval)
    echo(f"{name}: {state}" + (f" ({reason})" if reason else ""))
    if state == RunState.SUCCEEDED:
        return 0
    code = run.get("exit_code")
    return code if isinstance(code, int) and code > 0 else 1


def fast_run(argv: list[str]) -> int | None:
    from astraeus_tui.cli.fast.document import run_document

    parsed = parse(argv, spec(RUN, handed_over=("interactive", "tty")))  # cli/enter.py's
    if parsed is None or parsed.positional or not parsed.rest:
        return None  # the command must follow --, every option before it
    document = run_document(parsed)
    if document is None:
        return None
    as_json = bool(parsed.options.get("as_json"))
    if parsed.options.get("dry_run"):
        return finish(lambda: _preview(document, as_json))

    def work() -> int:
        if as_json:
            print_json(call(lambda c: c.submit(document)))
        else:
            echo(f"Submitted run {call_json('POST', '/v1/runs', document)['name']}")
        return 0

    return finish(work)


def fast_submit(argv: list[str]) -> int | None:
    """``submit FILE [--after RUN]... [--json]`` of a spec that is not a sweep; with many
    files or ``--ndjson``, a batch (cli/fast/batch.py)."""
    parsed = parse(argv, spec(SUBMIT))
    if parsed is None or parsed.rest is not None:
        return None
    dry_run = bool(parsed.options.get("dry_run"))
    if dry_run and (len(parsed.positional) != 1 or parsed.options.get("ndjson")):
        return None  # typer's submit says what is wrong
    if len(parsed.positional) > 1 or parsed.options.get("ndjson"):
        from astraeus_tui.cli.fast.batch import submit_many

        files, ndjson = parsed.positional, bool(parsed.options.get("ndjson"))
        after, json_out = texts(parsed, "after"), bool(parsed.options.get("as_json"))
        return finish(lambda: submit_many(files, ndjson, after, json_out))
    if len(parsed.positional) != 1:
        return None
    from astraeus_tui.cli.fast.document import is_plain_spec, spec_document

    file = parsed.positional[0]
    stdin = sys.stdin.read() if file == "-" else None
    if not is_plain_spec(file, stdin):
        if stdin is not None:
            import io

            sys.stdin = io.StringIO(stdin)  # typer's submit reads it again
        return None
    after, as_json = texts(parsed, "after"), bool(parsed.options.get("as_json"))

    def work() -> int:
        document = spec_document(file, stdin)
        if after:
            document["spec"]["after"] = after
        if dry_run:
            return _preview(document, as_json)
        if as_json:
            print_json(call(lambda c: c.submit(document)))
            return 0
        run = Row(call_json("POST", "/v1/runs", document))
        echo(f"Submitted run {run.name} ({run.workspace}, priority {run.priority})")
        return 0

    return finish(work)


def _preview(document: object, as_json: bool) -> int:
    """``--dry-run``: where the run would go, as typer's commands say it; nothing submitted."""
    from astraeus_tui.cli.fast.preview import show_preview

    show_preview(call(lambda c: c.preview(document)), as_json)
    return 0
