"""Inline SVG figures for the HTML report, drawn here so the report needs nothing from elsewhere.

One kind of figure is enough for budgets: horizontal bars with an optional limit mark per row
(achieved against declared bound; spec against baseline; actual universe against worst case).
Every label is escaped; infinite values get a full-width hatched bar marked "infinite".
"""
from __future__ import annotations

import hashlib
import math

import attrs
from markupsafe import Markup, escape

from dpspec.budget import format_number

COLORS = {"ok": "#2f6f4f", "bad": "#a4262c", "neutral": "#3b5b92", "muted": "#8a8f98"}


@attrs.frozen
class Bar:
    label: str
    value: float
    tone: str = "neutral"  # ok, bad, neutral, muted
    limit: float | None = None  # drawn as a vertical mark (a declared bound)
    note: str = ""


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def bar_chart(title: str, bars: list[Bar], *, axis: str = "", width: int = 640) -> Markup:
    """A horizontal bar chart as an <svg> element (text escaped, no external references)."""
    row, top, left, right = 30, 30, 190, 90
    height = top + row * len(bars) + 24
    plot = width - left - right
    pid = "hatch-" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:8]
    scale_max = max(_finite([b.value for b in bars] + [b.limit for b in bars]) or [1.0])
    scale_max = scale_max * 1.05 if scale_max > 0 else 1.0
    out = [
        f'<svg role="img" class="figure" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<defs><pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="3" height="6" fill="{COLORS["bad"]}"/></pattern></defs>',
        f'<text x="0" y="16" class="fig-title" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    for i, bar in enumerate(bars):
        y = top + i * row
        out.append(f'<text x="{left - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(_clip(bar.label))}</text>')
        infinite = bar.value is None or not math.isfinite(bar.value)
        w = plot if infinite else max(1.0, plot * bar.value / scale_max) if bar.value > 0 else 0.0
        fill = f"url(#{pid})" if infinite else COLORS.get(bar.tone, COLORS["neutral"])
        out.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 10}" fill="{fill}"/>')
        shown = "infinite" if infinite else format_number(bar.value)
        if bar.note:
            shown += f" {bar.note}"
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}" font-size="12">{escape(_clip(shown, 24))}</text>')
        if bar.limit is not None and math.isfinite(bar.limit):
            x = left + plot * bar.limit / scale_max
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + row - 4}" stroke="#111" '
                       'stroke-width="2" stroke-dasharray="3,2"/>')
    axis_y = top + row * len(bars) + 4
    out.append(f'<line x1="{left}" x2="{left + plot}" y1="{axis_y}" y2="{axis_y}" stroke="{COLORS["muted"]}"/>')
    out.append(f'<text x="{left}" y="{axis_y + 16}" font-size="11" fill="#444">0</text>')
    out.append(f'<text x="{left + plot}" y="{axis_y + 16}" font-size="11" fill="#444" text-anchor="end">'
               f'{escape(format_number(scale_max))}{(" " + escape(axis)) if axis else ""}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _clip(text: str, n: int = 30) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"
