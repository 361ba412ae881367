"""One parser of durations for the CLI, the dashboard's form and #SBATCH (the config's
retention is in test_config), and one formatter for what the daemon and the faces say."""

import subprocess
import sys

import pytest
import typer

from astraeus_tui.cli.common import parse_duration as cli_parse_duration
from runner.durations import compact, parse_duration, slurm_seconds, spoken, unit_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600),
        ("2h", 7200),
        ("90m", 5400),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("1d", 86400),
        ("1w", 604800),
        (" 2H ", 7200),
        ("1.5s", 1),  # fractions of a second are dropped
        ("1s", 1),
        ("30:00", 1800),  # Slurm's MM:SS
        ("1:00:00", 3600),
        ("1-12:00:00", 129600),
        ("2-03", 183600),
    ],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert cli_parse_duration(text) == seconds  # the CLI and the form read the same


@pytest.mark.parametrize(
    "text", ["0.5s", "0", "0s", "0:00", "", "2x", "h", "-1", "1.5", "unlimited", "2h 30m"]
)
def test_not_durations(text: str) -> None:
    """``0.5s`` used to be 0 seconds for the CLI (the daemon then refused the spec) and
    refused by the form: a time limit is a positive whole number of seconds, so both
    refuse it now, with the same words; a time under a second says so (``0`` is not no
    limit)."""
    message = f"{text!r} is not a duration (e.g. 2h, 90m, 1d, 1-12:00:00)"
    if text in ("0.5s", "0", "0s"):
        message = f"{text!r} is under a second: at least 1s, or leave it out for none"
    with pytest.raises(ValueError) as error:
        parse_duration(text)
    assert str(error.value) == message
    with pytest.raises(typer.BadParameter) as bad:
        cli_parse_duration(text)
    assert str(bad.value) == message


def test_unit_sums_and_slurm_times() -> None:
    assert unit_seconds("1h30m") == 5400.0
    assert unit_seconds("14d") == 14 * 86400.0
    assert unit_seconds("nothing") == 0
    assert slurm_seconds("UNLIMITED") is None
    assert slurm_seconds("0") is None  # Slurm: a time limit of zero means none
    with pytest.raises(ValueError):
        slurm_seconds("1h")


def test_the_parser_loads_nothing_heavy() -> None:
    code = (
        "import sys, runner.durations;"
        "print(sorted(m for m in sys.modules if m.startswith(('runner.', 'textual', 'typer'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['runner.durations']"


SECONDS = (0, 45, 59, 60, 61, 25 * 60, 3599, 3600, 3900, 4800, 5400, 86_400, 90_000)


def test_spoken_in_sentences() -> None:
    """Minutes round down ("a time limit of at most"), so an hour less a second is 59 min."""
    assert [spoken(s) for s in SECONDS] == [
        "0 s", "45 s", "59 s", "1 min", "1 min", "25 min", "59 min", "1 h", "1 h 5 min",
        "1 h 20 min", "1 h 30 min", "1 d", "1 d 1 h",
    ]  # fmt: skip


def test_a_countdown_never_says_less_than_is_left() -> None:
    assert [spoken(s, up=True) for s in SECONDS] == [
        "0 s", "45 s", "59 s", "1 min", "2 min", "25 min", "1 h", "1 h", "1 h 5 min",
        "1 h 20 min", "1 h 30 min", "1 d", "1 d 1 h",
    ]  # fmt: skip


def test_a_back_off_keeps_its_seconds() -> None:
    assert [spoken(s, exact=True) for s in (10, 39.6, 80, 160, 300)] == [
        "10 s", "40 s", "1 min 20 s", "2 min 40 s", "5 min",
    ]  # fmt: skip


def test_compact_in_messages_cells_and_ages() -> None:
    assert [compact(s) for s in SECONDS] == [
        "0s", "45s", "59s", "1m", "1m", "25m", "59m", "1h", "1h05m", "1h20m", "1h30m", "1d",
        "1d1h",
    ]  # fmt: skip
    cells = [compact(s, cell=True) for s in SECONDS]
    assert cells[8:11] == ["1h05", "1h20", "1h30"]
    assert [compact(s, units=1) for s in SECONDS] == [
        "0s", "45s", "59s", "1m", "1m", "25m", "59m", "1h", "1h", "1h", "1h", "1d", "1d",
    ]  # fmt: skip
    assert compact(None) == "-"
    assert compact(-5) == spoken(-5).replace(" ", "") == "0s"
