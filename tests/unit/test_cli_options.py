"""cli/fast/options.py is the options of the typer commands the fast path answers.

typer's options are made from the table (``table_options`` in cli/common.py: the names,
help, type, default and environment variable), and so is the fast parser's spec; this test
walks the typer app's click commands so that neither side can gain, lose or change an
option alone.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup, TyperOption

from astraeus_tui.cli.fast.options import COMMANDS, FLAG, MULTI, RUN, VALUE, spec
from astraeus_tui.cli.main import app


def _kind(param: TyperOption) -> str:
    return FLAG if param.is_flag else MULTI if param.multiple else VALUE


def _typed(kind: str, of: type) -> str:
    """The type typer reads from the parameter a row makes (without ``| None``)."""
    return "list[str]" if kind == MULTI else of.__name__


def test_each_typer_option_is_its_row_in_the_table() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    for command, options in COMMANDS.items():
        params = [p for p in group.commands[command].params if isinstance(p, TyperOption)]
        got = {p.name: (tuple(p.opts + p.secondary_opts), _kind(p), p.help, p.bare_type(),
                        p.default, p.envvar) for p in params}  # fmt: skip
        rows = {dest: (names, kind, help, _typed(kind, of), default, envvar)
                for dest, (names, kind, help, of, default, envvar) in options.items()}  # fmt: skip
        assert got == rows, command
        assert list(got) == list(rows), command  # in the same order, as the help lists them


def test_the_rows_types_and_defaults() -> None:
    assert RUN["gpus"][3:] == (int, 0, None)
    assert RUN["image"][3:] == (str, "", "ASTRAEUS_IMAGE")
    assert RUN["hold"][3:] == (bool, False, None)
    assert RUN["env"][3:] == (str, None, None)


def test_the_command_receives_the_values_by_destination() -> None:
    from typer.testing import CliRunner

    from astraeus_tui.cli.common import table_options

    got: dict[str, object] = {}
    app_ = typer.Typer()

    @table_options(RUN)
    def run(command: list[str], **o: object) -> None:
        got.update(o, command=command)

    app_.command()(run)
    result = CliRunner().invoke(app_, ["--gpus", "2", "--env", "A=1", "-t", "--", "x", "y"])
    assert result.exit_code == 0, result.output
    assert got["command"] == ["x", "y"]
    assert (got["gpus"], got["cpus"], got["workers"], got["env"]) == (2, 0, 1, ["A=1"])
    assert (got["tty"], got["hold"], got["name"], got["image"]) == (True, False, None, "")
    assert set(got) == {"command", *RUN}


def test_the_fast_spec_names_every_option_but_those_handed_over() -> None:
    assert spec(RUN)["-D"] == spec(RUN)["--chdir"] == ("chdir", VALUE)
    handed = spec(RUN, handed_over=("interactive", "tty"))
    assert set(spec(RUN)) - set(handed) == {"--interactive", "-i", "--tty", "-t"}
