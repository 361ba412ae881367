"""A command run inside a live worker (``astra exec``): what executors hand back, and
what the API bridges to a WebSocket.

A :class:`Session` is the command's standard streams and its exit. Executors make
them (:meth:`runner.executors.base.Executor.enter`): the process executor runs the
command as the worker's user, with the worker's environment, in the worker's mount
namespace (:mod:`runner.executors.enter`); Docker runs it with ``docker exec``.
Every call but :meth:`Session.read` and :meth:`Session.wait` is quick; those two
block, so the API calls them from a thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

STDIN, STDOUT, STDERR = 0, 1, 2  # the channels of a session's frames
MAX_ARGV = 1024  # arguments an exec may give
MAX_ARGV_CHARS = 65536  # and their characters together
BACKLOG = 64 * 1024  # bytes of an interactive worker's recent output a new attach gets first


@dataclass(frozen=True, slots=True)
class EnterRequest:
    """What the caller asked to run: ``argv``, with a terminal of ``rows`` x ``cols``."""

    argv: tuple[str, ...]
    tty: bool = False
    rows: int = 24
    cols: int = 80


class Session(Protocol):
    """A command running inside a worker."""

    def read(self) -> tuple[int, bytes]:
        """The next output: (STDOUT or STDERR, bytes); (STDOUT, b"") once all output ended.
        With a terminal every output is STDOUT."""
        ...

    def write(self, data: bytes) -> None:
        """Give ``data`` to the command's standard input (or its terminal)."""
        ...

    def close_stdin(self) -> None:
        """The caller's input ended (no effect on a terminal: it sends ^D itself)."""
        ...

    def resize(self, rows: int, cols: int) -> None: ...

    def wait(self) -> int:
        """The command's exit code (128 + N when a signal N ended it); blocks."""
        ...

    def kill(self) -> None:
        """End the command and everything it started, now; a gone command is fine."""
        ...
