"""`astra ls` without typer: the plain forms, the same options as the typer command."""

from __future__ import annotations

import sys

from astraeus_tui.cli.fast.args import parse, text
from astraeus_tui.cli.fast.options import LS, spec

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import Any

# what the table shows of a run (astraeus_tui/cli/plain.py, tables.py): a lighter answer
TABLE_FIELDS = ("name,workspace,priority,state,reason,gpus,gpus_requested,submitted_at,starts_by,"
                "likely_start,likely_start_90,head,position,idle_since,restart_at,"
                "held")  # fmt: skip


def fast_ls(argv: list[str]) -> int | None:
    """Run `ls` if ``argv`` (after ``ls``) is a plain call; None to let typer handle it."""
    parsed = parse(argv, spec(LS))
    if parsed is None or parsed.positional or parsed.rest is not None:
        return None
    from astraeus_tui.wire import ApiError, request, target

    as_json = bool(parsed.options.get("as_json"))
    query = {"all": bool(parsed.options.get("all_runs")), "workspace": text(parsed, "workspace"),
             "state": text(parsed, "state")}  # fmt: skip
    try:
        if as_json:  # whole objects, printed from the Structs as the typer command does
            from astraeus_tui.client import Client

            runs: list[Any] = Client().runs(**query)
        else:
            from astraeus_tui.cli.fast.out import Row

            answer = request("GET", target("/v1/runs", {**query, "fields": TABLE_FIELDS}))
            runs = [Row(r) for r in answer["runs"]]
    except ApiError as e:
        from astraeus_tui.text import shown

        print(shown(e), file=sys.stderr)
        return 1
    from astraeus_tui.cli.tables import show_runs

    show_runs(runs, as_json, bool(parsed.options.get("wide")))
    return 0
