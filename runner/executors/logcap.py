"""A worker's log, bounded: at most ``log_limit`` bytes, and never below ``log_reserve`` free.

Both executors append a worker's output through :class:`CappedLog` (the process executor's
supervisor, the docker executor's log copy), so one member's output cannot fill the disk
that holds the state database:

- **log_limit** (per worker of an attempt). When the log would pass it, the oldest part is
  cut: the newest half (from a line start) is copied to a new file that opens with one line
  saying how much was cut in all, which then replaces the log (a rename: a reader holding
  the old file reads it whole). Without room for the copy, the log is emptied instead.
  ``[astraeus: 12.3 MiB of earlier output cut (12902400 bytes): log_limit is 64MiB]``.
- **log_reserve**. While less than this would stay free on the log's file system, output is
  dropped (the program is never blocked), with one line when dropping starts and one when
  it ends: ``[astraeus: output dropped from here: less than log_reserve (256MiB) is free on
  the log disk]`` … ``[astraeus: 3.1 MiB of output dropped: less than log_reserve (256MiB)
  was free on the log disk]``.

The cut line tells a reader following the log by position (``astra logs -f``) where it is:
byte ``p`` of a file whose first line says ``N bytes`` were cut is byte ``N + p - len(line)``
of everything the worker wrote (:func:`read_cut`). A limit or reserve of 0 means none.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20  # bytes copied at a time
LINE_SEARCH = 1 << 16  # how far a cut looks for a line start
_HEADER_MAX = 256
_CUT_RE = re.compile(rb"\[astraeus: [^\]\n]* of earlier output cut \((\d+) bytes\): [^\]\n]*\]\n")


def cut_line(cut: int, limit: int) -> bytes:
    """The first line of a log whose oldest ``cut`` bytes were cut."""
    return _note(f"{_mib(cut)} of earlier output cut ({cut} bytes): log_limit is {_size(limit)}")


def drop_line(reserve: int) -> bytes:
    return _note(
        f"output dropped from here: less than log_reserve ({_size(reserve)})"
        " is free on the log disk"
    )


def resume_line(dropped: int, reserve: int) -> bytes:
    return _note(
        f"{_mib(dropped)} of output dropped: less than log_reserve "
        f"({_size(reserve)}) was free on the log disk"
    )


def _note(text: str) -> bytes:
    """A line of the log capture's own in a worker's log."""
    return f"[astraeus: {text}]\n".encode()


def _size(n: int) -> str:
    from runner.model import format_size  # off the supervisor's start (runner.model is big)

    return format_size(n)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def read_cut(f: BinaryIO) -> tuple[int, int]:
    """(bytes cut before this file's content, length of the cut line): (0, 0) when uncut."""
    f.seek(0)
    match = _CUT_RE.match(f.read(_HEADER_MAX))
    return (int(match.group(1)), match.end()) if match else (0, 0)


class CappedLog:
    """Appends to ``path`` within ``limit`` and ``reserve``; created owned by ``owner``.

    Never raises on a write: output the disk refuses is lost, the program goes on.
    Opening may raise OSError.
    """

    def __init__(
        self, path: Path, limit: int = 0, reserve: int = 0, owner: tuple[int, int] | None = None
    ) -> None:
        self.path = path
        self.limit = max(limit, 4 * _HEADER_MAX) if limit else 0
        self.reserve = reserve
        self.owner = owner
        self._fd = self._open(path, os.O_CREAT)
        self._size = os.fstat(self._fd).st_size
        with open(self._fd, "rb", closefd=False) as f:
            self._cut, self._header = read_cut(f)
        self._dropped = 0
        self._dropping = False

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> None:
        """Writes go straight to the file: nothing to flush."""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self.reserve and self._free() - len(data) < self.reserve:
            if not self._dropping:
                self._dropping = True
                self._append(drop_line(self.reserve))
            self._dropped += len(data)
            return
        if self._dropping:
            self._dropping = False
            self._append(resume_line(self._dropped, self.reserve))
            self._dropped = 0
        if self.limit and self._size + len(data) > self.limit:
            self._cut_oldest(data)
        else:
            self._append(data)

    # ------------------------------------------------------------------ inside

    def _open(self, path: Path, flags: int) -> int:
        """Read-write (a cut reads the log back), appending, never through a symlink."""
        flags |= os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o640)
        if self.owner is not None:
            with contextlib.suppress(OSError):
                os.fchown(fd, *self.owner)
        return fd

    def _free(self) -> int:
        try:
            st = os.fstatvfs(self._fd)
        except OSError:
            return 1 << 62
        return st.f_bavail * st.f_frsize

    def _append(self, data: bytes) -> None:
        try:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError:  # a full disk, an I/O error: this output is lost, the program goes on
            with contextlib.suppress(OSError):
                self._size = os.fstat(self._fd).st_size
            return
        self._size += len(data)

    def _cut_oldest(self, data: bytes) -> None:
        """Keep the newest half of the log (``data`` included) behind a cut line."""
        keep = self.limit // 2 - _HEADER_MAX
        start = max(self._header, self._size + len(data) - keep)
        if start >= self._size:
            self._empty(data)
            return
        start = self._line_start(start)
        cut = self._cut + start - self._header
        header = cut_line(cut, self.limit)
        room = self._free() - (self._size - start) - len(header)
        if room >= self.reserve and self._copy_tail(start, header):
            self._cut, self._header = cut, len(header)
            self._append(data)
        else:
            self._empty(data)

    def _line_start(self, start: int) -> int:
        """The first line start at or after ``start`` (within LINE_SEARCH); else ``start``."""
        with contextlib.suppress(OSError):
            block = os.pread(self._fd, LINE_SEARCH, start - 1)
            at = block.find(b"\n")
            if at >= 0 and start + at < self._size:
                return start + at
        return start

    def _copy_tail(self, start: int, header: bytes) -> bool:
        """Write ``header`` + the log from ``start`` to a new file, then put it in place."""
        tmp = self.path.with_name(f".{self.path.name}.cut")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        try:
            fd = self._open(tmp, os.O_CREAT | os.O_EXCL)
        except OSError:
            return False
        try:
            _write_all(fd, header)
            at = start
            while at < self._size and (block := os.pread(self._fd, CHUNK, at)):
                _write_all(fd, block)
                at += len(block)
            os.rename(tmp, self.path)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        os.close(self._fd)
        self._fd = fd
        self._size = os.fstat(fd).st_size
        return True

    def _empty(self, data: bytes) -> None:
        """No room to copy the newest half (or ``data`` alone is more): keep only ``data``'s end."""
        kept = data[-(self.limit // 2 - _HEADER_MAX) :]
        cut = self._cut + self._size - self._header + len(data) - len(kept)
        header = cut_line(cut, self.limit)
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            return
        self._size, self._cut, self._header = 0, cut, len(header)
        self._append(header + kept)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def log_attempt(name: str) -> tuple[int, int] | None:
    """The attempt and worker of a log's file name (``<attempt>-<worker>.log``); None for
    any other name."""
    head, sep, rest = name.removesuffix(".log").partition("-")
    if name.endswith(".log") and sep and head.isdigit() and rest.isdigit():
        return int(head), int(rest)
    return None


def worker_logs(folder: Path) -> list[Path]:
    """The logs in a run's folder (``<attempt>-<worker>.log``), by attempt, then worker."""

    def key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) if x.isdigit() else 0 for x in p.stem.split("-"))

    return sorted(folder.glob("*.log"), key=key) if folder.is_dir() else []
