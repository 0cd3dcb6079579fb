"""The one box-plot drawer (`svg.box_chart`), horizontal (case study) and vertical (sweep)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dpspec.report.svg import Box, box_chart


def _boxes():
    rng = np.random.default_rng(5)
    return [Box.of(f"point {i}", rng.normal(10 * i, 1, 20), reference=10.0 * i) for i in range(1, 4)]


def test_box_summary_matches_pandas_quantiles():
    values = np.random.default_rng(1).exponential(3, 37)
    b = Box.of("x", values, reference=2.0)
    q = pd.Series(values).quantile([0, 0.25, 0.5, 0.75, 1]).to_numpy()
    assert np.allclose([b.low, b.q1, b.median, b.q3, b.high], q) and b.n == 37 and b.reference == 2.0
    one = Box.of("one", [4.0, float("nan")])
    assert (one.low, one.median, one.high, one.n) == (4.0, 4.0, 4.0, 1)
    assert Box.of("none", [float("inf")]).n == 0


@pytest.mark.parametrize("orientation", ["horizontal", "vertical"])
def test_both_orientations_draw_every_box_on_one_scale(orientation):
    boxes = _boxes()
    svg = str(box_chart("Error <by> point", boxes, orientation=orientation, axis="MAE"))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "Error &lt;by&gt; point" in svg and "<by>" not in svg
    assert svg.count("<rect") == 3 and svg.count('stroke-dasharray="3,2"') == 3  # boxes, reference marks
    # the medians grow with the point: on the value axis, right (horizontal) or up (vertical)
    medians = re.findall(r'<line x1="([\d.]+)" x2="([\d.]+)" y1="([\d.]+)" y2="([\d.]+)" stroke="#111"', svg)
    assert len(medians) == 3
    along = [float(m[0]) if orientation == "horizontal" else -float(m[2]) for m in medians]
    assert along == sorted(along) and len(set(along)) == 3
    # a median line is perpendicular to the value axis
    for x1, x2, y1, y2 in medians:
        assert (x1 == x2) if orientation == "horizontal" else (y1 == y2)


def test_empty_box_and_bad_orientation():
    svg = str(box_chart("t", [Box.of("nothing", []), Box.of("a", [1.0, 2.0])], orientation="vertical"))
    assert svg.count("<rect") == 1 and svg.endswith("</svg>")
    with pytest.raises(ValueError, match="orientation"):
        box_chart("t", [], orientation="diagonal")


def test_heat_map_draws_one_cell_per_value_and_escapes_its_text():
    from dpspec.report.svg import heat_map

    svg = str(
        heat_map(
            "<b>Delta</b>",
            [0.0, 0.5, 1.0],
            [0.0, 1.0],
            [[0.0, 0.5, 1.0], [1.0, 0.5, float("nan")]],
            x_label="p0 & more",
            y_label="p1",
        )
    )
    assert svg.count("<rect") == 6 + 1 + 3  # the cells, the frame, the legend's swatches
    assert "<b>" not in svg and "&lt;b&gt;Delta" in svg and "p0 &amp; more" in svg
    assert 'fill="#f7f8fc"' in svg and 'fill="#1e346e"' in svg  # low and high ends of the scale
