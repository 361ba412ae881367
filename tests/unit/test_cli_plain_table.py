"""`astra ls`'s own table (cli/plain.py) prints the very bytes Rich's table printed."""

from __future__ import annotations

import random

import msgspec
import pytest

from astraeus_tui.cli import plain
from astraeus_tui.cli.tables import print_runs, print_runs_rich
from runner.schema import Run

WORDS = ["Waits", "for", "2", "GPUs", "behind", "big-run", "(head", "of", "the", "queue)", "…",
         "→", "quota:", "namespace", "[bold]x[/bold]", "\x1b[2J", "a" * 40]  # fmt: skip


def _run(rng: random.Random, i: int) -> Run:
    state = rng.choice(["Queued", "Queued", "Running", "Failed", "Succeeded"])
    idle = {"idle_since": "2026-01-01T00:00:00Z"} if state == "Running" and i % 2 else {}
    return msgspec.convert(idle | {
        "id": str(i),
        "name": rng.choice(["r", "train-resnet-50", "n" * rng.randint(1, 40)]) + str(i),
        "workspace": rng.choice(["default", "vision", "a-very-long-workspace"]),
        "priority": rng.randint(-1000, 1000), "state": state,
        "gpus": rng.sample(range(8), rng.randint(0, 3)) if state == "Running" else [],
        "gpus_requested": rng.randint(0, 8), "head": i == 0 and state == "Queued",
        "position": rng.choice([None, i + 1]),
        "submitted_at": rng.choice([None, "2026-01-01T00:00:00Z", "2099-01-01T00:00:00Z"]),
        "starts_by": rng.choice([None, "2026-01-01T10:00:30Z", "2099-03-04T05:06:07Z"]),
        "reason": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30))) or None,
    }, Run)  # fmt: skip


@pytest.mark.parametrize("columns", ["200", "80", "60", "120"])
@pytest.mark.parametrize("seed", range(12))
def test_same_bytes_as_rich(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                            columns: str, seed: int) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    rng = random.Random(seed)
    runs = [_run(rng, i) for i in range(rng.randint(1, 30))]
    for wide in (False, True):
        rows = [plain.run_cells(r, 0) for r in runs]
        laid_out = plain.layout(rows, wide)
        print_runs(runs, wide)
        ours = capsys.readouterr().out
        print_runs_rich(runs, wide)
        assert ours == capsys.readouterr().out
        if not wide and int(columns) >= 120:
            assert laid_out is not None  # laid out here, not handed to Rich


def test_what_it_does_not_lay_out_goes_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    row = ["", "r", "default", "0", "Queued", "1", "1s", "?", "Waits"]
    assert plain.layout([row], False) is not None
    assert plain.layout([[*row[:-1], "名前"]], False) is None  # two cells a character
    assert plain.layout([[*row[:-1], "e\u0301"]], False) is None  # a combining accent
    assert plain.layout([[*row[:-1], "x " * 60]], True) is None  # wide: it would wrap
    monkeypatch.setenv("COLUMNS", "30")
    assert plain.layout([row], False) is None  # narrower than the fixed columns


def test_bold_header_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    row = ["", "r", "default", "0", "Queued", "1", "1s", "?", "Waits"]
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    lines = plain.layout([row], False)
    assert lines is not None and lines[0].startswith("\x1b[1m#\x1b[0m")
    monkeypatch.setenv("NO_COLOR", "1")
    lines = plain.layout([row], False)
    assert lines is not None and "\x1b" not in lines[0]


@pytest.mark.parametrize("seed", range(8))
def test_the_columns_are_the_rows_cells_transposed(seed: int) -> None:
    """``Cells.columns`` (what `ls` lays out) says of each run what ``Cells.of`` says, for
    the Structs of the typer path and the plain JSON rows of the fast one."""
    from astraeus_tui.cli.fast.out import Row

    rng = random.Random(seed)
    runs = [_run(rng, i) for i in range(rng.randint(0, 40))]
    rows = [Row(msgspec.to_builtins(r)) for r in runs]
    for now in (0.0, 1767225600.0 + rng.randint(0, 10**6)):
        want = [list(c) for c in zip(*[plain.Cells(now).of(r) for r in runs], strict=True)]
        for given in (runs, rows):
            got = plain.Cells(now).columns(given)  # type: ignore[arg-type]
            assert (got if runs else []) == (want if runs else [])


def test_a_wide_table_grows_past_a_narrow_terminal_rather_than_cut_what_was_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ls --wide` at 80 columns: the names and the starts with their 90 % and the limits'
    whole, the reason given WIDE_REASON at the least; lines longer than the terminal (it
    wraps them). Without --wide the table keeps to the terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    run = msgspec.convert({
        "id": "b", "name": "finetune-llama-13b-lr3e-4-warmup", "workspace": "vision-and-audio",
        "priority": 5,
        "state": "Queued", "gpus_requested": 4, "head": True, "position": 1,
        "starts_by": "2099-01-02T04:39:00Z", "likely_start": "2099-01-02T02:38:00Z",
        "likely_start_90": "2099-01-02T03:39:00Z", "learned_from": 12,
        "reason": "Next to run: needs 4 GPUs, 2 are free; starts by 04:39 if no more urgent"
                  " run is submitted",
    }, Run)  # fmt: skip
    start = "~01-02 02:38 ≤01-02 03:39 (90%) limits 01-02 04:39"
    for printer in (print_runs, print_runs_rich):
        printer([run], True)
        lines = capsys.readouterr().out.splitlines()
        assert "finetune-llama-13b-lr3e-4-warmup  vision-and-audio" in lines[1]  # not cut
        assert start in lines[1]
        assert max(map(len, lines)) > 80
        assert lines[1].index(start) + len(start) + 2 + plain.WIDE_REASON <= max(map(len, lines))
    print_runs([run], False)
    assert max(map(len, capsys.readouterr().out.splitlines())) <= 80


def test_gpus_say_the_gpus_held_else_how_many_are_asked_and_a_dash_for_none() -> None:
    """A CPU-only run's GPUS is ``-``: a ``0`` reads as GPU 0, which another run holds."""
    assert plain.gpus_cell([0, 3], 2) == "0,3"
    assert plain.gpus_cell([0], 1) == "0"
    assert plain.gpus_cell([], 2) == "2"
    assert plain.gpus_cell([], 0) == "-"
    assert plain.gpus_cell(None, 0) == "-"
