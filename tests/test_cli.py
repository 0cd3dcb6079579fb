"""The command line: exit codes, messages without tracebacks, fmt --write, show, convert."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec.cli.main import main
from tests.conftest import SMALL_SPEC


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_check_ok(small_spec):
    result = run("check", small_spec)
    assert result.exit_code == 0
    assert result.output.strip().endswith(": ok")


def test_check_reports_errors_and_exits_1(small_spec, tmp_path):
    bad = tmp_path / "bad.dps"
    bad.write_text(SMALL_SPEC.replace("unit people", "unit peple"))
    result = run("check", small_spec, bad)
    assert result.exit_code == 1
    assert "bad.dps:17:6: error: unknown table 'peple'; did you mean 'people'?" in result.output
    assert "small.dps: ok" in result.output


def test_usage_error_exits_2():
    assert run("check").exit_code == 2
    assert run("compile", "--runs", "0", "x.dps").exit_code == 2
    assert run("no-such-command").exit_code == 2


BROKEN_INPUTS = {
    "empty": b"",
    "binary": bytes(range(256)),
    "latin1": 'spec "caf\xe9"'.encode("latin-1"),
    "truncated": SMALL_SPEC[: len(SMALL_SPEC) // 2].encode(),
    "deep": b"mechanism m { a: " + b"(" * 5000 + b"1" + b")" * 5000 + b" }",
    "deep blocks": b"mechanism m { a: " + b"{ b: " * 3000 + b"1" + b" }" * 3000 + b" }",
    "only comment": b"# nothing here\n",
    "huge number": b"mechanism m { a: 10^64^64 }",
    "huge power": b"mechanism m { a: (((((10^64)^64)^64)^64)^64)^64 }",
}


@pytest.mark.parametrize("name", list(BROKEN_INPUTS))
def test_broken_inputs_never_traceback(tmp_path, name):
    path = tmp_path / "broken.dps"
    path.write_bytes(BROKEN_INPUTS[name])
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "internal error" not in result.output
    assert "error:" in result.output


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.binary(max_size=300)
    | st.text(alphabet='spec"{}:,.0123456789 domain table unit premetric mechanism budget\n<=()/^-', max_size=300)
)
def test_fuzzed_inputs_never_traceback(tmp_path, data):
    path = tmp_path / "fuzz.dps"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code in (0, 1)
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_missing_file_is_a_user_error(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path / "nope.dps")])
    assert result.exit_code == 1
    assert "cannot read the file" in result.output


def test_fmt_prints_and_writes_atomically(small_spec):
    messy = SMALL_SPEC.replace("premetric pure", "premetric    pure   # comment")
    small_spec.write_text(messy)
    printed = run("fmt", small_spec)
    assert printed.exit_code == 0
    assert "premetric pure  # comment\n" in printed.output  # spacing canonical, comment kept on its line
    assert run("fmt", "--check", small_spec).exit_code == 1
    assert run("fmt", "--write", small_spec).exit_code == 0
    assert small_spec.read_text() == printed.output
    assert run("fmt", "--check", small_spec).exit_code == 0
    leftovers = [f for f in os.listdir(small_spec.parent) if f.startswith(".tmp-")]
    assert leftovers == []


def test_show_json_is_the_ir(small_spec):
    result = run("show", "--json", small_spec)
    data = json.loads(result.output)
    assert data["mechanism"]["params"]["p"] == 0.75
    assert data["unit"] == {"table": "people", "relation": "hamming", "bound": None}


def test_show_plain_language(small_spec):
    result = run("show", small_spec)
    assert "eps_D-DP(X_edited(survey), D[#people], d_Hamming(person), MULT)" in result.output
    assert "Who is protected?" in result.output


def test_budget_json_and_bound_failure(small_spec):
    result = run("budget", "--json", small_spec)
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["budget"]["epsilon"] == pytest.approx(1.0986122886681098)
    assert data["bounds_hold"] is True
    small_spec.write_text(SMALL_SPEC.replace("budget epsilon <= 1.1", "budget epsilon <= 1"))
    result = CliRunner().invoke(main, ["budget", str(small_spec)])
    assert result.exit_code == 1
    assert "declared epsilon <= 1: EXCEEDED (achieved 1.0986" in result.output


def test_budget_bound_quoted_in_zcdp_is_converted(small_spec):
    small_spec.write_text(SMALL_SPEC.replace("budget epsilon <= 1.1", "budget rho <= 0.61"))
    data = json.loads(run("budget", "--json", small_spec).output)
    assert data["bounds"][0]["achieved"] == pytest.approx(1.0986122886681098**2 / 2)
    assert data["bounds_hold"] is True


@pytest.mark.parametrize(
    "args,key,value",
    [
        (["rho=15.29", "--to", "approx", "--delta", "1e-10", "--method", "bs16"], "epsilon", 52.82),
        (["rho=15.29", "--to", "approx", "--delta", "1e-10", "--method", "cks20"], "epsilon", 51.56),
        (["epsilon=2", "--to", "zcdp"], "rho", 2.0),
        (["rho=4.944", "--from-unit", "symdiff", "--to-unit", "hamming"], "rho", 19.776),
        (["epsilon=1", "--group", "4"], "epsilon", 4.0),
    ],
)
def test_convert(args, key, value):
    result = run("convert", *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[key] == pytest.approx(value, abs=0.005)


def test_convert_prints_figures_as_budget_does():
    """`convert` rounds as `budget` does (4 decimals), not Python's 17-digit repr of a float."""
    result = run("convert", "rho=15.29", "--to", "approx", "--delta", "1e-10")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "approx: epsilon = 51.5626, delta = 1e-10"


def test_convert_impossible_is_exit_1():
    result = CliRunner().invoke(main, ["convert", "epsilon=1", "delta=1e-6", "--to", "pure"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
