"""A run's logs read for a follower: the last N lines across attempts, in bounded chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.service import logs
from runner.service.logs import last_bytes, read_new, tail_start


def read_all(paths: list[Path], offsets: dict[Path, int]) -> bytes:
    out = b""
    while chunk := read_new(paths, offsets):
        out += chunk
    return out


@pytest.mark.parametrize("chunk", [3, 7, 1 << 20])
@pytest.mark.parametrize("lines", [1, 2, 5, 9, 50])
def test_tail_across_files_and_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, lines: int
) -> None:
    monkeypatch.setattr(logs, "LOG_CHUNK", chunk)
    first, second = tmp_path / "1-0.log", tmp_path / "2-0.log"
    first.write_bytes(b"".join(f"a{i}\n".encode() for i in range(5)))
    second.write_bytes(b"".join(f"b{i}\n".encode() for i in range(4)))
    every = (first.read_bytes() + second.read_bytes()).splitlines(keepends=True)
    got = read_all([first, second], tail_start([first, second], lines))
    assert got == b"".join(every[-lines:])


def test_reading_resumes_where_it_stopped(tmp_path: Path) -> None:
    log = tmp_path / "1-0.log"
    log.write_bytes(b"one\n")
    offsets: dict[Path, int] = {}
    assert read_all([log], offsets) == b"one\n"
    with log.open("ab") as f:
        f.write(b"two\n")
    assert read_all([log], offsets) == b"two\n"


def test_an_ended_terminal_shows_the_last_bytes_of_its_newest_log(tmp_path: Path) -> None:
    first, second = tmp_path / "1-0.log", tmp_path / "2-0.log"
    first.write_bytes(b"old attempt\n")
    second.write_bytes(b"0123456789")
    assert last_bytes([first, second], 4) == b"6789"
    assert last_bytes([first, second], 64) == b"0123456789"
    assert last_bytes([], 4) == b""
