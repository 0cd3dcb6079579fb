"""Compile end to end: outputs, manifest, reports, atomic writes, inputs untouched."""

from __future__ import annotations

import hashlib
import json
import os

import pandas as pd
from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import SPECS


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_compile_writes_release_manifest_and_reports(small_spec, tmp_path):
    data = small_spec.parent / "people.csv"
    before = _digest(data)
    mtime = os.stat(data).st_mtime_ns
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    files = set(os.listdir(out))
    assert {"responses.csv", "estimate.csv", "manifest.json", "report.html", "report.md", "report.json"} <= files
    assert not [f for f in files if f.startswith(".tmp-")]
    responses = pd.read_csv(out / "responses.csv", dtype=str)
    assert len(responses) == 5 and set(responses["smoker"]) <= {"True", "False"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["sha256"] == hashlib.sha256(small_spec.read_bytes()).hexdigest()
    assert manifest["data"]["people.csv"]["sha256"] == before
    assert manifest["mechanism"]["name"] == "randomized_response"
    assert manifest["mechanism"]["version"] == "1.0.0"
    assert manifest["seed_policy"]["seeded"] is False
    assert manifest["outputs"]["responses"] == {"file": "responses.csv", "rows": 5}
    # Inputs are only read.
    assert _digest(data) == before and os.stat(data).st_mtime_ns == mtime


def test_seeded_compile_is_reproducible_and_says_so(small_spec, tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(out), "--seed", "42"])
        # A known seed voids the protection: the audit's finding is critical, so the exit is 1,
        # but the (test) release is still written.
        assert result.exit_code == 1, result.output
        assert "known seed" in result.output and "[critical] known-seed" in result.output
        outs.append((out / "responses.csv").read_text())
    assert outs[0] == outs[1]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["seed_policy"]["seeded"] is True and "NOT protected" in manifest["seed_policy"]["warning"]


def test_bound_exceeded_fails_compile(small_spec, tmp_path):
    small_spec.write_text(small_spec.read_text().replace("budget epsilon <= 1.1", "budget epsilon <= 1"))
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "EXCEEDED" in result.output


def test_data_error_is_reported_without_traceback(small_spec, tmp_path):
    (small_spec.parent / "people.csv").write_text("region,district,age,smoker,status\nnorth,n1,999,true,N\n")
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "column 'age': 1 values outside 0..120: row 1: '999'" in result.output
    assert not (tmp_path / "o").exists()


def test_bundled_quick_start_spec_compiles(tmp_path):
    spec = os.path.join(SPECS, "acs_ma_vision_rr.dps")
    result = CliRunner().invoke(main, ["compile", spec, "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    estimate = pd.read_csv(tmp_path / "o" / "estimate.csv")
    assert estimate["n"].iloc[0] == 7634


def test_randomness_is_chacha20_from_os_entropy_unless_seeded():
    from randomgen import ChaCha

    from dpspec.run.compiler import make_rng

    a, b = make_rng(None), make_rng(None)
    assert isinstance(a.bit_generator, ChaCha)
    assert a.bit_generator.state["state"]["rounds"] == 20
    assert not (a.integers(0, 2**62, 8) == b.integers(0, 2**62, 8)).all()
    assert (make_rng(7).integers(0, 2**62, 8) == make_rng(7).integers(0, 2**62, 8)).all()


def test_the_compile_result_is_frozen_and_the_audit_makes_a_new_one(small_spec):
    """No step after the run (the audit, --allow-critical, a verification finding) changes a result
    a reader already holds: each makes a new one."""
    import attrs
    import pytest

    import dpspec

    result = dpspec.compile(str(small_spec), seed=1)
    assert attrs.has(type(result)) and type(result).__attrs_attrs__ and result.audit_outcome is not None
    for name, value in (("findings", []), ("allowed_critical", ("x",)), ("engine", "spark"), ("utility", {})):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(result, name, value)
    assert result.findings == list(result.audit_outcome.findings) and result.engine == "local"
    assert result.started_at is not None and result.finished_at is not None
