"""Small charts drawn on the server as inline SVG: no chart library in the browser.

Every chart has a text title and a description (``role="img"`` with ``aria-label``),
so a screen reader says what it shows.
"""

from __future__ import annotations

import time
from html import escape

from phalanx.spec.quantity import format_amount

WIDTH = 640
HEIGHT = 160
PAD = 32


def line_chart(points: list[tuple[float, float]], *, label: str, unit: str,
               top: float | None = None, css: str = "line",
               x_labels: tuple[str, str] | None = None) -> str:
    """A line over time; ``top`` fixes the y axis' maximum (100 for a percentage);
    ``x_labels`` name the two ends of the time axis (default: how long ago, and now)."""
    if not points:
        return (f'<p class="muted">{escape(label)}: no samples yet (one is taken every '
                f'half minute)</p>')
    t0, t1 = points[0][0], points[-1][0]
    span = max(t1 - t0, 1.0)
    high = top if top is not None else max(max(v for _, v in points), 1.0)

    def xy(t: float, v: float) -> str:
        x = PAD + (t - t0) / span * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD - min(v, high) / high * (HEIGHT - 2 * PAD)
        return f"{x:.1f},{y:.1f}"

    path = " ".join(xy(t, v) for t, v in points)
    last = points[-1][1]
    start, end = x_labels or (f"{_ago(span)} ago", "now")
    summary = f"{label}: {last:.1f} {unit} at {end}, from {start}"
    return (
        f'<svg class="chart {css}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(summary)}"><title>{escape(summary)}</title>'
        f'<line class="axis" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" '
        f'y2="{HEIGHT - PAD}"/>'
        f'<line class="axis" x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}"/>'
        f'<text x="2" y="{PAD + 4}">{high:g}</text><text x="2" y="{HEIGHT - PAD}">0</text>'
        f'<text x="{PAD}" y="{HEIGHT - 8}">{escape(start)}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end">{escape(end)}</text>'
        f'<polyline points="{path}"/></svg>'
    )


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
