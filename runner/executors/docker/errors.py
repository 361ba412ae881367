"""Docker's errors, each turned into a one-line ExecutorError for users."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NoReturn

from docker.errors import DockerException
from requests.exceptions import RequestException

from runner.executors.base import ExecutorError

DOCKER_ERRORS = (DockerException, RequestException)


def one_line(text: str) -> str:
    return " ".join(text.split())


def describe(err: BaseException) -> str:
    """One line saying what Docker answered."""
    explanation = getattr(err, "explanation", None)
    if isinstance(explanation, bytes):
        explanation = explanation.decode(errors="replace")
    return one_line(str(explanation or err)) or type(err).__name__


def raise_error(what: str, err: BaseException) -> NoReturn:
    raise ExecutorError(f"docker: {what}: {describe(err)}") from err


@contextlib.contextmanager
def docker_errors(what: str) -> Iterator[None]:
    """Turn any Docker or connection error into a one-line ExecutorError."""
    try:
        yield
    except DOCKER_ERRORS as err:
        raise_error(what, err)


def is_not_running(err: Any) -> bool:
    return getattr(err, "status_code", None) == 409 or "is not running" in describe(err)
