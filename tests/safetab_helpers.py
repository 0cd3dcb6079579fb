"""Helpers for SafeTab's tests: variants of the bundled production specs with one edit, their
data paths made absolute so the variant can live in a temporary directory."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P_SPEC = ROOT / "specs" / "safetab_p_production.dps"
H_SPEC = ROOT / "specs" / "safetab_h_production.dps"


def variant(tmp_path, old: str, new: str, spec=P_SPEC) -> Path:
    text = spec.read_text().replace('"data/', f'"{ROOT}/specs/data/')
    assert old in text
    path = tmp_path / "variant.dps"
    path.write_text(text.replace(old, new, 1))
    return path
