"""The one error of the Slurm layer."""

from __future__ import annotations


class SlurmError(RuntimeError):
    """Slurm refused, failed or did not answer; ``str()`` is one line that says why.

    ``code`` is the exit status of the command that failed (None when it did not run
    or did not finish).
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        self.message = " ".join(message.split())
        self.code = code
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message
