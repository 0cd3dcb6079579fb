"""Bounded reading: devices, pipes and oversized files are refused; absurd numbers are located
SpecErrors; budget arithmetic that overflows is a clear error, never a crash or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

import dpspec
from dpspec.cli.main import main
from dpspec.errors import ConversionError, SpecError
from tests.conftest import SMALL_SPEC

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# One subprocess, capped at 1.5 GB of address space and 120 s: reading /dev/zero (as a spec, an
# include or data) would blow either limit long before it could finish.
_DEVICES = textwrap.dedent("""\
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
    from click.testing import CliRunner
    from dpspec.cli.main import main
    tmp = sys.argv[1]
    cases = {
        "spec": ["check", "/dev/zero"],
        "include": ["check", os.path.join(tmp, "program.dps")],
        "data": ["compile", os.path.join(tmp, "small.dps"), "-o", tmp + "-out"],
        "fifo": ["compile", os.path.join(tmp, "fifo.dps"), "-o", tmp + "-out2"],
    }
    for name, args in cases.items():
        r = CliRunner().invoke(main, args)
        print(name, r.exit_code, "not a regular file" in r.output, flush=True)
    """)


def test_dev_zero_as_spec_include_and_data_is_refused_in_bounded_time_and_memory(tmp_path):
    (tmp_path / "people.csv").symlink_to("/dev/zero")
    (tmp_path / "small.dps").write_text(SMALL_SPEC)
    os.mkfifo(tmp_path / "fifo.csv")
    (tmp_path / "fifo.dps").write_text(SMALL_SPEC.replace("people.csv", "fifo.csv"))
    (tmp_path / "zero.dps").symlink_to("/dev/zero")
    (tmp_path / "program.dps").write_text('program "p" {\n  include "zero.dps"\n}\n')
    driver = tmp_path / "devices.py"
    driver.write_text(_DEVICES)
    done = subprocess.run(
        [sys.executable, str(driver), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["spec 1 True", "include 1 True", "data 1 True", "fifo 1 True"]


def test_a_folder_as_spec_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code in (1, 2) and "Traceback" not in result.output


def test_an_oversized_spec_is_refused(tmp_path, monkeypatch):
    import dpspec.language.parser

    monkeypatch.setattr(dpspec.language.parser, "MAX_BYTES", 100)
    path = tmp_path / "big.dps"
    path.write_text(SMALL_SPEC)
    with pytest.raises(SpecError, match="larger than 100 bytes"):
        dpspec.load(str(path))


HUGE = {
    "5000 digits": ("age      : int 0..120", "age      : int 0.." + "9" * 5000, "5000 digits"),
    "exponent 999": ("p: 3/4", "p: 1e999", "exponent"),
    "exponent -99999999": ("p: 3/4", "p: 1e-99999999", "exponent"),
    "exponent of 5000 digits": ("p: 3/4", "p: 1e" + "9" * 5000, "exponent"),
    "long mantissa": ("p: 3/4", "p: 0." + "3" * 200, "201 digits"),
    "product beyond floats": ("p: 3/4", "p: 10^64*10^64*10^64*10^64*10^64", "too large"),
    "budget beyond floats": ("budget epsilon <= 1.1", "budget epsilon <= 1e308*10", "too large"),
    "below floats": ("p: 3/4", "p: 1e-400", "too small"),  # TopDown's sigma² = 1/(2 rho) would pass 1.8e308
    "quotient below floats": ("p: 3/4", "p: 1e-200/1e200", "too small"),
}


@pytest.mark.parametrize("name", list(HUGE))
def test_huge_numbers_are_located_spec_errors(name):
    old, new, words = HUGE[name]
    assert old in SMALL_SPEC
    with pytest.raises(SpecError) as err:
        dpspec.load(SMALL_SPEC.replace(old, new))
    assert words in str(err.value)
    line = next(i for i, text in enumerate(SMALL_SPEC.split("\n"), 1) if old in text)
    assert err.value.diagnostics[0].line == line and err.value.diagnostics[0].column


@pytest.mark.parametrize(
    "args",
    [
        ["rho=1e999"],
        ["epsilon=1e999", "--to", "zcdp"],
        ["rho=1e-99999999", "--to", "approx", "--delta", "1e-10"],
        ["epsilon=1e308", "--to", "zcdp"],
        ["mu=1e200", "--to", "approx", "--delta", "1e-10"],
        ["mu=1e300", "--to", "zcdp"],
        ["rho=" + "9" * 5000],
    ],
)
def test_budget_overflow_in_convert_is_a_clear_error(args):
    result = CliRunner().invoke(main, ["convert", *args])
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_budget_overflow_through_the_api():
    with pytest.raises(ConversionError, match="too large"):
        dpspec.convert({"rho": 10**400}, to="approx", delta=1e-10)
    with pytest.raises(ConversionError, match="too large|overflows"):  # rho = 5e615 exactly: beyond a float
        dpspec.convert({"epsilon": 1e308}, to="zcdp")


def test_a_nul_byte_in_an_include_or_data_path_is_a_user_error(tmp_path):
    from dpspec.errors import DpspecError
    from dpspec.language.parser import parse
    from dpspec.budget.program import load_program

    program = parse('program "p" {\n  include "a\x00b.dps"\n}\n', str(tmp_path / "p.dps"))
    with pytest.raises(SpecError, match="NUL byte"):
        load_program(program)
    spec = parse(SMALL_SPEC.replace("people.csv", "pe\x00ople.csv"), str(tmp_path / "s.dps"))
    with pytest.raises(DpspecError, match="NUL byte"):
        dpspec.compile(spec)


def test_a_lone_surrogate_in_api_text_is_a_located_spec_error():
    """Found by scripts/fuzz.py: verify hashed the text and crashed on a character UTF-8 cannot hold."""
    text = SMALL_SPEC.replace("p: 3/4", "p: 3/4 # caf\udce9")
    with pytest.raises(SpecError) as err:
        dpspec.load(text)
    line = next(i for i, t in enumerate(SMALL_SPEC.split("\n"), 1) if "p: 3/4" in t)
    assert "not valid Unicode" in str(err.value) and err.value.diagnostics[0].line == line


def test_topdown_without_pass_tolerance_checks_and_tiny_budgets_are_refused():
    """Found by scripts/fuzz.py at 100,000 cases: TopDown crashed when pass_tolerance was left out,
    and on rho = 1e-400 (sigma² beyond floats) while describing its allocation."""
    from dpspec.check.checker import check
    from dpspec.language.describe import describe_spec
    from dpspec.language.parser import parse

    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "specs", "pl94_production_topdown.dps"
    )
    text = open(path, encoding="utf-8").read()
    assert "  pass_tolerance: 0.1\n" in text
    spec = parse(text.replace("  pass_tolerance: 0.1\n", ""), path)
    assert check(spec).mechanism.name == "topdown"
    describe_spec(spec)
    with pytest.raises(SpecError, match="too small"):
        parse(text.replace("  rho: 293764/114921", "  rho: 1e-400"), path)
    from fractions import Fraction

    from dpspec.errors import MechanismError
    from dpspec.run.noise import discrete_gaussian_variance

    with pytest.raises(MechanismError, match="beyond floating point"):  # sigma² reached by arithmetic, not a literal
        discrete_gaussian_variance(Fraction(10**400, 3))
