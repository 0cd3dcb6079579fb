"""`dpspec verify` on SafeTab: the production designs are consistent on a miniature geography,
and SafeTab drawing discrete Gaussian noise at half the variance its budget needs is refuted."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np
import pytest
from dpspec_safetab.plugin import SafeTab

import dpspec
from dpspec.api import check, make_rng
from dpspec.verify import verify
from tests.verify_helpers import registered

ROOT = Path(__file__).resolve().parents[1]
P_SPEC = ROOT / "specs" / "safetab_p_production.dps"
H_SPEC = ROOT / "specs" / "safetab_h_production.dps"


class HalfVarianceSafeTab(SafeTab):
    """Claims the production budget, but every noise variance is half what that budget needs."""

    name = "safetab_half"

    def noise_sigma2(self, fanout, rho):
        return super().noise_sigma2(fanout, rho) / 2


def _variant(tmp_path, spec: Path, relation=None, mechanism=None) -> str:
    text = spec.read_text().replace('"data/', f'"{ROOT}/specs/data/')
    if relation:
        text = text.replace("unit persons : hamming", f"unit persons : {relation}")
    if mechanism:
        text = text.replace("mechanism safetab {", f"mechanism {mechanism} {{")
    path = tmp_path / f"{spec.stem}_{relation}_{mechanism}.dps"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("spec", [P_SPEC, H_SPEC], ids=["safetab-p", "safetab-h"])
def test_production_designs_are_consistent_on_a_miniature_geography(spec):
    result = verify(dpspec.load(str(spec)), runs=4000, seed=21)
    assert result.verdict == "consistent" and result.path == "mechanism", result.text()
    assert result.flavor["premetric"] == "zcdp" and result.flavor["relation"] == "hamming"
    # the miniature design's native rho is 1/4 per added or removed record: 1 per changed one
    assert math.isclose(result.claimed, 1.0)
    assert 0.05 < result.lower_bound <= 1.0  # informative, and not above the claim
    (pair,) = result.pairs
    assert "miniature design at rho x" in pair.label


@pytest.mark.slow  # verifies SafeTab over many runs, twice
def test_half_the_noise_variance_is_refuted_and_honest_noise_is_not(tmp_path):
    """Under add/remove, removing a person who reaches the whole fan-out k = 3 costs exactly
    the claimed rho = 1/2; at half the variance it costs 1."""
    with registered(HalfVarianceSafeTab()):
        honest = verify(dpspec.load(_variant(tmp_path, P_SPEC, "symdiff")), runs=100_000, seed=22)
        broken = verify(dpspec.load(_variant(tmp_path, P_SPEC, "symdiff", "safetab_half")), runs=100_000, seed=22)
    assert honest.verdict == "consistent", honest.text()
    assert math.isclose(honest.claimed, 0.5) and honest.lower_bound <= 0.5
    assert broken.verdict == "refuted", broken.text()
    assert 0.5 < broken.lower_bound <= 1.0


def test_the_transcript_s_likelihood_ratio_has_the_gaussian_mean():
    """For a removed person the statistic (log P_right / P_left of the transcript) has mean
    -rho_eff on the left and +rho_eff on the right with rho_eff = the pair's loss (1/2 here):
    the miniature reaches the full fan-out at every measured level."""
    import dpspec_safetab.neighbours as nb

    spec = dpspec.load(str(P_SPEC))
    sym = attrs.evolve(spec, unit=attrs.evolve(spec.unit, relation="symdiff"))
    checked = check(sym)
    (pair,) = nb.safetab_pairs(checked.mechanism, sym, checked.params)
    rng = make_rng(5)
    left = pair.batch(pair.left, 40_000, rng)[:, 0]
    right = pair.batch(pair.right, 40_000, rng)[:, 0]
    # E[llr] = -KL = -rho on the left, +rho on the right; var = 2 rho (Gaussian shift)
    assert abs(left.mean() + 0.5) < 0.03 and abs(right.mean() - 0.5) < 0.03
    assert abs(np.var(left) - 1.0) < 0.08
