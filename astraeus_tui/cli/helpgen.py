"""Write astraeus_tui/cli/fast/helptext.py from the typer app: `python -m astraeus_tui.cli.helpgen`.

The fast path answers `astra --help`, `astra COMMAND --help` and shell completion of command
names from that file, without loading typer, rich or click. The help is click's plain text
(typer's without Rich, ``TYPER_USE_RICH=0``) at 80 columns; the completions are the items
click's completion gives for the first word. tests/unit/test_fast_help.py checks that the
file is what this module makes of the app as it is now.
"""

from __future__ import annotations

from pathlib import Path

TARGET = Path(__file__).parent / "fast" / "helptext.py"
HEADER = '''"""`astra --help`, `astra COMMAND --help` and the first word's completions, as the typer
app gives them (click's plain help at 80 columns). Made by `python -m astraeus_tui.cli.helpgen`
from the app: do not edit; tests/unit/test_fast_help.py checks it is up to date."""
# ruff: noqa: E501
# fmt: off

'''


def _help(args: list[str]) -> str:
    """What typer prints for ``astra ARGS --help`` (without Rich: the CLI's main module
    turns it off), at 80 columns."""
    from typer.testing import CliRunner

    from astraeus_tui.cli.main import app

    result = CliRunner(env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"}).invoke(
        app, [*args, "--help"], prog_name="astra", terminal_width=78
    )
    assert result.exit_code == 0, result.output
    return result.output


def completions() -> list[tuple[str, str, str, str]]:
    """Each command click completes as the first word: its name, and its line as typer's
    bash, zsh and fish completions write it."""
    import typer
    from typer._completion_classes import BashComplete, FishComplete, ZshComplete

    from astraeus_tui.cli.main import app

    command = typer.main.get_command(app)
    shells = [kind(command, {}, "astra", "_ASTRA_COMPLETE") for kind in
              (BashComplete, ZshComplete, FishComplete)]  # fmt: skip
    items = shells[0].get_completions([], "")
    # click's completion classes give format_completion no precise type
    return [(str(i.value), *(shell.format_completion(i) for shell in shells)) for i in items]  # type: ignore[misc]


def render() -> str:
    items = completions()
    commands = {name: _help([name]) for name, *_ in items}
    lines = [HEADER, f"MAIN = {_help([])!r}\n\n", "COMMANDS = {\n"]
    lines += [f"    {name!r}: {text!r},\n" for name, text in commands.items()]
    lines.append(
        "}\n\n# each command: its name, and its line in bash's, zsh's and fish's completion\n"
    )
    lines.append("COMPLETIONS = (\n")
    lines += [f"    {item!r},\n" for item in items]
    lines.append(")\n")
    return "".join(lines)


if __name__ == "__main__":
    TARGET.write_text(render())
    print(f"wrote {TARGET}")
