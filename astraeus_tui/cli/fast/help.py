"""`astra --help`, `astra COMMAND --help` and shell completion without typer, rich or click.

The texts are typer's own, made from the app by ``python -m astraeus_tui.cli.helpgen``
(cli/fast/helptext.py): click's plain help at 80 columns, and the first word's completions
as typer's bash, zsh and fish completions write them (``_ASTRA_COMPLETE=complete_bash``
and the like). Anything else (a nested command's help, an option's value, another shell)
returns None and typer answers.
"""

from __future__ import annotations

import os
import sys

PROGRAM = "astra"  # the texts name it; `python -m astraeus_tui.cli.main` goes to typer
COMPLETE_VAR = "_ASTRA_COMPLETE"
SHELLS = {"complete_bash": 1, "complete_zsh": 2, "complete_fish": 3}  # COMPLETIONS' column
# the commands whose first argument is a run's name (typer completes it from the daemon)
RUN_ARGUMENT = ("show", "why", "delete", "logs", "events", "wait", "priority")


def fast_help(argv: list[str]) -> int | None:
    """``astra``, ``astra --help`` and ``astra COMMAND --help``."""
    if os.path.basename(sys.argv[0]) != PROGRAM:
        return None
    from astraeus_tui.cli.fast.helptext import COMMANDS, MAIN

    if not argv:  # as click's no_args_is_help: the help on stderr, exit code 2
        sys.stderr.write(MAIN)
        return 2
    if argv == ["--help"]:
        sys.stdout.write(MAIN)
        return 0
    if len(argv) == 2 and argv[1] == "--help" and argv[0] in COMMANDS:
        sys.stdout.write(COMMANDS[argv[0]])
        return 0
    return None


def fast_complete() -> int | None:
    """Answer typer's completion protocol for the first word, or a run's name."""
    column = SHELLS.get(os.environ.get(COMPLETE_VAR, ""))
    if column is None or os.path.basename(sys.argv[0]) != PROGRAM:
        return None
    got = _words(column)
    if got is None:
        return None
    args, incomplete = got
    if incomplete and not incomplete[0].isalnum():
        return None  # options: click's
    if not args:
        from astraeus_tui.cli.fast.helptext import COMPLETIONS

        lines = [item[column] for item in COMPLETIONS if item[0].startswith(incomplete)]
    elif len(args) == 1 and args[0] in RUN_ARGUMENT:
        lines = [_formatted(name, column) for name in run_names(incomplete)]
    else:
        return None
    return _answer(lines, column)


def _words(column: int) -> tuple[list[str], str] | None:
    """The words before the one completed, and that one, as typer's classes read them."""
    if column == 1:
        try:
            words = _split(os.environ["COMP_WORDS"])
            cword = int(os.environ["COMP_CWORD"])
        except (KeyError, ValueError):
            return None
        return words[1:cword], words[cword] if cword < len(words) else ""
    line = os.environ.get("_TYPER_COMPLETE_ARGS", "")
    args = _split(line)[1:]
    if args and not line.endswith(" "):
        return args[:-1], args[-1]
    return args, ""


def _split(text: str) -> list[str]:
    """click's split_arg_string: shlex's words, a last unfinished one kept as it is."""
    import shlex

    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    try:
        out.extend(lex)
    except ValueError:
        out.append(lex.token)
    return out


def run_names(incomplete: str) -> list[str]:
    """The visible runs' names that start with ``incomplete``, nothing without a daemon
    (also typer's completion of them: cli/common.py's ``complete_run``)."""
    from astraeus_tui.client import ApiError, Client

    try:
        runs = Client(timeout=2).runs(all=True)
    except (ApiError, OSError):
        return []
    return [r.name for r in runs if r.visible and r.name.startswith(incomplete)]


def _formatted(value: str, column: int) -> str:
    """An item without help, as typer's bash, zsh and fish classes format it."""
    if column == 2:
        escaped = (value.replace('"', '""').replace("'", "''").replace("$", "\\$")
                   .replace("`", "\\`").replace(":", r"\\:"))  # fmt: skip
        return f'"{escaped}"'
    return value


def _answer(lines: list[str], column: int) -> int:
    if column == 2:
        text = "_arguments '*: :((" + "\n".join(lines) + "))'" if lines else "_files"
    elif column == 3 and os.environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args":
        return 0 if lines else 1  # fish asks only whether there are any
    elif column == 3 and os.environ.get("_TYPER_COMPLETE_FISH_ACTION") != "get-args":
        text = ""
    else:
        text = "\n".join(lines)
    sys.stdout.write(text + "\n")
    return 0
