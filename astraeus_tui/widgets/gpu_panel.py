"""One row per GPU: utilisation, memory, temperature, and who holds it.

Once the daemon has telemetry (``GET /v1/telemetry?history=5m``), the utilisation and
memory cells are sparklines of the last minutes on a fixed scale (utilisation 0–100 %,
memory 0–the GPU's total: astraeus_tui/widgets/levels.py) with the latest reading
beside them, simulated GPUs included; without it, bars of ``/v1/gpus``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color
from rich.console import Group, JustifyMethod, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import bar, gib
from astraeus_tui.widgets import css_beside
from astraeus_tui.widgets.levels import Levels
from runner.model import WorkerState
from runner.schema import Gpu, GpuList, Telemetry, TelemetryGpu

UTIL_BAR = 6
MEM_BAR = 5
SPARK_POINTS = 60  # samples a sparkline keeps, at most (5 minutes at the 5 s default)
UTIL_SPARK = UTIL_BAR  # cells: as wide as the bars they replace
MEM_SPARK = MEM_BAR
_HOLDER_STYLE: dict[str, str] = {WorkerState.STOPPING: "red", WorkerState.STARTING: "cyan"}


SHARE_LINES = 3  # a shared GPU's runs listed under its row, at most; then "+K more"


def shares(gpu: Gpu, room: int | None = None) -> Text:
    """A shared GPU's row: ``shared · 30G free`` (its runs are the lines under it); only
    ``30G free`` in under ``room`` cells: what is free is cut last."""
    free = Text(f"{gib(max(0, gpu.memory_total - sum(s.bytes for s in gpu.shares or ())))} free",
                style="cyan")  # fmt: skip
    if room is not None and room < len("shared · ") + len(free):
        return free
    return Text("shared · ", style="dim").append_text(free)


def share_lines(gpu: Gpu, most: int = SHARE_LINES) -> list[Text]:
    """One indented line per run sharing ``gpu`` (``  eval-a 20G``; another workspace's
    run as the daemon names it), at most ``most`` of them, then ``  +K more``."""
    if not gpu.shares or gpu.drained:
        return []
    runs = list(gpu.shares)
    shown = runs if len(runs) <= most else runs[: max(0, most - 1)]
    lines = [Text("  ").append(str(s.run), style="green").append(f" {gib(s.bytes)}")
             for s in shown]  # fmt: skip
    if len(shown) < len(runs):
        lines.append(Text(f"  +{len(runs) - len(shown)} more", style="dim"))
    return lines


def holder(gpu: Gpu) -> Text:
    held = gpu.holder
    if gpu.shares and not gpu.drained:  # shared by memory: each run's share
        return shares(gpu)
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


def _spark(values: Sequence[float], width: int, low: str, high: str, top: float) -> Levels:
    """The last readings on 0..``top``, not on their own min and max."""
    return Levels(list(values[-SPARK_POINTS:]), top=top, width=width, low=Color.parse(low),
                  high=Color.parse(high), summary=max)  # fmt: skip


def _beside(spark: Levels, width: int, label: str) -> Table:
    cell = Table.grid()
    cell.add_column(no_wrap=True, width=width)
    cell.add_column(no_wrap=True)
    cell.add_row(spark, Text(f" {label}"))  # as wide as a bar and its reading
    return cell


def trend_cells(t: TelemetryGpu) -> tuple[RenderableType, RenderableType] | None:
    """The utilisation and memory cells of a GPU with samples: each a sparkline of its
    last minutes and its latest reading; None without samples."""
    history = t.history if isinstance(t.history, list) else []
    utils = [float(s.utilization) for s in history if s.utilization is not None]
    memory = [float(s.memory_used) for s in history if s.memory_used is not None]
    if not utils and not memory:
        return None
    util = "--%" if t.utilization is None else f"{t.utilization:>3}%"
    used = gib(t.memory_used)
    total = t.memory_total or max(memory, default=0.0)  # 0..the GPU's memory
    return (
        _beside(_spark(utils, UTIL_SPARK, "#2e6b2e", "#5fff5f", 100.0), UTIL_SPARK, util),
        _beside(_spark(memory, MEM_SPARK, "#29477a", "#6fa8ff", total), MEM_SPARK, used),
    )


class GpuPanel(Widget):
    DEFAULT_CSS = css_beside(__file__)

    gpus: reactive[GpuList | None] = reactive(None)
    telemetry: reactive[Telemetry | None] = reactive(None)

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
        header = tuple(Text(h, style="dim") for h in ("#", "util", "memory", "°C", "holder"))
        sampled = {t.index: t for t in self.telemetry.gpus} if self.telemetry else {}
        table: list[tuple[Gpu | None, list[RenderableType]]] = [(None, list(header))]
        for gpu in rows:
            cells: list[RenderableType] = list(gpu_row(gpu))
            t = sampled.get(gpu.index)
            trend = None if t is None or gpu.remote else trend_cells(t)
            if trend is not None and t is not None:
                cells[1], cells[2] = trend
                if gpu.temperature is None and t.temperature is not None:
                    cells[3] = Text(f"{t.temperature}°", style="red" if t.temperature >= 80 else "")
            table.append((gpu, cells))
        if not any(share_lines(gpu) for gpu, _ in table if gpu is not None):
            return self._grid([cells for _, cells in table])  # no shared GPU: one grid
        # a shared GPU's runs go on lines of their own under its row, as wide as the panel
        # (the holder column is narrow beside the sparklines): one grid a GPU, each with the
        # same column widths
        console = self.app.console
        options = console.options.update_width(max(1, self.content_region.width or 80))
        widths = [max(Measurement.get(console, options, cells[c]).maximum for _, cells in table)
                  for c in range(4)]  # fmt: skip
        room = options.max_width - sum(widths) - 4  # the holder column's, between paddings
        parts: list[RenderableType] = []
        for each, cells in table:
            if each is not None and each.shares and not each.drained:
                cells[4] = shares(each, room)
            parts.append(self._grid([cells], widths))
            if each is not None:
                indent = " " * (widths[0] + 1)  # under the utilisation: the panel's width
                for line in share_lines(each):
                    parts.append(Text(indent, no_wrap=True, overflow="ellipsis").append(line))
        return Group(*parts)

    @staticmethod
    def _grid(rows: list[list[RenderableType]], widths: list[int] | None = None) -> Table:
        grid = Table.grid(expand=True, padding=(0, 1))
        sides: tuple[JustifyMethod, ...] = ("right", "left", "left", "right")
        for c, justify in enumerate(sides):
            width = None if widths is None else widths[c]
            grid.add_column(justify=justify, no_wrap=True, width=width)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        for cells in rows:
            grid.add_row(*cells)
        return grid
