"""The options of the commands the fast path answers, in one table.

Each command maps an option's destination (the typer command's parameter) to its row:
its names, its kind, its help, the value's type and default, and the environment variable
that gives it (``flag``, ``value`` and ``multi`` make the rows). The typer commands'
parameters are made from it (``table_options`` in cli/common.py: the command receives the
values as ``**o``, by destination), so is the fast parser's spec (``spec``), and the help
texts are typer's (cli/helpgen.py). tests/unit/test_cli_options.py checks that every option
of those typer commands is its row here. Plain data: the fast path imports it at start-up.
"""

from __future__ import annotations

FLAG, VALUE, MULTI = "flag", "value", "multi"

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    # names, FLAG|VALUE|MULTI, help, the value's type, its default, its environment variable
    Option = tuple[tuple[str, ...], str, str, type, object, str | None]
    Options = dict[str, Option]


def flag(*names: str, help: str) -> Option:
    """An option without a value: True when given, else False."""
    return names, FLAG, help, bool, False, None


def value(*names: str, help: str, type: type = str, default: object = None,
          envvar: str | None = None) -> Option:  # fmt: skip
    """An option with one value of ``type`` (``str``, ``int``, ``float``): ``default`` when
    not given (None: the parameter is ``type | None``), or ``envvar`` where it is set."""
    return names, VALUE, help, type, default, envvar


def multi(*names: str, help: str) -> Option:
    """A repeatable option: its values as a list of strings, None when not given."""
    return names, MULTI, help, str, None, None


JSON = flag("--json", help="Print machine-readable JSON.")
AFTER = multi("--after", help="Start only once this run has succeeded (repeatable).")
DRY_RUN = flag("--dry-run", help="Show where it would go; submit nothing.")

LS: Options = {
    "all_runs": flag("--all", "-a", help="Include finished runs."),
    "workspace": value("--workspace", help="Only this workspace."),
    "state": value("--state", help="Only these states, e.g. Queued,Running."),
    "as_json": JSON,
    "wide": flag("--wide", "-w",
                 help="Whole reasons (else cut to one line); START with the 90 % start and"
                      " the limits'; wider than the terminal where they need it."),
}  # fmt: skip
SHOW: Options = {"as_json": JSON}
WAIT: Options = {
    "timeout": value("--timeout", help="Give up after this many seconds.", type=float),
}
SUBMIT: Options = {
    "dry_run": DRY_RUN,
    "after": AFTER,
    "ndjson": flag("--ndjson", help="One JSON run document a line (stdin if no file)."),
    "as_json": JSON,
}
RUN: Options = {
    "name": value("--name", help="The run's name (default: from the command)."),
    "image": value("--image", help="Container image (default: the daemon's default_image).",
                   default="", envvar="ASTRAEUS_IMAGE"),
    "gpus": value("--gpus", help="GPUs per worker.", type=int, default=0),
    "cpus": value("--cpus", help="CPU cores per worker.", type=float, default=0),
    "memory": value("--memory", help="Memory per worker, e.g. 64GiB (a bare number is bytes)."),
    "time_limit": value("--time-limit", help="e.g. 2h, 90m, 1-00:00:00; a bare number is"
                        " seconds (#SBATCH --time's is minutes)."),
    "priority": value("--priority", help="-1000..1000, up to the workspace's maximum.",
                      type=int, default=0),
    "workspace": value("--workspace", help="Workspace (namespace)."),
    "drive": multi("--drive", help="NAME:/mount/path[:ro]"),
    "env": multi("--env", help="KEY=VALUE"),
    "workers": value("--workers", help="Workers (a gang by default).", type=int, default=1),
    "restarts": value("--restarts", help="Restarts after a failure, at most (default: the"
                                         " daemon's restart_limit, 10); 0: none.", type=int),
    "after": AFTER,
    "interactive": flag("--interactive", "-i", help="With -t: an interactive run."),
    "tty": flag("--tty", "-t", help="Wait in the queue, then give the terminal to it."),
    "hold": flag("--hold", help="Submit it held: it waits until `astra release`."),
    "begin": value("--begin",
                   help="Not before this time: 2026-12-02T03:00 (UTC unless an offset), +2h."),
    "notify": multi("--notify",
                    help="An Apprise URL to notify, e.g. json://host/hook (repeatable)."),
    "notify_on": value("--notify-on",
                       help="Events for --notify: succeeded,failed,preempted,started,timelimit"
                            " (default: succeeded,failed)."),
    "dry_run": DRY_RUN,
    "gpu_mem": value("--gpu-mem",
                     help="Share GPUs: this memory on each of --gpus GPUs (default 1), e.g."
                          " 20GiB (a bare number is bytes)."),
    "chdir": value("--chdir", "-D",
                   help="Start in this folder (default: this one; a container's working"
                        " directory)."),
    "export": value("--export",
                    help="ALL (default: this environment, for local processes), NONE, or"
                         " VAR1,VAR2 and VAR=value for every executor, as sbatch reads it."),
    "as_json": JSON,
}  # fmt: skip
# the typer commands whose options these are (cli/runs.py)
COMMANDS: dict[str, Options] = {"ls": LS, "show": SHOW, "wait": WAIT, "submit": SUBMIT,
                                "run": RUN}  # fmt: skip


def spec(options: Options, handed_over: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """The fast parser's spec: each name to (destination, kind). An option in
    ``handed_over`` is left out, so a call that gives it goes to typer."""
    return {name: (dest, kind) for dest, (names, kind, *_) in options.items()
            if dest not in handed_over for name in names}  # fmt: skip
