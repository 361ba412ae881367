"""`hold`, `release`, `requeue` and `delete` of runs, shared by the fast path and the typer
twins.

One line a run, ``NAME: OUTCOME`` (``held``, ``already held``, ``released``, ``not held``,
``requeuing``, ``already queued``, ``cancelled``, ``stopping``, ``deleted``); a refusal is its
one line on stderr and the next run is still asked, as ``scancel`` goes on past a job it may
not cancel; the exit code is 1 when any run was refused.
"""

from __future__ import annotations

from astraeus_tui.cli.fast.args import parse
from astraeus_tui.cli.fast.out import echo, finish
from astraeus_tui.wire import ApiError, quoted, request

# each command's request of one run: its method, and what follows /v1/runs/{name}
ASKS = {"hold": ("POST", "/hold"), "release": ("POST", "/release"),
        "requeue": ("POST", "/requeue"), "delete": ("DELETE", "")}  # fmt: skip


def control_runs(action: str, names: list[str]) -> int:
    """Ask the daemon to ``action`` each run in turn; 1 if any was refused."""
    method, tail = ASKS[action]
    code = 0
    for name in names:
        try:
            outcome = request(method, f"/v1/runs/{quoted(name)}{tail}")["outcome"]
        except ApiError as e:
            echo(str(e), err=True)
            code = 1
            continue
        echo(f"{name}: {outcome}")
    return code


def fast_control(action: str, argv: list[str]) -> int | None:
    """``ACTION RUN...``, nothing else (typer takes ``--help`` and every other shape)."""
    parsed = parse(argv, {})
    if parsed is None or parsed.rest is not None or not parsed.positional:
        return None
    names = parsed.positional
    return finish(lambda: control_runs(action, names))


def fast_hold(argv: list[str]) -> int | None:
    return fast_control("hold", argv)


def fast_release(argv: list[str]) -> int | None:
    return fast_control("release", argv)


def fast_requeue(argv: list[str]) -> int | None:
    return fast_control("requeue", argv)


def fast_delete(argv: list[str]) -> int | None:
    return fast_control("delete", argv)
