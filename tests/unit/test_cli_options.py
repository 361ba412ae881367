"""cli/fast/options.py is the options of the typer commands the fast path answers.

typer's options are made from the table, and the fast parser's spec; this test walks the
typer app's click commands so that neither side can gain, lose or change an option alone.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup, TyperOption

from astraeus_tui.cli.fast.options import COMMANDS, FLAG, MULTI, RUN, VALUE, spec
from astraeus_tui.cli.main import app


def _kind(param: TyperOption) -> str:
    return FLAG if param.is_flag else MULTI if param.multiple else VALUE


def test_each_typer_option_is_its_row_in_the_table() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    for command, options in COMMANDS.items():
        params = [p for p in group.commands[command].params if isinstance(p, TyperOption)]
        got = {p.name: (tuple(p.opts + p.secondary_opts), _kind(p), p.help) for p in params}
        assert got == options, command
        assert list(got) == list(options), command  # in the same order, as the help lists them


def test_the_fast_spec_names_every_option_but_those_handed_over() -> None:
    assert spec(RUN)["-D"] == spec(RUN)["--chdir"] == ("chdir", VALUE)
    handed = spec(RUN, handed_over=("interactive", "tty"))
    assert set(spec(RUN)) - set(handed) == {"--interactive", "-i", "--tty", "-t"}
