"""A state.db that is not a sound Astraeus database is refused at start, never written."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.reasons import Reason, ReasonCode
from runner.store.db import RunRow, Store
from tests.faults.daemon import PY, write_config


def astraeus_db(path: Path) -> bytes:
    """A real state database with some runs, checkpointed: its bytes."""
    store = Store(path)
    for i in range(200):
        row = RunRow(
            name=f"run-{i}",
            workspace="default",
            owner="root",
            uid=0,
            gid=0,
            spec_text="{}",
            priority=0,
            state="Queued",
            reason=Reason("Waiting", code=ReasonCode.MESSAGE),
            submitted_at=1.0 + i,
            started_at=None,
            finished_at=None,
            exit_code=None,
            restarts=0,
            preemptions=0,
            attempts=0,
            preempted_by=None,
            stop_request=None,
            quota_noted=False,
        )
        store.runs.insert(row)
    store.close()  # the last connection: the WAL goes into the file
    data = path.read_bytes()
    path.unlink()
    assert len(data) > 8 * 4096
    return data


def random_bytes(path: Path) -> bytes:
    return os.urandom(64 * 1024)


def foreign_db(path: Path) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.executemany("INSERT INTO notes (text) VALUES (?)", [("x" * 100,)] * 100)
    conn.commit()
    conn.close()
    data = path.read_bytes()
    path.unlink()
    return data


def truncated_db(path: Path) -> bytes:
    data = astraeus_db(path)
    return data[: len(data) // 2]


def damaged_db(path: Path) -> bytes:
    data = bytearray(astraeus_db(path))
    data[3 * 4096 : 4 * 4096] = os.urandom(4096)  # one page of a table, overwritten
    return bytes(data)


CASES: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "random-bytes": (random_bytes, "is not an Astraeus state database (file is not a database)"),
    "foreign-sqlite": (foreign_db, "is not an Astraeus state database; refusing to touch it"),
    "truncated": (truncated_db, "is damaged (truncated or corrupted: "),
    "damaged-page": (damaged_db, "is damaged (truncated or corrupted: "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_state_db_is_refused_and_left_as_it_is(tmp_path: Path, case: str) -> None:
    make, expected = CASES[case]
    home = tmp_path / "home"
    write_config(home)
    db = home / "state.db"
    data = make(tmp_path / "scratch.db")
    db.write_bytes(data)
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_SOCKET": str(home / "s.sock")}
    result = subprocess.run(
        [PY, "-m", "astraeus_tui.cli.main", "serve"], env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {db} "), result.stderr
    assert expected in lines[0], lines[0]
    assert db.read_bytes() == data  # not a byte changed
    assert not (home / "s.sock").exists()
    assert not (home / "state.db-wal").exists() or (home / "state.db-wal").stat().st_size == 0
