"""`astra serve` without typer: the daemon's process loads only the daemon.

The daemon lives as long as the machine does: the CLI's stack (typer, click, rich,
pydantic) would stay in its memory for nothing. Any argument (``--help``) goes to typer.
"""

from __future__ import annotations


def fast_serve(argv: list[str]) -> int | None:
    """Run the daemon in the foreground until signalled; None to let typer handle ``argv``."""
    if argv:
        return None
    from runner.config.files import default_home
    from runner.daemon.serve import serve

    return serve(default_home())
