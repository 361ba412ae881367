"""One row per GPU: utilisation, memory, temperature, and who holds it."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import bar, gib
from astraeus_tui.widgets import css_beside
from runner.model import WorkerState
from runner.schema import Gpu, GpuList

UTIL_BAR = 6
MEM_BAR = 5
_HOLDER_STYLE: dict[str, str] = {WorkerState.STOPPING: "red", WorkerState.STARTING: "cyan"}


def holder(gpu: Gpu) -> Text:
    held = gpu.holder
    if gpu.drained:  # an admin keeps it out of every plan; its work finishes
        text = Text(f"{held.run} · " if held else "", style="green")
        return text.append(f"drained ({gpu.drained})", style="bold yellow")
    if held:
        state = held.state
        style = _HOLDER_STYLE.get(state or "", "green")
        text = Text(str(held.run), style=style)
        if state in (WorkerState.STOPPING, WorkerState.STARTING):
            text.append(f" ({state.lower()})", style="dim")
        return text
    if gpu.foreign_pids:
        pids = ",".join(str(p) for p in gpu.foreign_pids[:3])
        return Text(f"foreign process (pid {pids})", style="bold red")
    if gpu.held_for:
        return Text(f"held for {gpu.held_for}", style="yellow")
    return Text("free", style="dim green")


def gpu_row(gpu: Gpu) -> tuple[Text, ...]:
    """Index, utilisation, memory, temperature, holder; a simulated GPU has no readings."""
    index = Text(str(gpu.index) if gpu.mig is None else f"{gpu.index} {gpu.mig}", style="bold")
    if gpu.remote:  # a front for Slurm: the GPU is on a node, read by no one here
        util_text = Text("node", style="cyan")
        mem_text = Text("--", style="dim")
    elif gpu.simulated:
        util_text = Text("sim", style="magenta")
        mem_text = Text(gib(gpu.memory_total), style="dim")
    else:
        util = gpu.utilization
        used, total = gpu.memory_used, gpu.memory_total
        util_text = bar(None if util is None else util / 100, UTIL_BAR, "green")
        util_text.append(" --%" if util is None else f"{util:>3}%")
        mem_text = bar(used / total if used is not None and total else None, MEM_BAR, "blue")
        mem_text.append(f" {gib(used)}")
    temp = gpu.temperature
    temp_text = Text("--" if temp is None else f"{temp}°", style="red" if (temp or 0) >= 80 else "")
    return index, util_text, mem_text, temp_text, holder(gpu)


class GpuPanel(Widget):
    DEFAULT_CSS = css_beside(__file__)

    gpus: reactive[GpuList | None] = reactive(None)

    def watch_gpus(self, gpus: GpuList | None) -> None:
        rows = gpus.gpus if gpus is not None else []
        source = gpus.source if gpus is not None else ""
        kind = "simulated" if gpus is not None and gpus.simulated else "NVML"
        kind = "Slurm" if source.startswith("slurm") else kind
        self.border_title = f"GPUs · {len(rows)} {kind}" if gpus else "GPUs"

    def render(self) -> RenderableType:
        rows = self.gpus.gpus if self.gpus is not None else None
        if self.gpus is None:
            return Text("waiting for the daemon…", style="dim")
        if not rows:
            return Text("No GPUs: CPU-only runs still start.", style="dim")
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_row(*(Text(h, style="dim") for h in ("#", "util", "memory", "°C", "holder")))
        for gpu in rows:
            grid.add_row(*gpu_row(gpu))
        return grid
