"""scripts/regenerate_reports.py writes the public reports of every spec, and a rerun writes
the same bytes (so reports/ only changes in git when a spec, its data or dpspec changes)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("regenerate_reports", ROOT / "scripts" / "regenerate_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regenerate_is_public_only_and_deterministic(tmp_path):
    script = _script()
    names = ["added_invariants.dps", "undeclared_invariants.dps", "uncomposed.dps"]
    args = [str(ROOT / "specs" / "audit" / n) for n in names] + ["--reports-dir", str(tmp_path / "a")]
    assert script.main(args) == 0
    args[-1] = str(tmp_path / "b")
    assert script.main(args) == 0
    for name in names:
        stem = name[: -len(".dps")]
        a, b = tmp_path / "a" / "audit" / stem, tmp_path / "b" / "audit" / stem
        assert sorted(p.name for p in a.iterdir()) == ["report.html", "report.json", "report.md"]
        for f in a.iterdir():
            assert f.read_bytes() == (b / f.name).read_bytes(), f
    compared = json.loads((tmp_path / "a" / "audit" / "added_invariants" / "report.json").read_text())
    assert compared["comparison"] is not None  # the .baseline.dps next to it was used


def test_reports_directory_is_current(tmp_path):
    """reports/ must be what the current specs, data and dpspec produce: regenerate every
    report into a temporary directory and compare byte for byte."""
    script = _script()
    assert script.main(["--reports-dir", str(tmp_path)]) == 0
    committed = ROOT / "reports"
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    current = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    assert fresh == current, "reports/ lists other files than the specs produce: run scripts/regenerate_reports.py"
    stale = [str(p) for p in fresh if (tmp_path / p).read_bytes() != (committed / p).read_bytes()]
    assert not stale, f"stale reports (run scripts/regenerate_reports.py): {stale[:10]}"
