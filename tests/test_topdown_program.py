"""The P.L. 94-171 file as one program: production persons + housing units, total rho 2.63."""

import json
import os
from fractions import Fraction as F

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import SPECS

PROGRAM = os.path.join(SPECS, "pl94_program", "program.dps")


def _budget(path):
    return CliRunner().invoke(main, ["budget", "--json", str(path)])


def test_program_total_is_the_published_file_figure():
    result = _budget(PROGRAM)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    persons, units = 1 / F(339, 542) ** 2, F(3379, 12343) ** 2  # global_scale of each release
    rhos = [r["budget"]["rho"] for r in summary["releases"]]
    assert rhos == [pytest.approx(float(persons), rel=1e-12), pytest.approx(float(units), rel=1e-12)]
    assert summary["total"]["rho"] == pytest.approx(float(persons + units), rel=1e-12)
    assert round(summary["total"]["rho"], 2) == 2.63  # published: 2.56 persons + 0.07 units
    assert summary["bounds_hold"] is True
    # the program states its composed unit: one person with their housing-unit record
    assert any(
        "composed unit: one person (change one), with at most 1 housing_unit" in n for n in summary["ledger"]["notes"]
    )


def test_different_tables_in_a_parallel_part_are_rejected(tmp_path):
    base = os.path.dirname(PROGRAM)
    (tmp_path / "p.dps").write_text(
        'program "p" { parallel "x" { include "%s/../pl94_production_topdown.dps" '
        'include "%s/../pl94_units_topdown.dps" } }\n' % (base, base)
    )
    result = _budget(tmp_path / "p.dps")
    assert result.exit_code == 1
    assert "different units or neighbor relations (persons under hamming; units under hamming)" in result.output
