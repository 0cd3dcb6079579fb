"""Inline SVG figures for the HTML report, drawn here so the report needs nothing from elsewhere.

One kind of figure is enough for budgets: horizontal bars with an optional limit mark per row
(achieved against declared bound; spec against baseline; actual universe against worst case).
Every label is escaped; infinite values get a full-width hatched bar marked "infinite".
"""

from __future__ import annotations

import hashlib
import math
import statistics

import attrs
from markupsafe import Markup, escape

from dpspec.budget import format_figure

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
        out.append(
            f'<text x="{left - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(_clip(bar.label))}</text>'
        )
        infinite = bar.value is None or not math.isfinite(bar.value)
        w = plot if infinite else max(1.0, plot * bar.value / scale_max) if bar.value > 0 else 0.0
        fill = f"url(#{pid})" if infinite else COLORS.get(bar.tone, COLORS["neutral"])
        out.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 10}" fill="{fill}"/>')
        shown = "infinite" if infinite else format_figure(bar.value)
        if bar.note:
            shown += f" {bar.note}"
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}" font-size="12">{escape(_clip(shown, 24))}</text>')
        if bar.limit is not None and math.isfinite(bar.limit):
            x = left + plot * bar.limit / scale_max
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + row - 4}" stroke="#111" '
                'stroke-width="2" stroke-dasharray="3,2"/>'
            )
    axis_y = top + row * len(bars) + 4
    out.append(f'<line x1="{left}" x2="{left + plot}" y1="{axis_y}" y2="{axis_y}" stroke="{COLORS["muted"]}"/>')
    out.append(f'<text x="{left}" y="{axis_y + 16}" font-size="11" fill="#444">0</text>')
    out.append(
        f'<text x="{left + plot}" y="{axis_y + 16}" font-size="11" fill="#444" text-anchor="end">'
        f"{escape(format_figure(scale_max))}{(' ' + escape(axis)) if axis else ''}</text>"
    )
    out.append("</svg>")
    return Markup("".join(out))


def _clip(text: str, n: int = 30) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


SERIES_COLORS = ("#3b5b92", "#a4262c", "#2f6f4f", "#8a5a00")


