"""The everyday path is light: `dpspec --help` and `dpspec check` import neither pandas nor scipy
(timings against `import lark, attrs, click`: benchmarks/bench_startup.py). The one exception is
deliberate: `check` computes each declared budget bound, and swapping's budget depends on the
data (b, the largest stratum) and SafeTab's on its code-to-iteration mapping files (the fan-out
bound k), both read with pandas; `check --no-bounds` stays light for every spec."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = """
import sys
from dpspec.cli.main import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(",".join(sorted(m for m in ("numpy", "pandas", "scipy") if m in sys.modules)) or "none")
"""


def _heavy_modules(*args) -> str:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split("\n")[-1]


def test_help_imports_neither_pandas_nor_scipy():
    assert _heavy_modules("--help") == "none"  # nor numpy: the contract (dpspec.contract.mechanism) loads it lazily


def test_check_of_a_spec_without_arrays_imports_no_numpy():
    """Randomized response and swapping check without numpy, and so do TopDown and SafeTab: their
    schemas, budgets and pass plans need no array (numpy loads with the first one, at run time)."""
    assert (
        _heavy_modules(
            "check",
            *(
                os.path.join(ROOT, "specs", name)
                for name in ("acs_ma_vision_rr.dps", "acs_national_topdown.dps", "pl94_production_topdown.dps")
            ),
        )
        == "none"
    )
    assert (
        _heavy_modules(
            "check",
            "--no-bounds",
            *(os.path.join(ROOT, "specs", name) for name in ("ma1940_swap.dps", "safetab_p_production.dps")),
        )
        == "none"
    )


@pytest.mark.slow  # `dpspec check` in a fresh interpreter, with pandas
def test_check_reads_a_swap_specs_data_because_its_bound_depends_on_it():
    assert _heavy_modules("check", os.path.join(ROOT, "specs", "ma1940_swap.dps")) == "numpy,pandas"


def _budget_reads_data(path: str) -> bool:
    """Swapping's budget is a function of b, the size of the largest stratum in the data; SafeTab's
    of k, read from its mapping files."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return "mechanism swap" in text or "mechanism safetab" in text


# Programs with a SafeTab member: checking a program accounts every member's budget, and
# SafeTab's budget statement derives its fan-out bound k from the bundled code -> iteration
# mapping files, which it reads with pandas (a single SafeTab spec's check does not account it).
SAFETAB_PROGRAMS = ("program.dps", "program_pr.dps")


def _reads_safetab_mapping(path: str) -> bool:
    return os.path.basename(path) in SAFETAB_PROGRAMS and "census2020" in path


@pytest.mark.slow  # `dpspec check` of every bundled spec in fresh interpreters
def test_check_of_every_bundled_spec_imports_neither_pandas_nor_scipy():
    specs = sorted(p for p in glob.glob(os.path.join(ROOT, "specs", "**", "*.dps"), recursive=True))
    assert len(specs) >= 20 and any(p.endswith("program.dps") for p in specs)  # a program's check accounts its members
    light = [p for p in specs if not _reads_safetab_mapping(p)]
    assert len(light) == len(specs) - 2
    assert _heavy_modules("check", "--no-bounds", *light) == "none"
    without_data = [p for p in light if not _budget_reads_data(p)]
    assert len(without_data) < len(light)
    assert _heavy_modules("check", *without_data) == "none"


@pytest.mark.slow  # `dpspec check` of every census program in fresh interpreters
def test_a_census_program_check_loads_pandas_for_safetab_only_and_never_scipy():
    census = [p for p in glob.glob(os.path.join(ROOT, "specs", "census2020", "*.dps")) if _reads_safetab_mapping(p)]
    assert len(census) == 2
    assert _heavy_modules("check", *census) == "numpy,pandas"  # no scipy: the conversions are plain Python


@pytest.mark.slow  # fresh interpreters
def test_the_probe_would_notice_pandas():
    assert _heavy_modules("compile", "--help") == "none"
    done = subprocess.run(
        [sys.executable, "-c", "import pandas\n" + _PROBE, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip().split("\n")[-1] == "numpy,pandas"
