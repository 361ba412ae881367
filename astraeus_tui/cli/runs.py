"""Run commands: submit, run, ls, show, priority, logs, events, wait."""

from __future__ import annotations

import http.client
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from astraeus_tui.cli.common import (
    RAW_HELP,
    JsonOption,
    call,
    complete_run,
    echo,
    fail,
    output_writer,
    parse_duration,
    spec_document,
    table_options,
)
from astraeus_tui.cli.fast.document import document_of
from astraeus_tui.cli.fast.options import LS, RUN, SHOW, SUBMIT, WAIT
from astraeus_tui.cli.fast.preview import show_preview
from astraeus_tui.cli.fast.preview import when as _when
from astraeus_tui.cli.fast.show import show_lines
from astraeus_tui.cli.tables import print_json, print_json_line, show_runs
from astraeus_tui.client import ApiError, Client

if TYPE_CHECKING:
    from runner.schema import Event

T = TypeVar("T")

RunArg = Annotated[str, typer.Argument(help="The run's name.", autocompletion=complete_run)]


@table_options(SUBMIT)
def submit(
    files: Annotated[
        list[str] | None,
        typer.Argument(help="JSON or TOML run specs (- for stdin); NDJSON with --ndjson."),
    ] = None,
    **o: Any,
) -> None:
    """Submit a run spec (JSON or TOML; an #SBATCH script works too), or many at once.

    A spec with a `spec.sweep` section (a grid or a list) submits a sweep. Many files, or
    NDJSON, are one batch: each refusal is one line, the others are submitted."""
    files = files or []
    dry_run, after, ndjson, as_json = o["dry_run"], o["after"], o["ndjson"], o["as_json"]
    if len(files) > 1 or ndjson:
        if dry_run:
            fail("--dry-run: give one spec file")
        from astraeus_tui.cli.fast.batch import submit_many
        from astraeus_tui.cli.fast.out import finish

        raise typer.Exit(finish(lambda: submit_many(files, ndjson, after, as_json)))
    if not files:
        raise typer.BadParameter("give a spec file, or --ndjson to read NDJSON on stdin")
    file = files[0]
    text = sys.stdin.read() if file == "-" else None
    sweep = _sweep(file, text)
    if sweep is not None and not dry_run:
        if after:
            sweep["template"]["spec"]["after"] = after
        from astraeus_tui.cli.groups import create_group

        create_group(sweep, as_json)
        return
    document = spec_document(file, text)
    if after:
        document["spec"]["after"] = after
    if dry_run:
        show_preview(call(lambda c: c.preview(document)), as_json)
        return
    run = call(lambda c: c.submit(document))
    if as_json:
        print_json(run)
    else:
        echo(f"Submitted run {run.name} ({run.workspace}, priority {run.priority})")


def _sweep(file: str, text: str | None) -> dict[str, Any] | None:
    """The sweep a JSON or TOML spec with a ``spec.sweep`` section asks for, else None."""
    from runner.runspec.documents import spec_file_document
    from runner.runspec.groups import sweep_document
    from runner.runspec.parse import SpecError

    try:
        document = spec_file_document(file, text)
        return None if document is None else sweep_document(document)
    except SpecError as e:
        if "sweep" in str(e):
            fail(f"422 INVALID_SPEC: {e}")
        return None  # not a sweep: the spec's own checks say what is wrong


def why(name: RunArg, as_json: bool = JsonOption) -> None:
    """Why a run waits, and what would make it start sooner (each lever re-planned)."""
    answer = call(lambda c: c.why(name))
    if as_json:
        print_json(answer)
        return
    echo(f"{name}: {answer['reason']}")
    for line in answer["chain"]:
        echo(f"  {line}")
    if answer.get("estimate"):
        echo(f"  Estimate: {_when(answer['estimate'])}.")
    for lever in answer["levers"]:
        echo(f"  → {lever}")


