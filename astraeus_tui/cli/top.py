"""`astra top`: the GPUs and the running runs, live (like nvitop, for runs).

Each GPU's utilisation and memory as bars, its temperature and power; then every running
run with its GPUs, their utilisation and memory, and the CPU and memory of its processes
(``GET /v1/telemetry``). Refreshed every 2 s; q or Ctrl-C quits. ``--once`` prints one
screen and exits: plain text, no colour when not a terminal or when NO_COLOR is set.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterator

import typer

from astraeus_tui.cli.common import call, console
from astraeus_tui.client import ApiError, Client
from runner.schema import Telemetry, TelemetryGpu, TelemetryRun

REFRESH = 2.0  # seconds between two screens
BAR = 14  # cells of a bar


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024**3:.1f}"


def _bar(fraction: float | None, colour: bool) -> str:
    """``[####......]`` in plain text; blocks, coloured by load, on a terminal."""
    if fraction is None:
        return "[" + " " * BAR + "]"
    full = round(max(0.0, min(1.0, fraction)) * BAR)
    if not colour:
        return "[" + "#" * full + "." * (BAR - full) + "]"
    style = "green" if fraction < 0.5 else "yellow" if fraction < 0.85 else "red"
    return f"[[{style}]{'█' * full}[/][grey30]{'░' * (BAR - full)}[/]]"


def _gpu_line(g: TelemetryGpu, colour: bool) -> str:
    util = None if g.utilization is None else g.utilization / 100
    memory = None
    if g.memory_used is not None and g.memory_total:
        memory = g.memory_used / g.memory_total
    pct = "  -" if g.utilization is None else f"{g.utilization:3d}"
    temp = "  -" if g.temperature is None else f"{g.temperature:3d}"
    power = "   -" if g.power_watts is None else f"{g.power_watts:4.0f}"
    return (
        f"{g.index:>3}  UTIL {_bar(util, colour)} {pct}%  "
        f"MEM {_bar(memory, colour)} {_gib(g.memory_used):>5}/{_gib(g.memory_total)} GiB "
        f"{temp}°C {power} W"
    )


def _run_row(r: TelemetryRun) -> list[str]:
    return [
        r.name, r.workspace, ",".join(str(g) for g in r.gpus) or "-",
        "-" if r.gpu_util is None else f"{r.gpu_util:.0f}%",
        "-" if r.gpu_memory_bytes is None else f"{_gib(r.gpu_memory_bytes)} GiB",
        "-" if r.cpu_percent is None else f"{r.cpu_percent:.1f}%",
        "-" if r.memory_bytes is None else f"{_gib(r.memory_bytes)} GiB",
    ]  # fmt: skip


RUN_HEADER = ["RUN", "WORKSPACE", "GPUS", "GPU%", "GPU MEM", "CPU%", "MEM"]


def render(data: Telemetry, colour: bool = False) -> str:
    """One screen. ``colour``: rich markup (for a terminal); else plain text."""
    simulated = " (simulated)" if data.simulated else ""
    when = (
        "no sample yet" if data.time is None else data.time.replace("T", " ").replace("Z", " UTC")
    )
    every = "" if data.interval_seconds is None else f" · sampled every {data.interval_seconds:g}s"
    lines = [f"{len(data.gpus)} GPU(s){simulated} · {len(data.runs)} running · {when}{every}"]
    lines += [_gpu_line(g, colour) for g in data.gpus]
    lines.append("")
    if not data.runs:
        lines.append("no running runs")
    else:
        rows = [RUN_HEADER, *(_run_row(r) for r in data.runs)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(RUN_HEADER))]
        for n, row in enumerate(rows):
            pairs = enumerate(zip(row, widths, strict=True))
            text = "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in pairs)
            if colour:
                text = f"[bold]{_escape(text.rstrip())}[/]" if n == 0 else _escape(text)
            lines.append(text.rstrip())
    return "\n".join(lines)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@contextlib.contextmanager
def _keys() -> Iterator[None]:
    """The terminal in cbreak mode (a key is read at once, not after Enter)."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_pressed(timeout: float) -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    return bool(ready) and os.read(sys.stdin.fileno(), 32).lower().startswith(b"q")


def top(
    once: bool = typer.Option(False, "--once", help="Print one screen and exit (for scripts)."),
) -> None:
    """A live view of the GPUs and the running runs: each GPU's utilisation, memory,
    temperature and power; each run's GPUs, GPU memory, CPU and memory. Refreshes every
    2 s; q or Ctrl-C quits."""
    out = console()
    colour = out.is_terminal and not os.environ.get("NO_COLOR")
    if once or not (sys.stdin.isatty() and out.is_terminal):
        data = call(lambda c: c.telemetry())
        if colour:
            out.print(render(data, colour=True), highlight=False, soft_wrap=True)
        else:
            sys.stdout.write(render(data) + "\n")
        return
    from rich.live import Live
    from rich.text import Text

    client = Client()
    try:
        with _keys(), Live(console=out, screen=True, auto_refresh=False) as live:
            while True:
                try:
                    screen = Text.from_markup(render(client.telemetry(), colour=colour))
                except ApiError as e:
                    screen = Text(str(e))
                screen.append("\n\nq quits", style="dim")
                live.update(screen, refresh=True)
                deadline = time.monotonic() + REFRESH
                if _quit_pressed(max(0.0, deadline - time.monotonic())):
                    return
    except KeyboardInterrupt:
        return


def register(app: typer.Typer) -> None:
    app.command("top")(top)
