"""The README's picture of the metrics: a live daemon scraped every second for a minute.

Run by hand from the repository's root: ``.venv/bin/python docs/metrics-plot.py`` (about 70 s;
needs ``rsvg-convert``, Debian: librsvg2-bin). Starts ``astra serve`` in a temporary
ASTRAEUS_HOME on 4 simulated GPUs (telemetry every second), submits a few runs over the
minute (small programs that work a quarter of a core, holding GPUs, in two workspaces: a
simulated GPU is busy while its run works), reads ``GET /metrics`` on the socket once a
second with prometheus-client's parser, and draws each GPU's utilisation
(``astraeus_gpu_utilization_ratio``) and the runs waiting and running (``astraeus_runs``) as a
line chart: ``screenshots/metrics.svg``, then ``screenshots/metrics.png``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
GPUS = 4
SECONDS = 60
# a run's program: a quarter of a core of work for %d seconds (a sleeper's GPU would read 0 %)
WORK = (
    "import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end:\n"
    " t = time.monotonic()\n while time.monotonic() - t < 0.01: pass\n time.sleep(0.03)"
)
CONFIG = f"""
[machine]
executor = "process"
gpus = {GPUS}
cpu_cores = 16
memory = "64GiB"
stop_grace_seconds = 2
telemetry_seconds = 1

[admins]
users = ["root"]

[workspaces.vision]
members = ["*"]

[workspaces.nlp]
members = ["*"]
"""
# when (seconds from the start), name, workspace, GPUs, how long it runs
PLAN = [
    (1, "pretrain", "vision", 2, 40),
    (3, "sweep-1", "nlp", 1, 12),
    (4, "sweep-2", "nlp", 1, 20),
    (8, "eval", "nlp", 1, 10),
    (10, "finetune", "vision", 2, 22),
    (20, "sweep-3", "nlp", 1, 15),
    (21, "sweep-4", "nlp", 1, 12),
    (30, "big", "vision", 4, 15),
]
GPU_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
STATE_COLOURS = {"Queued": "#ff7f0e", "Running": "#1f77b4"}


def scrape(sock: Path) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(sock))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:80]
    return body


def reading(text: str) -> tuple[dict[int, float], dict[str, float]]:
    """Each GPU's utilisation (0 to 1), and the runs in each state over every workspace."""
    utilization: dict[int, float] = {}
    states: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "astraeus_gpu_utilization_ratio":
                utilization[int(s.labels["gpu"])] = s.value
            elif s.name == "astraeus_runs":
                states[s.labels["state"]] = states.get(s.labels["state"], 0) + s.value
    return utilization, states


def record(home: Path, sock: Path) -> list[tuple[float, dict[int, float], dict[str, float]]]:
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_SOCKET": str(sock)}
    astra = [sys.executable, "-m", "astraeus_tui.cli.main"]
    log = open(home / "serve.log", "wb")  # noqa: SIM115 (the daemon's log, for its life)
    daemon = subprocess.Popen([*astra, "serve"], env=env, stdout=log, stderr=log)
    try:
        for _ in range(200):
            if sock.exists():
                try:
                    scrape(sock)
                    break
                except OSError:
                    pass
            time.sleep(0.1)
        else:
            raise SystemExit(f"the daemon did not start:\n{(home / 'serve.log').read_text()}")
        start = time.monotonic()
        waiting = list(PLAN)
        series = []
        for tick in range(SECONDS + 1):
            while waiting and waiting[0][0] <= tick:
                _at, name, ws, gpus, runs_for = waiting.pop(0)
                subprocess.run(
                    [*astra, "run", "--name", name, "--workspace", ws, "--gpus", str(gpus),
                     "--", sys.executable, "-c", WORK % runs_for],
                    env=env, check=True, capture_output=True,
                )  # fmt: skip
            utilization, states = reading(scrape(sock).decode())
            series.append((time.monotonic() - start, utilization, states))
            time.sleep(max(0.0, start + tick + 1 - time.monotonic()))
        return series
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(20)
        for meta in (home / "workers").glob("*/meta.json"):  # the runs still working
            pgid = json.loads(meta.read_text()).get("child_pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)


# ------------------------------------------------------------------- the chart

W, H = 960, 590
LEFT, RIGHT = 80, 150  # the plots' margins; the legends sit on the right


def _polyline(points: list[tuple[float, float]], colour: str, width: float = 2) -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return (
        f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{width}" '
        'stroke-linejoin="round"/>'
    )


def _panel(
    top: float,
    height: float,
    title: str,
    y_max: float,
    y_ticks: list[tuple[float, str]],
    x_labels: bool = True,
) -> list[str]:
    right = W - RIGHT
    parts = [
        f'<text x="{LEFT}" y="{top - 10}" font-size="15" font-weight="bold">{escape(title)}</text>'
        if title
        else "",
        f'<rect x="{LEFT}" y="{top}" width="{right - LEFT}" height="{height}" fill="#fafafa" '
        'stroke="#999"/>',
    ]
    for value, label in y_ticks:
        y = top + height - value / y_max * height
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{LEFT - 8}" y="{y + 4:.1f}" font-size="12" text-anchor="end">{label}</text>'
        )
    for second in range(0, SECONDS + 1, 10):
        x = LEFT + second / SECONDS * (right - LEFT)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + height}" '
                     'stroke="#eee"/>')  # fmt: skip
        if x_labels:
            parts.append(
                f'<text x="{x:.1f}" y="{top + height + 16}" font-size="12" '
                f'text-anchor="middle">{second} s</text>'
            )
    return parts


