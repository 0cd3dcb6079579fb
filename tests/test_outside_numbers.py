"""Numbers and keys from outside (registry entries, verification results, `convert`) are read once
and exactly: a key given twice is refused naming both lines, a number that would be read as 0 or
as infinity is refused, and `convert "rho=1,epsilon=2"` is told what it did wrong."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.errors import DpspecError, SpecError
from dpspec.registry.entry import parse_entry
from dpspec.registry.importer import import_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = os.path.join(ROOT, "specs", "registry", "ddhc_a.yaml")
TEXT = open(ENTRY, encoding="utf-8").read()


def test_a_registry_key_given_twice_is_refused_naming_both_lines():
    text = TEXT.replace("      rho: 19.776\n", "      rho: 19.776\n      rho: 0.001\n")
    first = text[: text.index("rho: 19.776")].count("\n") + 1
    with pytest.raises(SpecError) as err:
        parse_entry(text, ENTRY)
    shown = str(err.value)
    assert "'rho' is given twice" in shown and f"line {first}" in shown and f"line {first + 1}" in shown, shown


@pytest.mark.parametrize("number", ["1.0e-400", "1.0e+999"])
def test_a_registry_number_that_would_change_meaning_is_refused(number):
    with pytest.raises(SpecError, match="too (small|large) to compute with"):
        parse_entry(TEXT.replace("rho: 19.776", f"rho: {number}"), ENTRY)


def test_a_registry_decimal_is_imported_exactly():
    text = TEXT.replace("rho: 19.776", "rho: 19.7760000000000000000001")
    spec = import_text(parse_entry(text, ENTRY))
    assert "19.7760000000000000000001" in spec, spec  # not the nearest double, 19.776


def test_a_verification_result_with_a_key_twice_is_refused(tmp_path):
    from dpspec.verify.miniature import VerifyError
    from dpspec.verify.result import load_json

    path = tmp_path / "v.json"
    path.write_text('{\n  "verdict": "refuted",\n  "runs": 10,\n  "verdict": "consistent"\n}\n')
    with pytest.raises(VerifyError, match=r"'verdict' is given twice.*lines 2 and 4"):
        load_json(str(path))


def test_an_oversized_verification_result_is_called_oversized(tmp_path):
    from dpspec.verify.miniature import VerifyError
    from dpspec.verify.result import MAX_RESULT_BYTES, load_json

    path = tmp_path / "v.json"
    path.write_text('{"verdict": "' + "x" * (MAX_RESULT_BYTES + 10) + '"}')
    with pytest.raises(VerifyError, match="larger than"):
        load_json(str(path))


@pytest.mark.parametrize("args", [["rho=1e-9999"], ["epsilon=1e-400"], ["rho=1", "--delta", "1e-9999"]])
def test_convert_refuses_a_number_read_as_zero(args):
    res = CliRunner().invoke(main, ["convert", *args, "--to", "approx"])
    assert res.exit_code in (1, 2) and "too small" in res.output and "= 0.0" not in res.output, res.output


def test_convert_with_two_parameters_in_one_argument_says_so():
    res = CliRunner().invoke(main, ["convert", "rho=1,epsilon=2"])
    assert res.exit_code == 2 and "more than one parameter" in res.output and "rho=1 epsilon=2" in res.output, (
        res.output
    )
    assert "exponent" not in res.output


def test_the_api_refuses_an_exact_number_that_a_float_reads_as_zero():
    from dpspec.budget import convert_request

    with pytest.raises(DpspecError, match="too small"):
        convert_request({"rho": Fraction(1, 10**400)}, to="approx", delta=1e-10)
    assert json.loads(json.dumps(convert_request({"rho": "0.5"}, to="approx", delta=1e-10)))["epsilon"] > 0
