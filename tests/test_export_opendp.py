"""`dpspec export --opendp` round trip: the exported script, run in OpenDP, gives the privacy map
dpspec's budget states for the same spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

pytest.importorskip("opendp")
ROOT = Path(__file__).resolve().parents[1]


def _native(spec) -> dict:
    result = CliRunner().invoke(main, ["budget", "--json", str(spec)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["native"]["budget"]


def _exported_map(spec, tmp_path) -> dict:
    script = tmp_path / "measurement.py"
    result = CliRunner().invoke(main, ["export", "--opendp", str(spec), "-o", str(script)])
    assert result.exit_code == 0, result.output
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


@pytest.mark.parametrize("name,p", [("acs_ma_vision_rr", None), ("flipped", "1/4")])
def test_randomized_response_round_trips_through_opendp(tmp_path, name, p):
    spec = ROOT / "specs" / "acs_ma_vision_rr.dps"
    if p is not None:  # below 1/2 OpenDP's truth probability is 1 - p: the same budget
        copy = tmp_path / "in" / "rr.dps"
        copy.parent.mkdir()
        copy.write_text(spec.read_text().replace("p: 0.75", f"p: {p}"))
        for data in spec.parent.glob("data"):
            (copy.parent / "data").symlink_to(data)
        spec = copy
    claim = _exported_map(spec, tmp_path)
    assert claim["measure"] == "MaxDivergence" and claim["d_in"] == 1
    assert claim["map"] == pytest.approx(_native(spec)["epsilon"], rel=1e-12)


@pytest.mark.parametrize("name", ["opendp_sum", "opendp_context"])  # a measurement; a Context query
def test_an_opendp_spec_round_trips_to_its_own_measurement(tmp_path, name):
    from dpspec.contract import plugins

    if "opendp" not in plugins.mechanisms():
        pytest.skip("the dpspec_opendp entry point is not installed here")
    spec = ROOT / "specs" / f"{name}.dps"
    claim = _exported_map(spec, tmp_path)
    assert claim["map"] == pytest.approx(_native(spec)["epsilon"], rel=1e-12)


def test_a_mechanism_without_an_opendp_form_is_refused_and_nothing_is_written(tmp_path):
    out = tmp_path / "x.py"
    result = CliRunner().invoke(main, ["export", "--opendp", str(ROOT / "specs" / "ma1940_swap.dps"), "-o", str(out)])
    assert result.exit_code == 1 and "no OpenDP equivalent" in result.output and "randomized_response" in result.output
    assert not out.exists()
    result = CliRunner().invoke(main, ["export", str(ROOT / "specs" / "ma1940_swap.dps")])
    assert result.exit_code == 2 and "say which format" in result.output
