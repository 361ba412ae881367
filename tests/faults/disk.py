"""A file system filled to its last byte."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fill(path: Path) -> None:
    """Write ``path`` until the file system has no byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)
