"""`astra ls` without loading typer: people run it often and want it instant.

Only the plain forms are handled here (the same options as the typer command);
anything else (``--help``, a typo) falls through to the full CLI.
"""

from __future__ import annotations

import argparse
import sys


def fast_ls(argv: list[str]) -> int | None:
    """Run `ls` if ``argv`` is a plain `ls` call; None to let typer handle it."""
    if not argv or argv[0] != "ls" or any(a in ("--help", "-h") for a in argv):
        return None
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("--all", "-a", dest="all_runs", action="store_true")
    parser.add_argument("--workspace")
    parser.add_argument("--state")
    parser.add_argument("--json", dest="as_json", action="store_true")
    parser.add_argument("--wide", "-w", action="store_true")
    try:
        args, rest = parser.parse_known_args(argv[1:])
    except argparse.ArgumentError:
        return None
    if rest:
        return None
    from astraeus_tui.cli.tables import show_runs
    from astraeus_tui.client import ApiError, Client

    try:
        runs = Client().runs(all=args.all_runs, workspace=args.workspace, state=args.state)
    except ApiError as e:
        from astraeus_tui.text import shown

        print(shown(e), file=sys.stderr)
        return 1
    show_runs(runs, args.as_json, args.wide)
    return 0
