"""The top line: which machine, which executor, whether the daemon answers, the clock."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.when import utc_clock
from astraeus_tui.widgets import css_beside


def drain_text(drain: dict[str, Any] | None) -> str:
    """``DRAINING (kernel upgrade)``, ``GPUs 3, 5 drained (fan)``, both, or "" when
    nothing is drained (``GET /v1/status``'s ``drain``)."""
    if not drain:
        return ""
    parts = []
    machine = drain.get("machine")
    if machine:
        parts.append(f"DRAINING ({machine.get('reason', '')})")
    gpus = drain.get("gpus") or []
    if gpus:
        indices = ", ".join(str(g.get("index")) for g in gpus)
        reasons = ", ".join(dict.fromkeys(str(g.get("reason", "")) for g in gpus))
        parts.append(f"GPU{'s' if len(gpus) > 1 else ''} {indices} drained ({reasons})")
    return " · ".join(parts)


class HeaderBar(Widget):
    DEFAULT_CSS = css_beside(__file__)

    status: reactive[dict[str, Any] | None] = reactive(None)
    gpus: reactive[int | None] = reactive(None)
    connected: reactive[bool | None] = reactive(None)
    error: reactive[str] = reactive("")
    now: reactive[float] = reactive(0.0)

    def machine(self) -> Text:
        status = self.status
        text = Text(no_wrap=True, overflow="ellipsis")
        if status is None:
            return text.append("waiting for the daemon…", style="dim")
        count = "?" if self.gpus is None else str(self.gpus)
        gpus = "GPU" if self.gpus == 1 else "GPUs"
        if status.get("executor") == "slurm":
            text.append(f"Slurm cluster · {count} {gpus}", style="bold cyan")
        elif status.get("simulated"):
            text.append(f"{count} simulated {gpus}", style="bold magenta")
        else:
            text.append(f"{count} {gpus}", style="bold")
        draining = drain_text(status.get("drain"))  # before the rest: it is what matters
        if draining:
            text.append(" · ").append(draining, style="bold yellow")
        text.append(f" · {status.get('executor', '?')} executor", style="")
        if status.get("not_enforced"):  # no cgroups: asks are not limits here
            text.append(" · asks not enforced", style="bold yellow")
        grace = status.get("stop_grace_seconds")
        if grace is not None:
            text.append(f" · stop grace {grace:g} s", style="dim")
        return text

    def daemon(self) -> Text:
        if self.connected is None:
            return Text("○ connecting", style="dim")
        if self.connected:
            errors = (self.status or {}).get("errors") or []
            if errors:
                return Text(f"● daemon up, {len(errors)} error(s)", style="yellow")
            return Text("● daemon up", style="green")
        return Text("● no daemon", style="bold red")

    def render(self) -> RenderableType:
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        clock = Text(f"{utc_clock(self.now)} UTC", style="bold")
        grid.add_row(
            Text(" ◆ Astraeus ", style="bold reverse"),
            self.machine(),
            Text.assemble(self.daemon(), "  ", clock),
        )
        return grid