def curve_chart(
    title: str,
    series: list[tuple[str, list[float], list[float]]],
    *,
    x_label: str,
    y_label: str,
    reference: tuple[str, list[float], list[float]] | None = None,
    size: int = 320,
) -> Markup:
    """Curves on the unit square as an <svg> element (text escaped, no external references);
    `reference` is drawn dashed (for trade-off curves: perfect privacy, f(alpha) = 1 - alpha)."""
    left, top, pad, legend = 48, 30, 12, 18 * (len(series) + (1 if reference else 0))
    width, height = left + size + pad + 220, top + size + 40 + max(0, legend - size)

    def point(x: float, y: float) -> str:
        return f"{left + size * min(max(x, 0.0), 1.0):.1f},{top + size * (1 - min(max(y, 0.0), 1.0)):.1f}"

    out = [
        f'<svg role="img" class="figure" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="0" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="{COLORS["muted"]}"/>',
    ]
    for t in (0.0, 0.5, 1.0):
        out.append(
            f'<text x="{left + size * t:.1f}" y="{top + size + 14}" font-size="10" text-anchor="middle">{t:g}</text>'
        )
        out.append(
            f'<text x="{left - 4}" y="{top + size * (1 - t) + 4:.1f}" font-size="10" text-anchor="end">{t:g}</text>'
        )
    out.append(
        f'<text x="{left + size / 2:.1f}" y="{top + size + 30}" font-size="11" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="12" y="{top + size / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + size / 2:.1f})">{escape(y_label)}</text>'
    )
    entries = []
    if reference is not None:
        label, xs, ys = reference
        pts = " ".join(point(x, y) for x, y in zip(xs, ys))
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{COLORS["muted"]}" stroke-width="1.5" stroke-dasharray="4,3"/>'
        )
        entries.append((label, COLORS["muted"], True))
    for i, (label, xs, ys) in enumerate(series):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        pts = " ".join(point(x, y) for x, y in zip(xs, ys) if math.isfinite(x) and math.isfinite(y))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        entries.append((label, color, False))
    for i, (label, color, dashed) in enumerate(entries):
        y = top + 8 + 18 * i
        x = left + size + pad
        dash = ' stroke-dasharray="4,3"' if dashed else ""
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 24}" y="{y + 4}" font-size="11">{escape(_clip(label, 34))}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _nice_ticks(low: float, high: float, n: int = 4) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    span = high - low
    if span <= 0:
        return [low]
    raw = span / n
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + k * step for k in range(int((high - first) // step) + 1)]


def _range_of(values: list[float]) -> tuple[float, float]:
    values = _finite(values)
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low == high:
        pad = abs(low) * 0.1 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def _head(title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg role="img" class="figure" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<text x="0" y="16" font-size="13" font-weight="600">{escape(_clip(title, 100))}</text>',
    ]


def _y_axis(y0: float, y1: float, py, left: int, top: int, ph: float, label: str) -> list[str]:
    """Tick values and the rotated label of a vertical axis."""
    out = [
        f'<text x="{left - 4}" y="{py(t) + 4:.1f}" font-size="10" text-anchor="end">{t:g}</text>'
        for t in _nice_ticks(y0, y1)
    ]
    out.append(
        f'<text x="12" y="{top + ph / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + ph / 2:.1f})">{escape(_clip(label, 40))}</text>'
    )
    return out


def xy_chart(
    title: str,
    series: list[tuple[str, list[float], list[float]]],
    *,
    x_label: str,
    y_label: str,
    marked: set | None = None,
    width: int = 640,
    height: int = 300,
) -> Markup:
    """Lines with points on real axes as an <svg> element (text escaped, no external references).
    `marked`: {(series index, point index)} drawn as filled squares (e.g. Pareto points)."""
    left, right, top, bottom = 64, 200, 26, 42
    pw, ph = width - left - right, height - top - bottom
    x0, x1 = _range_of([x for _, xs, _ in series for x in xs])
    y0, y1 = _range_of([y for _, _, ys in series for y in ys])
    y0 = min(y0, 0.0) if y0 >= 0 and y0 < (y1 - y0) else y0

    def px(x):
        return left + pw * (x - x0) / (x1 - x0)

    def py(y):
        return top + ph * (1 - (y - y0) / (y1 - y0))

    out = _head(title, width, height)
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="{COLORS["muted"]}"/>')
    for t in _nice_ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{t:g}</text>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 6}" font-size="11" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.extend(_y_axis(y0, y1, py, left, top, ph, y_label))
    for i, (label, xs, ys) in enumerate(series):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        pts = [
            (j, x, y)
            for j, (x, y) in enumerate(zip(xs, ys))
            if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
        ]
        if len(pts) > 1 and len({x for _, x, _ in pts}) == len(pts):  # a curve only when x is a function
            line = " ".join(f"{px(x):.1f},{py(y):.1f}" for _, x, y in sorted(pts, key=lambda p: p[1]))
            out.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for j, x, y in pts:
            tip = escape(f"{label}: ({x:.4g}, {y:.4g})")
            if marked and (i, j) in marked:
                out.append(
                    f'<rect x="{px(x) - 4:.1f}" y="{py(y) - 4:.1f}" width="8" height="8" fill="{color}">'
                    f"<title>{tip} (Pareto)</title></rect>"
                )
            else:
                out.append(
                    f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#fff" stroke="{color}" '
                    f'stroke-width="1.5"><title>{tip}</title></circle>'
                )
        y = top + 8 + 16 * i
        out.append(
            f'<line x1="{left + pw + 10}" x2="{left + pw + 26}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + pw + 30}" y="{y + 4}" font-size="11">{escape(_clip(label, 28))}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@attrs.frozen
class Box:
    """One box of a box chart: the five-number summary of replicates, an optional reference
    value drawn as a dashed mark (the confidential value), and how many replicates it sums up."""

    label: str
    low: float
    q1: float
    median: float
    q3: float
    high: float
    reference: float | None = None
    n: int | None = None

    @classmethod
    def of(cls, label: str, values, reference: float | None = None) -> "Box":
        """The summary of `values` (quartiles by linear interpolation, as pandas' quantile);
        NaN throughout when none is finite (the box is then left empty)."""
        vs = sorted(_finite(values))
        if not vs:
            return cls(label, *[math.nan] * 5, reference=reference, n=0)
        q1, med, q3 = statistics.quantiles(vs, n=4, method="inclusive") if len(vs) > 1 else [vs[0]] * 3
        return cls(label, vs[0], q1, med, q3, vs[-1], reference=reference, n=len(vs))


def box_chart(
    title: str,
    boxes: list[Box],
    *,
    orientation: str = "horizontal",
    axis: str = "",
    width: int = 640,
    height: int | None = None,
) -> Markup:
    """Box plots (whiskers at low/high, box q1-q3, median line, dashed reference mark) as an <svg>.

    horizontal: one row per box, labels on the left, the value axis at the bottom (many boxes
    with long labels: the case study's months x methods); vertical: one column per box, the value
    axis on the left (a few points of a sweep). Both share the scale, ticks and drawing."""
    if orientation not in ("horizontal", "vertical"):
        raise ValueError(f"orientation must be 'horizontal' or 'vertical', not {orientation!r}")
    flat = orientation == "horizontal"
    if flat:
        left, right, top, bottom, slot = 230, 24, 30, 40, 26.0
        height = int(top + slot * len(boxes) + bottom)
        along = width - left - right  # pixels of the value axis
    else:
        left, right, top, bottom = 64, 16, 26, 60
        height = height or 280
        along = height - top - bottom
        slot = (width - left - right) / max(len(boxes), 1)
    v0, v1 = _range_of([v for b in boxes for v in (b.low, b.high, b.reference)])
    v0 = min(v0, 0.0) if v0 >= 0 else v0

    def pv(v: float) -> float:  # a value's pixel on the value axis
        return left + along * (v - v0) / (v1 - v0) if flat else top + along * (1 - (v - v0) / (v1 - v0))

    def line(c1: float, c2: float, a: float, b: float, style: str) -> str:
        """A segment from value-pixel a to b at category-pixels c1 to c2 (one of them constant)."""
        x1, x2, y1, y2 = (a, b, c1, c2) if flat else (c1, c2, a, b)
        return f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" {style}/>'

    out = _head(title, width, height)
    if flat:
        axis_y = top + slot * len(boxes) + 4
        out.append(
            f'<line x1="{left}" x2="{left + along}" y1="{axis_y:.1f}" y2="{axis_y:.1f}" stroke="{COLORS["muted"]}"/>'
        )
        out.extend(
            f'<text x="{pv(t):.1f}" y="{axis_y + 14:.1f}" font-size="10" text-anchor="middle">{t:g}</text>'
            for t in _nice_ticks(v0, v1)
        )
        if axis:
            out.append(
                f'<text x="{left + along / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">'
                f"{escape(_clip(axis, 60))}</text>"
            )
    else:
        out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + along}" stroke="{COLORS["muted"]}"/>')
        out.extend(_y_axis(v0, v1, pv, left, top, along, axis))
    for i, b in enumerate(boxes):
        c = (top if flat else left) + slot * (i + 0.5)  # the box's centre across the value axis
        w = (slot - 12) / 2 if flat else min(40.0, slot * 0.6) / 2
        if flat:
            out.append(
                f'<text x="{left - 8}" y="{c + 4:.1f}" font-size="11" text-anchor="end">{escape(_clip(b.label, 40))}</text>'
            )
        else:
            out.append(
                f'<text x="{c:.1f}" y="{top + along + 14}" font-size="10" text-anchor="middle">{escape(_clip(b.label, 18))}</text>'
            )
        five = (b.low, b.q1, b.median, b.q3, b.high)
        if all(v is not None and math.isfinite(v) for v in five):
            tip = (
                f"{b.label}: median {b.median:.4g}, quartiles {b.q1:.4g} to {b.q3:.4g}, range {b.low:.4g} to {b.high:.4g}"
                + (f", {b.n} runs" if b.n else "")
                + (f"; reference {b.reference:.4g}" if b.reference is not None else "")
            )
            lo_q, hi_q = sorted((pv(b.q1), pv(b.q3)))
            x, y, rw, rh = (lo_q, c - w, hi_q - lo_q, 2 * w) if flat else (c - w, lo_q, 2 * w, hi_q - lo_q)
            out.append(
                f"<g><title>{escape(tip)}</title>"
                + line(c, c, pv(b.low), pv(b.high), f'stroke="{COLORS["muted"]}"')
                + f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(rw, 1.0):.1f}" height="{max(rh, 1.0):.1f}" '
                f'fill="{COLORS["neutral"]}" fill-opacity="0.35" stroke="{COLORS["neutral"]}"/>'
                + line(c - w, c + w, pv(b.median), pv(b.median), 'stroke="#111" stroke-width="2"')
                + "</g>"
            )
        if b.reference is not None and math.isfinite(b.reference):
            out.append(
                line(
                    c - w - 3,
                    c + w + 3,
                    pv(b.reference),
                    pv(b.reference),
                    f'stroke="{COLORS["bad"]}" stroke-width="2" stroke-dasharray="3,2"',
                )
            )
    out.append("</svg>")
    return Markup("".join(out))