@table_options(RUN)
def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")],
    **o: Any,
) -> None:
    """Run a command: `astra run --gpus 2 --time-limit 2h -- python train.py`.

    `astra run -it --gpus 1 -- bash` waits in the queue like any run, then gives this
    terminal to it; closing the terminal cancels it."""
    from runner.runspec.build import FieldError

    try:
        document = document_of(command, o, parse_duration)  # every option by its name
    except FieldError as e:
        raise typer.BadParameter(e.message) from None
    if o["dry_run"]:
        show_preview(call(lambda c: c.preview(document)), o["as_json"])
        return
    created = call(lambda c: c.submit(document))
    if o["interactive"] or o["tty"]:
        from astraeus_tui.cli.enter import take_terminal

        raise typer.Exit(take_terminal(created.name))
    if o["as_json"]:
        print_json(created)
    else:
        echo(f"Submitted run {created.name}")


@table_options(LS)
def ls(**o: Any) -> None:
    """Waiting and running runs, in the planner's order, with why each waits."""
    runs = call(lambda c: c.runs(all=o["all_runs"], workspace=o["workspace"], state=o["state"]))
    show_runs(runs, o["as_json"], o["wide"])


@table_options(SHOW)
def show(name: RunArg, **o: Any) -> None:
    """One run: its state, why, its workers and events."""
    run = call(lambda c: c.show(name))
    if o["as_json"]:
        print_json(run)
        return
    for line in show_lines(run):
        echo(line)


def priority(name: RunArg, value: Annotated[int, typer.Argument(help="The new priority.")]) -> None:
    """Change a run's priority (up to its workspace's maximum)."""
    run = call(lambda c: c.set_priority(name, value))
    echo(f"{run.name}: priority {run.priority}")


def logs(
    name: RunArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing.")] = False,
    tail: Annotated[int, typer.Option(help="Only the last N lines.")] = 0,
    raw: Annotated[bool, typer.Option("--raw", help=RAW_HELP)] = False,
) -> None:
    """The run's output, every attempt, oldest first.

    On a terminal, control sequences but colour are shown escaped (`\\x1b]0;…`);
    piped, or with --raw, the bytes as the program wrote them."""
    again = f"astra logs -f {name}" if follow else None
    _stream(
        lambda: Client(timeout=None).logs(name, follow=follow, tail=tail), output_writer(raw), again
    )


def _stream(
    items: Callable[[], Iterable[T]], write: Callable[[T], None], again: str | None
) -> None:
    """Write each item of a stream from the daemon (``items`` opens it): its error in one
    line, Ctrl-C the quiet end. A follow (``again``: the command that follows again) that
    ends while no daemon answers says that the daemon stopped."""
    try:
        for item in items():
            write(item)
    except ApiError as e:
        fail(str(e))
    except KeyboardInterrupt:
        return
    except (http.client.HTTPException, ConnectionError):
        pass  # the stream broke off: the daemon is gone, below
    if again is not None:
        _unless_daemon_stopped(again)


def _unless_daemon_stopped(again: str) -> None:
    """A follow ended: when no daemon answers now, it stopped, not the run (one line)."""
    try:
        Client().status()
    except ApiError as e:
        if e.code == "NO_DAEMON":
            fail(f"the daemon stopped: following ends (runs go on; {again} once it is back)")


def events(
    name: Annotated[str | None, typer.Argument(autocompletion=complete_run)] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
    as_json: bool = JsonOption,
) -> None:
    """Events of one run, or of all."""

    def write(e: Event) -> None:
        if as_json:
            print_json_line(e)  # NDJSON: one compact object a line
        else:
            echo(f"{e.time}  {e.run:<24} {e.kind:<12} {e.message}")

    again = "astra events -f" if follow else None
    _stream(lambda: Client(timeout=None).events(name, follow=follow), write, again)


@table_options(WAIT)
def wait(name: RunArg, **o: Any) -> None:
    """Wait for a run to finish; the exit code follows the run's."""
    from astraeus_tui.cli.fast.out import finish
    from astraeus_tui.cli.fast.runs import wait_until_finished

    raise typer.Exit(finish(lambda: wait_until_finished(name, o["timeout"])))


def register(app: typer.Typer) -> None:
    for fn in (submit, run, ls, show, why, logs, events, wait):
        app.command(fn.__name__)(fn)
    # `astra priority RUN -5`: a negative number is the value, not an option
    app.command("priority", context_settings={"ignore_unknown_options": True})(priority)
