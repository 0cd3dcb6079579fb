"""`dpspec swap epsilon`, `dpspec swap whatif`, and the core commands on the swap specs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

SPECS = Path(__file__).resolve().parents[1] / "specs"
MA1940 = str(SPECS / "ma1940_swap.dps")
MA1940_FINE = str(SPECS / "ma1940_swap_fine.dps")
ACS = str(SPECS / "acs_ma2019_swap.dps")
RR = str(SPECS / "acs_ma_vision_rr.dps")
B_1940 = 264_331


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


SCHEMAS = Path(__file__).resolve().parents[1] / "plugins" / "dpspec_swap" / "schemas"
# (output, version) -> SHA-256 of its schema's canonical JSON: a schema changes only with its version
PINS = {
    ("epsilon", "1.0"): "e0f7ce1b1ab5b586bc40403e9d439094c853225ae97c517f89ed9820298febbe",
    ("whatif", "1.0"): "23c14416c29325c6c6cf64b22ab7870ff50d67cc13f3f834a5e0c03890d6c5c9",
}


def assert_valid(name: str, document) -> None:
    import jsonschema

    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(document)]
    assert not errors, errors[:5]


@pytest.mark.parametrize("name", ["epsilon", "whatif"])
def test_each_output_schema_is_pinned_to_its_version(name):
    import hashlib

    import jsonschema

    from dpspec_swap.cli import FORMAT_VERSION

    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for form in schema.get("oneOf", [schema]):  # epsilon: a list of rows, or with --epsilon an object
        assert (form.get("items") or form)["properties"]["format_version"]["const"] == FORMAT_VERSION
    digest = hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert digest == PINS[(name, FORMAT_VERSION)], f"{name}.schema.json changed without a format version change"


# ---- swap epsilon --------------------------------------------------------------------------


def test_epsilon_json_reproduces_the_paper():
    res = run("swap", "epsilon", "--b", str(B_1940), "--rate", "0.01,0.05,0.10,0.50", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [set(r) for r in rows] == [{"format_version", "b", "rate", "epsilon", "minimum_epsilon", "minimum_rate"}] * 4
    assert_valid("epsilon", rows)
    assert [r["b"] for r in rows] == [B_1940] * 4
    assert [r["rate"] for r in rows] == [0.01, 0.05, 0.1, 0.5]
    assert [round(r["epsilon"], 2) for r in rows] == [17.08, 15.43, 14.68, 12.48]
    assert rows[1]["epsilon"] == pytest.approx(math.log(B_1940 + 1) + math.log(19), rel=1e-14)


def test_epsilon_json_edges():
    rows = json.loads(run("swap", "epsilon", "--b", str(B_1940), "--rate", "0,1,0.7", "--json").output)
    assert [r["epsilon"] for r in rows[:2]] == ["inf", "inf"]
    assert round(rows[2]["epsilon"], 2) == 11.64  # p > 1/2 branch
    assert json.loads(run("swap", "epsilon", "--b", "0", "--rate", "0.3", "--json").output)[0]["epsilon"] == 0


def test_epsilon_accepts_percent_and_fractions_exactly():
    rows = json.loads(run("swap", "epsilon", "--b", "1000", "--rate", "5%,1/20", "--json").output)
    assert rows[0] == rows[1]


def test_epsilon_text():
    res = run("swap", "epsilon", "--b", str(B_1940), "--rate", "0.05,1")
    assert res.exit_code == 0
    assert "b = 264,331" in res.output
    assert "15.4294" in res.output and "inf" in res.output


@pytest.mark.parametrize(
    "args",
    [["--b", "10", "--rate", "1.5"], ["--b", "10", "--rate", "x"], ["--b", "-1", "--rate", "0.1"], ["--rate", "0.1"]],
)
def test_epsilon_usage_errors(args):
    res = CliRunner().invoke(main, ["swap", "epsilon", *args])
    assert res.exit_code == 2
    assert "Traceback" not in res.output


# ---- swap whatif ---------------------------------------------------------------------------


def test_whatif_json_for_1940():
    res = run("swap", "whatif", MA1940, "--rates", "0.05,0.5", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert_valid("whatif", out)
    assert out["table"] == "households" and out["swap"] == ["county"] and out["hold"] == ["tenure"]
    assert out["rates"] == [0.05, 0.5]
    rows = {" x ".join(r["match"]): r for r in out["rows"]}
    spec_row = out["rows"][0]
    assert spec_row["is_spec"] and spec_row["match"] == ["state", "size"] and spec_row["b"] == B_1940
    assert spec_row["largest_stratum"] == {"state": "MA", "size": 2}
    assert round(spec_row["epsilon"][0]["epsilon"], 2) == 15.43
    # finer (tenure added): smaller b, smaller nominal budget; coarser (no size): the whole state
    assert rows["state x size x tenure"]["b"] == 163_586
    assert round(rows["state x size x tenure"]["epsilon"][0]["epsilon"], 2) == 14.95
    assert rows["state"]["b"] == 1_144_424 and rows[""]["b"] == 1_144_424
    assert rows["size"]["keeps_nesting"] is False and rows["state"]["keeps_nesting"] is True
    assert all(r["from_invariants"] for r in out["rows"])


def test_whatif_extra_keys():
    res = run("swap", "whatif", ACS, "--key", "SEX,AGE_BAND,RAC1P,HISP,STATE", "--key", "STATE,SEX", "--json")
    assert res.exit_code == 0, res.output
    rows = {tuple(r["match"]): r for r in json.loads(res.output)["rows"]}
    assert rows[("STATE", "SEX", "AGE_BAND")]["b"] == 1161
    assert rows[("SEX", "AGE_BAND", "RAC1P", "HISP", "STATE")]["from_invariants"] is True
    assert rows[("STATE", "SEX")]["b"] == 4058


def test_whatif_text_table():
    res = run("swap", "whatif", MA1940, "--rates", "5%")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1].startswith("match key") and "eps@0.05" in lines[1]
    spec_line = next(line for line in lines if line.startswith("state x size *"))
    assert "264,331" in spec_line and "15.43" in spec_line


def test_whatif_bad_key_and_wrong_mechanism():
    res = CliRunner().invoke(main, ["swap", "whatif", MA1940, "--key", "county"])
    assert res.exit_code == 2 and "is swapped" in res.output
    res = CliRunner().invoke(main, ["swap", "whatif", MA1940, "--key", "sise"])
    assert res.exit_code == 2 and "did you mean 'size'" in res.output
    res = CliRunner().invoke(main, ["swap", "whatif", RR])
    assert res.exit_code == 2 and "does not use the swap mechanism" in res.output


def test_whatif_spec_error_exits_1(tmp_path):
    bad = tmp_path / "bad.dps"
    bad.write_text(Path(MA1940).read_text().replace("rate: 0.05", "rate: 2"))
    res = CliRunner().invoke(main, ["swap", "whatif", str(bad)])
    assert res.exit_code == 1
    assert "outside the allowed range [0, 1]" in res.output


# ---- the core commands on the swap specs ---------------------------------------------------


def test_check_all_swap_specs():
    res = run("check", MA1940, MA1940_FINE, ACS)
    assert res.exit_code == 0, res.output


def test_budget_json_reports_b_and_the_stratum():
    res = run("budget", MA1940, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["mechanism"]["name"] == "swap"
    assert summary["native"]["depends_on"]["b"] == B_1940
    assert summary["native"]["depends_on"]["largest_stratum"] == {"state": "MA", "size": 2}
    assert round(summary["budget"]["epsilon"], 2) == 15.43
    fine = json.loads(run("budget", MA1940_FINE, "--json").output)
    assert fine["native"]["depends_on"]["b"] == 163_586
    assert fine["budget"]["epsilon"] < summary["budget"]["epsilon"]


def test_check_reports_overlap_at_its_line(tmp_path):
    bad = tmp_path / "bad.dps"
    bad.write_text(Path(MA1940).read_text().replace("swap: county", "swap: county, size"))
    res = CliRunner().invoke(main, ["check", str(bad)])
    assert res.exit_code == 1
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "swap: county, size" in t)
    assert f"bad.dps:{line}:" in res.output
    assert "size cannot both be in the match key and be swapped" in res.output


def test_plugins_lists_swap():
    mechs = {m["name"]: m for m in json.loads(run("plugins", "--json").output)}
    assert [p["name"] for p in mechs["swap"]["parameters"]] == ["table", "match", "swap", "rate"]


def test_compile_with_runs_writes_utility_to_the_internal_report(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", ACS, "-o", str(out), "--runs", "3"])
    assert res.exit_code == 0, res.output
    assert (out / "persons.csv").exists() and (out / "count_persons_PUMA_RAC1P.csv").exists()
    public = (out / "report.md").read_text()
    internal = (out / "internal-report.md").read_text()
    assert "Swapping: budget against swap rate" in public
    assert "utility of the released tables" not in public and "MAPE" not in public
    assert "utility of the released tables" in internal
    report = json.loads((out / "report.json").read_text())
    assert "mape_percent" not in json.dumps(report)


# ---- text from a spec reaches the terminal marked, as the core commands' does -------------------


def test_whatif_shows_an_escape_in_the_title_as_a_visible_marker(tmp_path):
    (tmp_path / "data").symlink_to(SPECS / "data")
    text = Path(MA1940).read_text(encoding="utf-8")
    assert 'spec "1940 Massachusetts' in text
    spec = tmp_path / "ma1940_swap.dps"
    spec.write_text(text.replace('spec "1940 Massachusetts', 'spec "\x1b[2J1940 Massachusetts', 1), encoding="utf-8")
    res = run("swap", "whatif", str(spec), "--rates", "5%")
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output  # the screen is never cleared
    assert res.output.splitlines()[0].startswith("[U+001B][2J1940 Massachusetts"), res.output


def test_swap_commands_print_through_the_terminal_safe_echo(monkeypatch):
    import dpspec.report.terminal

    # what epsilon prints passes through dpspec.api.echo: a marking that tags every line shows it
    monkeypatch.setattr(dpspec.report.terminal, "terminal_text", lambda text: "<safe>" + str(text))
    res = run("swap", "epsilon", "--b", "10", "--rate", "5%")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines and all(line.startswith("<safe>") for line in lines if line.strip()), res.output
    source = (Path(__file__).resolve().parents[1] / "plugins" / "dpspec_swap" / "cli.py").read_text(encoding="utf-8")
    assert "click.echo" not in source
