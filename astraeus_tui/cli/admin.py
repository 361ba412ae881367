"""`astra admin`: change a workspace's quota, maximum priority or weight (admins only)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from astraeus_tui.cli.common import call, echo

app = typer.Typer(help="Change workspaces (admins). The daemon writes its config and reloads.",
                  no_args_is_help=True)  # fmt: skip

Workspace = Annotated[str, typer.Argument(help="The workspace.")]


def _change(workspace: str, change: dict[str, Any]) -> None:
    rows = call(lambda c: c.change_workspace(workspace, change))
    row = next(r for r in rows if r["name"] == workspace)
    echo(
        f"{workspace}: quota {row['quota'] or 'none'}, max priority {row['max_priority']}, "
        f"weight {row['weight']:g}"
    )


@app.command()
def quota(
    workspace: Workspace,
    gpus: Annotated[int | None, typer.Option(help="GPUs at once.")] = None,
    cpus: Annotated[float | None, typer.Option(help="CPU cores at once.")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory at once, e.g. 512GiB.")] = None,
    workers: Annotated[int | None, typer.Option(help="Workers at once.")] = None,
    clear: Annotated[bool, typer.Option(help="Remove the whole quota.")] = False,
) -> None:
    """Set the workspace's quota (only the limits given change)."""
    values = {"gpus": gpus, "cpu_cores": cpus, "memory": memory, "workers": workers}
    if clear:
        change = dict.fromkeys(values)
    else:
        change = {k: v for k, v in values.items() if v is not None}
        if not change:
            raise typer.BadParameter("give at least one of --gpus, --cpus, --memory, --workers")
    _change(workspace, {"quota": change})


@app.command("max-priority", context_settings={"ignore_unknown_options": True})
def max_priority(workspace: Workspace, value: Annotated[int, typer.Argument()]) -> None:
    """Set the highest priority the workspace's runs may ask for."""
    _change(workspace, {"max_priority": value})


@app.command()
def weight(workspace: Workspace, value: Annotated[float, typer.Argument()]) -> None:
    """Set the workspace's fair-share weight."""
    _change(workspace, {"weight": value})
