"""`astra admin drain` / `astra admin resume`: start nothing new on the machine, or keep
some GPUs out of every plan, while running work finishes (admins only)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from astraeus_tui.cli.common import JsonOption, call, echo
from astraeus_tui.cli.tables import print_json

GpusOption = Annotated[
    str | None, typer.Option("--gpus", help="Only these GPUs, e.g. 3,5 (default: the machine).")
]


def gpu_list(text: str | None) -> list[int] | None:
    """``"3,5"`` -> ``[3, 5]``; None: the whole machine."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: GPU indices separated by commas, e.g. 3,5") from None


def drain_lines(drain: dict[str, Any]) -> list[str]:
    """What is drained, one line each; ``Not draining`` when nothing is."""
    lines = []
    if drain.get("machine"):
        m = drain["machine"]
        lines.append(f"Machine draining ({m['reason']}): drained by {m['by']} at {m['at']}")
    for g in drain.get("gpus") or []:
        lines.append(f"GPU {g['index']} drained ({g['reason']}) by {g['by']} at {g['at']}")
    return lines or ["Not draining"]


def drain(
    reason: Annotated[str, typer.Option("--reason", help="Why, shown to everyone.")],
    gpus: GpusOption = None,
    as_json: bool = JsonOption,
) -> None:
    """Start nothing new (running work finishes), or keep --gpus out of every plan."""
    result = call(lambda c: c.drain(reason, gpu_list(gpus)))
    if as_json:
        print_json(result)
        return
    for line in drain_lines(result):
        echo(line)


def resume(gpus: GpusOption = None, as_json: bool = JsonOption) -> None:
    """Start work again: on the whole machine and every GPU, or on --gpus only."""
    result = call(lambda c: c.resume(gpu_list(gpus)))
    if as_json:
        print_json(result)
        return
    for line in drain_lines(result):
        echo(line)


def register(app: typer.Typer) -> None:
    """Onto `astra admin`."""
    app.command("drain")(drain)
    app.command("resume")(resume)
