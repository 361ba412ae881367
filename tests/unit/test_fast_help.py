"""The fast path's help and completion texts (cli/fast/helptext.py) are the typer app's.

The file is made by ``python -m astraeus_tui.cli.helpgen``; when a command, an option or a
docstring changes, this test fails until it is made again.
"""

from __future__ import annotations

import typer

from astraeus_tui.cli import helpgen
from astraeus_tui.cli.fast import helptext
from astraeus_tui.cli.main import app


def test_the_help_file_is_made_from_the_app_as_it_is() -> None:
    assert helpgen.TARGET.read_text() == helpgen.render(), (
        "run `python -m astraeus_tui.cli.helpgen` to make cli/fast/helptext.py again"
    )


def test_every_visible_command_has_its_help_and_completion() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    visible = [name for name, cmd in group.commands.items() if not cmd.hidden]
    assert sorted(helptext.COMMANDS) == sorted(visible)
    assert [item[0] for item in helptext.COMPLETIONS] == list(helptext.COMMANDS)
    for name in ("ls", "run", "submit", "show", "priority", "delete", "wait"):
        assert helptext.COMMANDS[name].startswith(f"Usage: astra {name} [OPTIONS]")
    assert "--ndjson" in helptext.COMMANDS["submit"]
    assert helptext.MAIN.startswith("Usage: astra [OPTIONS] COMMAND [ARGS]...")
