"""Every SQL statement lives in runner/store/: no other module of runner/ opens SQLite,
runs a statement or holds SQL text; a transaction outside the store is a typed Tx."""

from __future__ import annotations

import re
from pathlib import Path

from runner.store.tx import Tx

RUNNER = Path(__file__).resolve().parents[2] / "runner"
STORE = RUNNER / "store"
FORBIDDEN = re.compile(
    r"\.execute(many|script)?\(|\bsqlite3\b|\bSELECT\s+[\w*(]"
    r"|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
)


def sql_outside_store(root: Path) -> list[str]:
    """``path:line: text`` of each line under ``root`` but runner/store/ that uses SQL."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if STORE in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_no_sql_outside_the_store() -> None:
    assert sql_outside_store(RUNNER) == []


def test_the_check_finds_sql(tmp_path: Path) -> None:
    root = tmp_path / "runner"
    (root / "engine").mkdir(parents=True)
    (root / "engine" / "a.py").write_text(
        "import sqlite3\n"
        "ok = 1\n"
        'tx.execute("x")\n'
        'q = "UPDATE runs SET state = ?"\n'
        'r = "SELECT name FROM runs"\n'
        'd = "DELETE FROM events"\n'
        'i = "INSERT OR IGNORE INTO forgotten"\n'
    )
    lines = [f.split(":")[1] for f in sql_outside_store(root)]
    assert lines == ["1", "3", "4", "5", "6", "7"]


def test_a_transaction_has_no_public_way_to_run_sql() -> None:
    public = {n for n in dir(Tx) if not n.startswith("_")}
    assert public == set()
