"""bench/compare.py's arguments and table (the measurements themselves are run by hand)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

PATH = Path(__file__).resolve().parents[2] / "bench" / "compare.py"


def _compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_arguments_default_and_override() -> None:
    compare = _compare()
    args = compare.parse_args([])
    assert (args.waiting, args.big, args.repeat, args.no_gflow) == (2000, False, 7, False)
    args = compare.parse_args(["--waiting", "50", "--big", "--no-slurm", "--repeat", "3"])
    assert (args.waiting, args.big, args.no_slurm, args.repeat) == (50, True, True, 3)


def test_table_has_a_ratio_to_each_peer_and_dashes_for_the_unmeasured() -> None:
    compare = _compare()
    args = compare.parse_args(["--waiting", "2000"])
    results = {"Astraeus": {"ls": 100.0, "help_ms": 8.0, "first_line_ms": None},
               "gflow": {"ls": 50.0, "help_ms": 4.0, "first_line_ms": 99.0},
               "Slurm": {"ls": 25.0}}  # fmt: skip
    lines = compare.table(results, args).splitlines()
    assert lines[0] == "| measure | Astraeus | gflow | Slurm | Astraeus/gflow | Astraeus/Slurm |"
    assert "| ls with 2,000 waiting (ms) | 100 | 50 | 25 | 2.00 | 4.00 |" in lines
    assert "| --help (ms) | 8.0 | 4.0 | - | 2.00 | - |" in lines
    assert "| idle submit -> program's first line (ms) | - | 99 | - | - | - |" in lines
    assert not any("10,000" in line for line in lines)  # no --big: no row for it


def test_bulk_rows_set_astraeus_bulk_against_each_peers_serial_rate() -> None:
    compare = _compare()
    args = compare.parse_args(["--bulk", "500"])
    results = {"Astraeus": {"submits_per_s": 20.0, "bulk_per_s": 2000.0},
               "gflow": {"submits_per_s": 50.0}, "Slurm": {"submits_per_s": 200.0}}  # fmt: skip
    lines = compare.table(results, args).splitlines()
    assert (
        "| bulk submit, NDJSON of 500 (/s; peers: serial) | 2,000 | 50 | 200 | 40.00 | 10.00 |"
        in lines
    )
    assert "| bulk submit, 500 spec files (/s; peers: serial) | - | 50 | 200 | - | - |" in lines
