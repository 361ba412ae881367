"""An error said on one line, wherever one is passed on: a worker's start refused, a
supervisor's failure, a trace's bad row, a GPU library that would not load, a dashboard
action that did not finish. Nothing at import: the supervisor of every process worker
imports it."""

from __future__ import annotations


def one_line(error: BaseException) -> str:
    """The error's words with every run of whitespace (newlines too) one space; its type's
    name when it has no words."""
    return " ".join(str(error).split()) or type(error).__name__