def _legend(top: float, entries: list[tuple[str, str]]) -> list[str]:
    x = W - RIGHT + 18
    parts = []
    for i, (label, colour) in enumerate(entries):
        y = top + 14 + i * 22
        parts.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" '
                     f'stroke="{colour}" stroke-width="3"/>')  # fmt: skip
        parts.append(f'<text x="{x + 32}" y="{y}" font-size="13">{escape(label)}</text>')
    return parts


def chart(series: list[tuple[float, dict[int, float], dict[str, float]]]) -> str:
    right = W - RIGHT

    def x_of(t: float) -> float:
        return LEFT + min(t, SECONDS) / SECONDS * (right - LEFT)

    top1, lane, gap, top2, h2 = 75.0, 56.0, 18.0, 412.0, 140.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="DejaVu Sans, sans-serif">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT}" y="28" font-size="18" font-weight="bold">GET /metrics, scraped '
        f"every second for a minute: {GPUS} simulated GPUs, {len(PLAN)} runs</text>",
    ]
    ticks = [(0.0, "0%"), (0.5, ""), (1.0, "100%")]
    for gpu in range(GPUS):  # a lane each: the lines would hide one another at ~90%
        top = top1 + gpu * (lane + gap)
        title = "Each GPU's utilisation (astraeus_gpu_utilization_ratio)" if gpu == 0 else ""
        parts += _panel(top, lane, title, 1.0, ticks, x_labels=gpu == GPUS - 1)
        colour = GPU_COLOURS[gpu % len(GPU_COLOURS)]
        line = [(x_of(t), top + lane - u.get(gpu, 0) * lane) for t, u, _s in series if gpu in u]
        parts.append(_polyline(line, colour))
        parts.append(f'<text x="{W - RIGHT + 18}" y="{top + lane / 2 + 5:.1f}" font-size="13" '
                     f'fill="{colour}" font-weight="bold">GPU {gpu}</text>')  # fmt: skip
    most = max([s.get(k, 0) for _t, _u, s in series for k in STATE_COLOURS] + [1])
    y_max = float(most + 1)
    parts += _panel(top2, h2, "Runs by state, every workspace (astraeus_runs)", y_max,
                    [(float(v), str(v)) for v in range(0, int(y_max) + 1)])  # fmt: skip
    for state, colour in STATE_COLOURS.items():
        points: list[tuple[float, float]] = []
        for t, _u, s in series:  # a step line: a count holds until the next scrape
            y = top2 + h2 - s.get(state, 0) / y_max * h2
            if points:
                points.append((x_of(t), points[-1][1]))
            points.append((x_of(t), y))
        parts.append(_polyline(points, colour, 2.5))
    parts += _legend(top2, [(state, colour) for state, colour in STATE_COLOURS.items()])
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="astra-plot-"))
    try:
        home = folder / "home"
        home.mkdir()
        (home / "config.toml").write_text(CONFIG)
        series = record(home, folder / "astraeus.sock")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = ROOT / "screenshots" / "metrics.svg"
    out.write_text(chart(series))
    subprocess.run(["rsvg-convert", "-o", str(out.with_suffix(".png")), str(out)], check=True)
    print(f"{out} and {out.with_suffix('.png')}: {len(series)} scrapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
