"""scripts/regenerate_reports.py writes the public reports of every spec, and a rerun writes
the same bytes (so reports/ only changes in git when a spec, its data or dpspec changes)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # regenerates every bundled report

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
    """reports/ must be what the current specs, data and dpspec produce. A report whose recorded
    fingerprint (spec, baseline, includes, data, dpspec's code) matches its inputs now was made
    from exactly these inputs; the others are regenerated into a temporary directory and
    compared byte for byte, so the test costs only what changed."""
    script = _script()
    committed, specs_dir = ROOT / "reports", ROOT / "specs"
    specs = sorted(specs_dir.rglob("*.dps"))
    names = {str(p.relative_to(specs_dir)) for p in specs}
    expected = (
        {"README.md", script.FINGERPRINTS}
        | {f"{n[: -len('.dps')]}/{f}" for n in names for f in ("report.html", "report.json", "report.md")}
        | {
            f"{n[: -len('.dps')]}/infer/{f}"
            for n in names
            if script.infer_sidecar(specs_dir / n).is_file()
            for f in script.INFER_FILES
        }
    )
    current = {str(p.relative_to(committed)) for p in committed.rglob("*") if p.is_file()}
    assert current == expected, "reports/ lists other files than the specs produce: run scripts/regenerate_reports.py"
    prints = json.loads((committed / script.FINGERPRINTS).read_text())
    assert set(prints) == names, "reports/fingerprints.json is out of date: run scripts/regenerate_reports.py"
    code = script.code_digest()
    changed = [p for p in specs if prints[str(p.relative_to(specs_dir))] != script.fingerprint(p, code)]
    if not changed:
        return
    assert script.main([*map(str, changed), "--specs-dir", str(specs_dir), "--reports-dir", str(tmp_path)]) == 0
    stale = []
    for p in changed:
        rel = str(p.relative_to(specs_dir))[: -len(".dps")]
        stale += [
            str(f.relative_to(tmp_path))
            for f in (tmp_path / rel).rglob("*")
            if f.is_file() and f.read_bytes() != (committed / f.relative_to(tmp_path)).read_bytes()
        ]
    assert not stale, f"stale reports (run scripts/regenerate_reports.py): {stale[:10]}"


def test_a_fingerprint_moves_with_each_input(tmp_path):
    script = _script()
    spec = tmp_path / "s.dps"
    spec.write_text((ROOT / "specs" / "acs_ma_vision_rr.dps").read_text().replace('"data/', f'"{ROOT}/specs/data/'))
    first = script.fingerprint(spec, "code-a")
    assert script.fingerprint(spec, "code-a") == first
    assert script.fingerprint(spec, "code-b") != first
    spec.write_text(spec.read_text() + "\n# a comment\n")
    assert script.fingerprint(spec, "code-a") != first