def heat_map(
    title: str,
    xs: list[float],
    ys: list[float],
    values: list[list[float]],
    *,
    x_label: str,
    y_label: str,
    low: float = 0.0,
    high: float = 1.0,
    size: int = 300,
) -> Markup:
    """A grid of cells shaded by value as an <svg> element: values[i][j] at (xs[j], ys[i]), light at
    `low`, dark at `high`; each cell carries its value as a tooltip (text escaped)."""
    left, top, bottom, legend = 52, 28, 40, 70
    nx, ny = len(xs), len(ys)
    cw, ch = size / max(nx, 1), size / max(ny, 1)
    width, height = left + size + legend, top + size + bottom
    out = _head(title, width, height)
    span = (high - low) or 1.0

    def shade(v: float) -> str:
        t = min(max((v - low) / span, 0.0), 1.0) if math.isfinite(v) else 0.0
        light, dark = (247, 248, 252), (30, 52, 110)
        return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(light, dark))

    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            v = values[i][j]
            tip = escape(f"{x_label} {x:g}, {y_label} {y:g}: {v:.4g}")
            out.append(
                f'<rect x="{left + j * cw:.1f}" y="{top + (ny - 1 - i) * ch:.1f}" width="{cw + 0.2:.1f}" '
                f'height="{ch + 0.2:.1f}" fill="{shade(v)}"><title>{tip}</title></rect>'
            )
    out.append(f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="{COLORS["muted"]}"/>')
    for j in (0, nx // 2, nx - 1):
        out.append(
            f'<text x="{left + (j + 0.5) * cw:.1f}" y="{top + size + 14}" font-size="10" '
            f'text-anchor="middle">{xs[j]:g}</text>'
        )
    for i in (0, ny // 2, ny - 1):
        out.append(
            f'<text x="{left - 4}" y="{top + (ny - 0.5 - i) * ch + 4:.1f}" font-size="10" '
            f'text-anchor="end">{ys[i]:g}</text>'
        )
    out.append(
        f'<text x="{left + size / 2:.1f}" y="{height - 6}" font-size="11" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="12" y="{top + size / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + size / 2:.1f})">{escape(_clip(y_label, 40))}</text>'
    )
    for k, v in enumerate((high, (low + high) / 2, low)):  # the legend: three swatches
        y = top + 10 + 22 * k
        out.append(
            f'<rect x="{left + size + 12}" y="{y - 9}" width="14" height="14" fill="{shade(v)}" '
            f'stroke="{COLORS["muted"]}"/><text x="{left + size + 30}" y="{y + 2}" font-size="10">{v:g}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))
