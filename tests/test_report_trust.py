"""Reports a reader can trust (issue 29): bidi controls from specs and data never reorder the
report's words, in any of its forms."""
from __future__ import annotations

import json

import pytest

import dpspec
from dpspec.report import render_all
from dpspec.report.bidi import BIDI_CONTROLS, neutral, neutral_text
from tests.conftest import SMALL_CSV, SMALL_SPEC


def test_each_bidi_control_becomes_a_visible_marker_and_markup_stays_markup():
    from markupsafe import Markup

    for ch in BIDI_CONTROLS:
        assert neutral_text(f"a{ch}b") == f"a[U+{ord(ch):04X}]b"
    marked = neutral_text(Markup("<b>\u202eX</b>"))
    assert isinstance(marked, Markup) and str(marked) == "<b>[U+202E]X</b>"
    assert neutral({"k\u2067": ["\u202e", ("x\u200f",)], "n": 1}) == {"k[U+2067]": ["[U+202E]", ("x[U+200F]",)], "n": 1}


@pytest.mark.parametrize("control", ["\u202e", "\u2067", "\u202b", "\u200f"])
def test_bidi_controls_in_every_text_field_never_reach_a_report(tmp_path, control):
    """Title, domain description, table and category names' values, public source, tuning note,
    output names, data values: the report's HTML, Markdown and JSON hold none of the controls."""
    c = control
    text = (SMALL_SPEC.replace('spec "small"', f'spec "Release epsilon = 0.1 {c}1 = nolispe"')
            .replace('"a small survey"', f'"a small {c}survey"')
            .replace('status   : {single, married, "N"}', f'status   : {{single, married, "N{c}"}}')
            .replace("budget epsilon <= 1.1", f'budget epsilon <= 1.1\npublic {{\n  count people released "census {c}2010"\n}}'))
    (tmp_path / "people.csv").write_text(SMALL_CSV.replace("north", f"no{c}rth").replace(",N\n", f",N{c}\n"))
    (tmp_path / "s.dps").write_text(text)
    files = render_all(dpspec.compile(dpspec.load(str(tmp_path / "s.dps")), seed=1))
    for kind, (name, content) in files.items():
        assert not any(ch in content for ch in BIDI_CONTROLS), (kind, name)
        assert f"U+{ord(c):04X}" in content, (kind, name)
    title = json.loads(files["json"][1])["title"]
    assert title == f"Release epsilon = 0.1 [U+{ord(c):04X}]1 = nolispe"
