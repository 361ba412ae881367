"""The options of the commands the fast path answers, in one table.

Each command maps an option's destination (the typer command's parameter) to its names,
its kind and its help. typer's options are made from it (``option`` in cli/common.py), so
are the fast parser's (``spec``), and the help texts are typer's (cli/helpgen.py).
tests/unit/test_cli_options.py checks that every option of those typer commands is here,
with the same names, kind and help. Plain data: the fast path imports it at start-up.
"""

from __future__ import annotations

FLAG, VALUE, MULTI = "flag", "value", "multi"

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    Option = tuple[tuple[str, ...], str, str]  # names, FLAG|VALUE|MULTI, help
    Options = dict[str, Option]

JSON: Option = (("--json",), FLAG, "Print machine-readable JSON.")
AFTER: Option = (("--after",), MULTI, "Start only once this run has succeeded (repeatable).")
DRY_RUN: Option = (("--dry-run",), FLAG, "Show where it would go; submit nothing.")

LS: Options = {
    "all_runs": (("--all", "-a"), FLAG, "Include finished runs."),
    "workspace": (("--workspace",), VALUE, "Only this workspace."),
    "state": (("--state",), VALUE, "Only these states, e.g. Queued,Running."),
    "as_json": JSON,
    "wide": (
        ("--wide", "-w"),
        FLAG,
        "Whole reasons (else cut to one line); START with the 90 % start and the limits';"
        " wider than the terminal where they need it.",
    ),
}
SHOW: Options = {"as_json": JSON}
WAIT: Options = {"timeout": (("--timeout",), VALUE, "Give up after this many seconds.")}
SUBMIT: Options = {
    "dry_run": DRY_RUN,
    "after": AFTER,
    "ndjson": (("--ndjson",), FLAG, "One JSON run document a line (stdin if no file)."),
    "as_json": JSON,
}
RUN: Options = {
    "name": (("--name",), VALUE, "The run's name (default: from the command)."),
    "image": (("--image",), VALUE, "Container image (default: the daemon's default_image)."),
    "gpus": (("--gpus",), VALUE, "GPUs per worker."),
    "cpus": (("--cpus",), VALUE, "CPU cores per worker."),
    "memory": (("--memory",), VALUE, "Memory per worker, e.g. 64GiB."),
    "time_limit": (("--time-limit",), VALUE, "e.g. 2h, 90m, 1-00:00:00."),
    "priority": (("--priority",), VALUE, "-1000..1000, up to the workspace's maximum."),
    "workspace": (("--workspace",), VALUE, "Workspace (namespace)."),
    "drive": (("--drive",), MULTI, "NAME:/mount/path[:ro]"),
    "env": (("--env",), MULTI, "KEY=VALUE"),
    "workers": (("--workers",), VALUE, "Workers (a gang by default)."),
    "after": AFTER,
    "interactive": (("--interactive", "-i"), FLAG, "With -t: an interactive run."),
    "tty": (("--tty", "-t"), FLAG, "Wait in the queue, then give the terminal to it."),
    "hold": (("--hold",), FLAG, "Submit it held: it waits until `astra release`."),
    "begin": (("--begin",), VALUE,
              "Not before this time: 2026-12-02T03:00 (UTC unless an offset), +2h."),
    "notify": (("--notify",), MULTI,
               "An Apprise URL to notify, e.g. json://host/hook (repeatable)."),
    "notify_on": (("--notify-on",), VALUE,
                  "Events for --notify: succeeded,failed,preempted,started,timelimit "
                  "(default: succeeded,failed)."),
    "dry_run": DRY_RUN,
    "gpu_mem": (("--gpu-mem",), VALUE,
                "Share GPUs: this memory on each of --gpus GPUs (default 1), e.g. 20GiB."),
    "chdir": (("--chdir", "-D"), VALUE,
              "Start in this folder (default: this one; a container's working directory)."),
    "export": (("--export",), VALUE,
               "ALL (default: this environment, for local processes), NONE, or"
               " VAR1,VAR2 and VAR=value for every executor, as sbatch reads it."),
    "as_json": JSON,
}  # fmt: skip
# the typer commands whose options these are (cli/runs.py)
COMMANDS: dict[str, Options] = {"ls": LS, "show": SHOW, "wait": WAIT, "submit": SUBMIT,
                                "run": RUN}  # fmt: skip


def spec(options: Options, handed_over: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """The fast parser's spec: each name to (destination, kind). An option in
    ``handed_over`` is left out, so a call that gives it goes to typer."""
    return {name: (dest, kind) for dest, (names, kind, _) in options.items()
            if dest not in handed_over for name in names}  # fmt: skip
