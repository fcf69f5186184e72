"""Small charts drawn on the server as inline SVG: no chart library in the browser.

Every chart has a text title and a description (``role="img"`` with ``aria-label``),
so a screen reader says what it shows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from phalanx.spec.quantity import format_amount

WIDTH = 640
HEIGHT = 220
LEFT = 64  # room for the y axis' title and its end values
RIGHT = 16
TOP = 30  # the chart's title
BOTTOM = 44  # the x axis' end values and its title
# One colour per line, inline (a stylesheet's stroke would paint every line alike); chosen to
# stay apart for the common colour-vision deficiencies, and each line is named in the legend.
PALETTE = ("#1565c0", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")


@dataclass(frozen=True, slots=True)
class Line:
    """One named series of a chart: (time, value) points."""

    name: str
    points: list[tuple[float, float]]


def line_chart(points: list[tuple[float, float]], *, label: str, unit: str,
               top: float | None = None, css: str = "line",
               x_labels: tuple[str, str] | None = None) -> str:
    """A line over time; ``top`` fixes the y axis' maximum (100 for a percentage);
    ``x_labels`` name the two ends of the time axis (default: how long ago, and now)."""
    if not points:
        return (f'<p class="muted">{escape(label)}: no samples yet (one is taken every '
                f'half minute)</p>')
    return lines_chart([Line(label, points)], title=label, y_axis=f"{label} ({unit})",
                       x_axis="time", unit=unit, top=top, css=css, x_labels=x_labels)


def lines_chart(lines: Sequence[Line], *, title: str, y_axis: str, x_axis: str, unit: str,
                top: float | None = None, css: str = "line",
                x_labels: tuple[str, str] | None = None) -> str:
    """Several lines on one time axis, to compare them: a title, both axes named with their
    units, and a legend when there is more than one line."""
    drawn = [line for line in lines if line.points]
    if not drawn:
        return f'<p class="muted">{escape(title)}: no samples</p>'
    t0 = min(line.points[0][0] for line in drawn)
    t1 = max(line.points[-1][0] for line in drawn)
    span = max(t1 - t0, 1.0)
    high = top if top is not None else max(max(v for line in drawn for _, v in line.points), 1.0)
    bottom = HEIGHT - BOTTOM

    def xy(t: float, v: float) -> str:
        x = LEFT + (t - t0) / span * (WIDTH - LEFT - RIGHT)
        y = bottom - min(v, high) / high * (bottom - TOP)
        return f"{x:.1f},{y:.1f}"

    start, end = x_labels or (f"{_ago(span)} ago", "now")
    lasts = "; ".join(f"{line.name} {line.points[-1][1]:.1f} {unit}" for line in drawn)
    summary = f"{title}, from {start} to {end}: at the end {lasts}"
    parts = [
        f'<svg class="chart {css}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(summary)}"><title>{escape(summary)}</title>',
        f'<text class="chart-title" x="{LEFT}" y="18" font-weight="bold">{escape(title)}</text>',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">{high:g}</text>',
        f'<text x="{LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
        f'<text class="y-axis" transform="translate(14 {(TOP + bottom) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_axis)}</text>',
        f'<text x="{LEFT}" y="{bottom + 14}">{escape(start)}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{bottom + 14}" text-anchor="end">{escape(end)}</text>',
        f'<text class="x-axis" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 6}" '
        f'text-anchor="middle">{escape(x_axis)}</text>',
    ]
    for i, line in enumerate(drawn):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(xy(t, v) for t, v in line.points)
        parts.append(f'<polyline class="series" data-series="{escape(line.name)}" '
                     f'style="stroke:{colour}" points="{path}"/>')
        if len(drawn) > 1:  # the legend, top right, one entry a line
            x = WIDTH - RIGHT - 120 * (len(drawn) - i)
            parts.append(f'<g class="legend-entry"><rect x="{x}" y="8" width="12" height="4" '
                         f'style="fill:{colour}"/><text x="{x + 16}" y="14">'
                         f'{escape(line.name)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def usage_bar(nominal: int, used: int, borrowed: int, lendable: int,
              resource: str = "") -> str:
    """One flavor/resource of a ClusterQueue: used within nominal, borrowed beyond it,
    and what it could lend; the scale is the larger of nominal and used."""
    scale = max(nominal, used, 1)
    within = min(used, nominal)

    def pct(v: int) -> str:
        return f"{100 * v / scale:.1f}%"

    text = (f"used {quantity(used, resource)} of nominal {quantity(nominal, resource)}, "
            f"borrowed {quantity(borrowed, resource)}, lendable {quantity(lendable, resource)}")
    return (
        f'<div class="bar" role="img" aria-label="{escape(text)}" title="{escape(text)}">'
        f'<span class="nominal" style="width:{pct(nominal)}"></span>'
        f'<span class="used" style="width:{pct(within)}"></span>'
        f'<span class="borrowed" style="left:{pct(nominal)};width:{pct(borrowed)}"></span>'
        f"</div>"
    )


def quantity(milli: int, resource: str = "") -> str:
    """Milli-units as people write them for ``resource`` (4Gi, 23.5Gi, 2, 250m)."""
    return format_amount(milli, resource)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def age(since: float, now: float | None = None) -> str:
    """How long ago ``since`` was, in a word or two."""
    return _ago(max((now if now is not None else time.time()) - since, 0.0))


def clock(when: float) -> str:
    """A moment as a UTC date and time (absolute, so a live page does not redraw it)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))
