"""Programs: several releases of the same data composed in one ledger, with a parallel part."""

from __future__ import annotations

import json
import math
import os

from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import SPECS

PROGRAM = os.path.join(SPECS, "acs_program", "program.dps")


def test_program_total_with_parallel_part():
    result = CliRunner().invoke(main, ["budget", "--json", PROGRAM])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    # ln 3 (vision, MA) + max(ln 2 (hearing, MA), ln 3 (hearing, TX))
    assert math.isclose(summary["total"]["epsilon"], 2 * math.log(3), rel_tol=1e-12)
    groups = [r["parallel_group"] for r in summary["releases"]]
    assert groups == [None, "states", "states"]
    assert summary["total_stated"] is True and summary["bounds_hold"] is True


def test_program_bound_exceeded(tmp_path):
    text = open(PROGRAM).read().replace("budget epsilon <= 2.2", "budget epsilon <= 2")
    for name in os.listdir(os.path.dirname(PROGRAM)):
        if name != "program.dps":
            (tmp_path / name).write_text(
                open(os.path.join(os.path.dirname(PROGRAM), name))
                .read()
                .replace('"../data/acs/', f'"{SPECS}/data/acs/')
            )
    (tmp_path / "program.dps").write_text(text)
    result = CliRunner().invoke(main, ["budget", str(tmp_path / "program.dps")])
    assert result.exit_code == 1
    assert "declared epsilon <= 2: EXCEEDED" in result.output


def test_program_members_must_protect_the_same_data(tmp_path):
    base = os.path.dirname(PROGRAM)
    for name in ("ma_vision_rr.dps", "tx_hearing_rr.dps"):
        text = open(os.path.join(base, name)).read().replace('"../data/acs/', f'"{SPECS}/data/acs/')
        if name.startswith("tx"):
            text = text.replace("domain acs2019 ", "domain acs2019_tx ")
        (tmp_path / name).write_text(text)
    (tmp_path / "p.dps").write_text('program "p" { include "ma_vision_rr.dps" include "tx_hearing_rr.dps" }\n')
    result = CliRunner().invoke(main, ["budget", str(tmp_path / "p.dps")])
    assert result.exit_code == 1
    assert "the included specs protect different domains (acs2019, acs2019_tx)" in result.output
