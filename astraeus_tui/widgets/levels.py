"""Sparklines on a fixed scale: a bar's height is its value's share of ``top``.

Textual's Sparkline scales to its own data's min and max, so readings of 85–95 % look
like 0–100 %. Here the floor is 0 and the top is given (100 for a utilisation, the
total for memory): a bar means the level itself. Buckets and colours as Textual's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from rich.color import Color, blend_rgb
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.app import RenderResult as WidgetRender
from textual.reactive import reactive
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"
Summary = Callable[[Sequence[float]], float]


def blend(low: Color, high: Color, ratio: float) -> Color:
    """The colour ``ratio`` of the way from ``low`` to ``high`` in RGB (``high`` when
    either has no RGB value), as Textual's own Sparkline blends them."""
    if low.triplet is None or high.triplet is None:
        return high
    return Color.from_triplet(blend_rgb(low.triplet, high.triplet, ratio))


def _buckets(data: Sequence[float], count: int) -> Iterator[Sequence[float]]:
    """``data`` in ``count`` consecutive parts (the empty ones left out)."""
    step = Fraction(len(data), count)
    for i in range(count):
        part = data[int(step * i) : int(step * (i + 1))]
        if part:
            yield part


def share(value: float, top: float) -> float:
    """``value`` as a share of ``top``, within 0..1 (0 without a top)."""
    return 0.0 if top <= 0 else min(1.0, max(0.0, value / top))


class Levels:
    """A rich renderable: ``data`` in ``width`` bars on 0..``top``."""

    def __init__(
        self, data: Sequence[float], *, top: float, width: int | None, height: int | None = None,
        low: Color, high: Color, summary: Summary = max,
    ) -> None:  # fmt: skip
        self.data, self.top, self.width, self.height = data, top, width, height
        self.low, self.high, self.summary = low, high, summary

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.width or options.max_width
        height = self.height or 1
        if not self.data:
            for _ in range(height - 1):
                yield Segment.line()
            yield Segment(BARS[0] * width, Style.from_color(self.low))
            return
        steps = len(BARS) * height - 1  # the highest bar's index
        parts = tuple(_buckets(self.data, width))
        ratios = [share(self.summary(parts[int(i * len(parts) / width)]), self.top)
                  for i in range(width)]  # fmt: skip
        for row in reversed(range(height)):
            low_part, high_part = row * len(BARS), (row + 1) * len(BARS)
            for ratio in ratios:
                index = int(ratio * steps)
                if index < low_part:
                    yield Segment(" ")
                    continue
                bar = "█" if index >= high_part else BARS[index % len(BARS)]
                yield Segment(bar, Style.from_color(blend(self.low, self.high, ratio)))
            if row > 0:
                yield Segment.line()


class LevelSparkline(Sparkline):
    """Textual's Sparkline widget (its colours, CSS and data), drawn on 0..``top``."""

    top: reactive[float] = reactive(100.0)

    def render(self) -> WidgetRender:
        _, base = self.background_colors
        low = base + (self.get_component_styles("sparkline--min-color").color
                      if self.min_color is None else self.min_color)  # fmt: skip
        high = base + (self.get_component_styles("sparkline--max-color").color
                       if self.max_color is None else self.max_color)  # fmt: skip
        return Levels(list(self.data or []), top=self.top, width=self.size.width,
                      height=self.size.height, low=low.rich_color, high=high.rich_color,
                      summary=self.summary_function)  # fmt: skip
