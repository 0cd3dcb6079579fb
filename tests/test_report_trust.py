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
    text = (
        SMALL_SPEC.replace('spec "small"', f'spec "Release epsilon = 0.1 {c}1 = nolispe"')
        .replace('"a small survey"', f'"a small {c}survey"')
        .replace('status   : {single, married, "N"}', f'status   : {{single, married, "N{c}"}}')
        .replace(
            "budget epsilon <= 1.1", f'budget epsilon <= 1.1\npublic {{\n  count people released "census {c}2010"\n}}'
        )
    )
    (tmp_path / "people.csv").write_text(SMALL_CSV.replace("north", f"no{c}rth").replace(",N\n", f",N{c}\n"))
    (tmp_path / "s.dps").write_text(text)
    files = render_all(dpspec.compile(dpspec.load(str(tmp_path / "s.dps")), seed=1))
    for kind, (name, content) in files.items():
        assert not any(ch in content for ch in BIDI_CONTROLS), (kind, name)
        assert f"U+{ord(c):04X}" in content, (kind, name)
    title = json.loads(files["json"][1])["title"]
    assert title == f"Release epsilon = 0.1 [U+{ord(c):04X}]1 = nolispe"


# ---- a verification file is re-validated -------------------------------------------------------


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """A real `dpspec verify --json` result of the randomized-response spec (200 runs, seeded)."""
    import os

    from dpspec.verify import verify
    from tests.conftest import SPECS

    spec = dpspec.load(os.path.join(SPECS, "acs_ma_vision_rr.dps"))
    return verify(spec, runs=200, seed=1).to_json()


def _load(tmp_path, data):
    from dpspec.verify.result import load_json

    path = tmp_path / "v.json"
    path.write_text(json.dumps(data))
    return load_json(str(path))


def test_a_genuine_verification_file_reads_back_with_its_own_summary(tmp_path, verified):
    assert _load(tmp_path, verified)["summary"] == verified["summary"]


def _forged(verified, **changes):
    data = json.loads(json.dumps(verified))
    for key, value in changes.items():
        if key.startswith("pair_"):
            data["pairs"][0][key[5:]] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"lower_bound": 5.0}, "overall claim and lower bound"),
        ({"verdict": "refuted"}, "own numbers make it"),
        ({"pair_lower_bound": 5.0}, "states the lower bound 5"),
        ({"pair_hits_first": 10**9}, "no valid hit counts"),
        ({"confidence": 1.5}, "out of range"),
        ({"pairs": []}, "lists no pairs"),
        ({"claimed": "nan"}, "not usable"),
    ],
)
def test_a_forged_verification_file_is_refused(tmp_path, verified, changes, why):
    from dpspec.verify.miniature import VerifyError

    with pytest.raises(VerifyError, match="inconsistent verification result") as err:
        _load(tmp_path, _forged(verified, **changes))
    assert why in str(err.value)


def test_a_forged_summary_is_replaced_by_the_recomputed_one(tmp_path, verified):
    from dpspec.verify.finding import finding

    data = _load(tmp_path, _forged(verified, summary="passed: epsilon is exactly as claimed, certified"))
    assert data["summary"] == verified["summary"]
    assert "certified" not in finding(data).message


# ---- released CSVs and spreadsheet formulas ----------------------------------------------------------

SWAP_SPEC = """spec "tiny swap"
domain d "tiny" {
  stage edited
  geography g { state > county }
  table households unit household {
    state  : category
    county : category in state
    size   : int 1..20
  }
}
data households from "households.csv"
invariants {
  count households by state, size
  count households by county, size
}
unit households : hamming
premetric pure
mechanism swap { table: households  match: state, size  swap: county  rate: 0.05 }
budget epsilon <= 16
release {
  microdata households
}
"""


def _swap_case(tmp_path, county: str):
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    rows = [f"s1,{county if i % 2 else 'c2'},{1 + i % 3}" for i in range(12)]
    (folder / "households.csv").write_text("state,county,size\n" + "\n".join(rows) + "\n")
    (folder / "s.dps").write_text(SWAP_SPEC)
    return folder / "s.dps"


@pytest.mark.parametrize("value", ["=cmd|' /C calc'!A0", "@SUM(A1)", "+1+cmd", "-2+3+cmd|' /C calc'!A0", "\tx"])
def test_a_release_a_spreadsheet_would_run_is_refused_and_nothing_is_published(tmp_path, value):
    from click.testing import CliRunner

    from dpspec.cli.main import main

    out = tmp_path / "out"
    ok = CliRunner().invoke(main, ["compile", str(_swap_case(tmp_path, "c1")), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    spec = _swap_case(tmp_path, value)
    bad = CliRunner().invoke(main, ["compile", str(spec), "-o", str(out)])
    assert bad.exit_code == 1, bad.output
    assert "households.csv: column 'county' would release" in bad.output and "runs as a formula" in bad.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the previous set, untouched
    # the data a program reads is not changed: the value is read back exactly as written
    frame = dpspec.api.load_table(dpspec.load(str(spec)), dpspec.load(str(spec)).data[0])
    assert value in set(frame["county"].astype(str))


def test_negative_numbers_and_ordinary_codes_are_released_as_they_are():
    from dpspec.publish.table_csv import formula_cells

    assert formula_cells(["-3", "+5", "1e5", "-0.5", "N", "c1", None, "a=b"]) == []
    assert formula_cells(["=1+1", "-cmd", "@x", "\tq", "\rq"]) == ["=1+1", "-cmd", "@x", "\tq", "\rq"]


# ---- error messages never print a file that is not a spec ---------------------------------------------


@pytest.mark.parametrize("command", ["include", "check", "link", "registry"])
def test_an_error_never_prints_the_contents_of_a_file_that_is_not_a_spec(tmp_path, command):
    from click.testing import CliRunner

    from dpspec.cli.main import main

    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:SECRET-TOKEN:/root:/bin/bash\nkey: value\n")
    (tmp_path / "p.dps").write_text(f'program "p" {{\n  include "{secret}"\n}}\n')
    (tmp_path / "link.dps").symlink_to(secret)
    args = {
        "include": ["check", str(tmp_path / "p.dps")],
        "check": ["check", str(secret)],
        "link": ["check", str(tmp_path / "link.dps")],
        "registry": ["import", "--registry", str(secret), "-o", str(tmp_path / "x.dps")],
    }[command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "its contents are not shown" in result.output, result.output
    assert "SECRET-TOKEN" not in result.output and "x:0:0" not in result.output and "key: value" not in result.output


def test_a_misspelled_first_section_still_gets_its_excerpt(tmp_path):
    from dpspec.errors import SpecError

    (tmp_path / "s.dps").write_text('spex "x"\n')
    with pytest.raises(SpecError, match=r"unexpected 'spex'(?s:.*)spex \"x\""):
        dpspec.load(str(tmp_path / "s.dps"))
