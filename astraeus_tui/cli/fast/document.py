"""The run documents `astra run` and `astra submit` send, built as cli/runs.py builds them.

None means "not a form handled here": typer then parses the call, and says what is
wrong with it in its own words (a bad ``--env``, a duration only Slurm's forms
read, a sweep).
"""

from __future__ import annotations

import os

from astraeus_tui.cli.fast.args import Parsed, values
from astraeus_tui.cli.fast.options import RUN

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def run_document(p: Parsed) -> dict[str, Any] | None:
    """The document cli/runs.py's ``run`` sends, from the same values (cli/fast/options.py's
    RUN converts them: ``--gpus`` an int, the image from ASTRAEUS_IMAGE, ...)."""
    from runner.runspec.build import FieldError

    if (given := values(p, RUN)) is None:
        return None
    try:
        return document_of(p.rest or [], given, _seconds)
    except (FieldError, ValueError):
        return None  # typer's parser says what is wrong, in its words


def document_of(command: list[str], values: Mapping[str, Any],
                seconds: Callable[[str], int]) -> dict[str, Any]:  # fmt: skip
    """`astra run`'s document (runner.runspec.build) from its options by destination
    (cli/fast/options.py's RUN), converted (the image and the numbers always there, the
    others where given); ``seconds`` reads ``--time-limit``. Both the fast path and typer's
    ``run`` make it here; FieldError says what is wrong."""
    from runner.runspec.build import (
        begin_time,
        default_name,
        drive_ref,
        env_vars,
        event_names,  # --notify-on
        exported,
        folder_given,
        here,
    )
    from runner.runspec.build import run_document as build

    v = values.get
    carried, named = exported(v("export"), os.environ)
    limit, begin, chdir = v("time_limit"), v("begin"), v("chdir")
    return build(
        v("name") or default_name(command[0]), command, image=values["image"],
        gpus=values["gpus"], cpus=values["cpus"], memory=v("memory"),
        env={**named, **env_vars(v("env") or [])}, drives=[drive_ref(d) for d in v("drive") or []],
        time_limit_seconds=None if limit is None else seconds(limit),
        priority=values["priority"], workspace=v("workspace"), workers=values["workers"],
        restart_limit=v("restarts"), after=v("after") or (),
        interactive=bool(v("interactive") or v("tty")),
        hold=bool(v("hold")), begin_at=None if begin is None else begin_time(begin),
        notify=v("notify") or (), notify_on=event_names(v("notify_on")), gpu_memory=v("gpu_mem"),
        working_dir=None if chdir is None else folder_given(chdir), submit_dir=here(),
        submit_env=carried,
    )  # fmt: skip


def _seconds(limit: str) -> int:
    from runner.durations import parse_duration  # only when a limit is given: re loads then

    return parse_duration(limit)


def is_plain_spec(file: str, text: str | None) -> bool:
    """True when the file surely has no ``spec.sweep`` (typer's submit makes sweeps)."""
    from runner.runspec.documents import spec_file_document
    from runner.runspec.parse import SpecError

    try:
        document = spec_file_document(file, text)
    except SpecError:
        return False  # typer's submit decides whether the error is about a sweep
    spec = document.get("spec") if isinstance(document, dict) else None
    return not (isinstance(spec, dict) and "sweep" in spec)


def spec_document(file: str, text: str | None) -> dict[str, Any]:
    """cli/common.py's ``spec_document``: the daemon's own checks, its own messages."""
    from astraeus_tui.cli.fast.out import Failed
    from runner.runspec.parse import SpecError

    try:
        return checked_document(file, text)
    except SpecError as e:
        raise Failed(f"422 INVALID_SPEC: {e}") from None


def checked_document(file: str, text: str | None) -> dict[str, Any]:
    """The spec in ``file`` (or ``text``) as its run document; SpecError as the daemon says it."""
    from runner.runspec.build import with_submit_dir
    from runner.runspec.documents import load_spec_file, load_spec_text
    from runner.runspec.parse import spec_to_dict
    from runner.runspec.printable import check_spec

    spec = load_spec_text(text) if text is not None else load_spec_file(file, os.environ)
    check_spec(spec)
    result: dict[str, Any] = spec_to_dict(spec)
    with_submit_dir(result)  # the process executor starts it here
    return result
