"""`dpspec infer` on the congenial and prior base measures' releases (issue 23): their likelihood's
joint normalizer against brute-force enumeration of the vectors summing to the total, and a
posterior from `infer` against the exact posterior on a tiny release."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.errors import MechanismError
from dpspec_wasserstein.likelihood import log_weights, naive_likelihoods

from .test_wasserstein import SPEC as SMALL
from .test_wasserstein import _compositions


def _brute_log_likelihood(y, c, r, alpha):
    """log P(y | c) on {sum = total}: w(y) exp(-r |y - c|_1) over the sum of the same over every vector."""
    def weight(v):
        w = math.exp(-r * sum(abs(a - b) for a, b in zip(v, c)))
        if alpha is not None:
            w *= math.prod(math.comb(v[i] + alpha[i] - 1, v[i]) if alpha[i] > 0 else float(v[i] == 0) for i in range(len(v)))
        return w
    return math.log(weight(y) / sum(weight(v) for v in _compositions(sum(y), len(y))))


@pytest.mark.parametrize("base, alpha", [("congenial", None), ("prior", [2, 1, 4, 0])])
def test_the_joint_normalizer_matches_enumeration(base, alpha):
    y = [2, 1, 3, 0]
    frame = pd.DataFrame({"county": list("abcd"), "people": y})
    params = {"cell": "county", "table": "people", "outcome": None}
    (lik,) = naive_likelihoods(params, {"counts": frame}, 0.7, None, None, base, None if alpha is None else np.array(alpha))
    truths = np.array([v for v in _compositions(6, 4)] + [(3, 3, 0, 0), (0, 0, 0, 6), (1, 1, 1, 1)])
    got = lik.logpmf(truths).sum(axis=1) + lik.joint(truths)
    for t, value in zip(truths, got):
        assert value == pytest.approx(_brute_log_likelihood(y, t, 0.7, alpha), abs=1e-9)
        assert value <= lik.log_max.sum() + lik.joint_max + 1e-12  # the rejection sampler's bound holds


def test_log_weights_are_the_dirichlet_multinomial_weights():
    w = log_weights(np.array([3, 1, 0]), 4)
    assert np.exp(w[0]) == pytest.approx([math.comb(k + 2, k) for k in range(5)])
    assert np.allclose(w[1], 0) and w[2, 0] == 0 and np.isneginf(w[2, 1:]).all()


def test_a_release_too_large_for_the_exact_normalizer_is_refused_with_the_figure():
    frame = pd.DataFrame({"county": [str(i) for i in range(67)], "people": np.full(67, 400)})
    with pytest.raises(MechanismError) as err:
        naive_likelihoods({"cell": "county", "table": "people"}, {"counts": frame}, 0.1, None, None, "congenial")
    assert "operations per posterior draw" in str(err.value)


SPEC = SMALL.replace("MECH", "wasserstein_exponential").replace("BASE", "congenial") + """release {
  output counts
  output total
}
"""


def test_infer_on_a_congenial_release_matches_the_exact_posterior(tmp_path):
    """Latent county counts (total 6 over 3 counties), `infer`'s default flat prior over the splits:
    the posterior is P(y | c) normalized over the 28 splits, enumerated here independently."""
    from dpspec.publish.output import write_result

    rows = ["county"] + ["a"] * 4 + ["b"] * 1 + ["c"] * 1
    src = tmp_path / "src"
    src.mkdir()
    (src / "people.csv").write_text("\n".join(rows) + "\n")
    (src / "s.dps").write_text(SPEC)
    out = tmp_path / "out"
    write_result(dpspec.compile(str(src / "s.dps"), seed=7), str(out))
    released = pd.read_csv(out / "counts.csv")
    y = [int(released.loc[released["county"] == c, "people"].iloc[0]) for c in "abc"]
    assert sum(y) == 6
    r = 2 / (2 * 2)  # epsilon / (2 Delta), Delta = 2 given the total
    splits = np.array(list(_compositions(6, 3)))
    post = np.exp([_brute_log_likelihood(y, c, r, None) for c in splits])
    post /= post.sum()
    rows_only = np.exp(-r * np.abs(splits - y).sum(axis=1))  # the posterior without the joint normalizer
    rows_only /= rows_only.sum()
    draws = 8000
    res = dpspec.infer(str(src / "s.dps"), str(out), "count people by county", draws=draws, seed=3, method="rejection")
    assert res.method == "rejection"
    labels = [c["cell"] for c in res.cells]
    gaps = []
    for j, county in enumerate("abc"):
        i = labels.index(f"county={county}")
        mean = splits[:, j] @ post
        tolerance = 4 * math.sqrt(splits[:, j] ** 2 @ post - mean**2) / math.sqrt(draws)
        assert abs(res.samples[:, i].mean() - mean) <= tolerance
        gaps.append(abs(splits[:, j] @ rows_only - mean) / tolerance)
    assert max(gaps) > 2  # the test can fail: leaving the normalizer out moves a mean by twice the tolerance


def test_the_prior_likelihood_rebuilds_its_concentrations_from_the_released_base():
    """The prior base's weights come from `output base` (previous counts, Z) plus prior_offset;
    without that output `infer` is told what to add."""
    from dpspec_wasserstein.plugin import WassersteinExponential

    mech = WassersteinExponential()
    params = {"cell": "county", "table": "people", "outcome": None, "base": "prior", "prior_offset": 1,
              "epsilon": 2, "outcome_share": 0.5, "sensitivity": 2}
    counts = pd.DataFrame({"county": list("abc"), "people": [3, 1, 2]})
    base = pd.DataFrame({"county": list("cab"), "people": [0, 4, 1]})

    class Spec:  # what `likelihood` reads of a spec: no public total, no class
        public, pufferfish, unit = (), None, None

    (lik,) = mech.likelihood(Spec, params, {"counts": counts, "base": base})
    truths = np.array(list(_compositions(6, 3)))
    r = 2 / (2 * 2)
    got = lik.logpmf(truths).sum(axis=1) + lik.joint(truths)
    want = [_brute_log_likelihood([3, 1, 2], t, r, [5, 2, 1]) for t in truths]
    assert np.allclose(got, want, atol=1e-9)
    with pytest.raises(MechanismError) as err:
        mech.likelihood(Spec, params, {"counts": counts})
    assert "output base" in str(err.value)


def test_a_prior_release_carries_the_previous_period_counts_as_its_base_output(tmp_path):
    from dpspec.publish.output import write_result

    text = (SMALL.replace("MECH", "wasserstein_exponential").replace("BASE", "prior\n  period: month")
            .replace("    county : category\n", "    month  : category\n    county : category\n")
            .replace('count people released "bulletin" used as total',
                     'count people by month released "bulletin" used as total\n'
                     '  count people by month, county released "last month" used as base')
            + "release {\n  output counts\n  output total\n  output base\n}\n")
    src = tmp_path / "src"
    src.mkdir()
    rows = ["month,county"] + ["m1,a"] * 4 + ["m1,b"] * 1 + ["m2,a"] * 2 + ["m2,b"] * 3 + ["m2,c"] * 1
    (src / "people.csv").write_text("\n".join(rows) + "\n")
    (src / "s.dps").write_text(text)
    write_result(dpspec.compile(str(src / "s.dps"), seed=1), str(tmp_path / "out"))
    base = pd.read_csv(tmp_path / "out" / "base.csv")
    assert dict(zip(base["county"], base["people"])) == {"a": 4, "b": 1, "c": 0}
    counts = pd.read_csv(tmp_path / "out" / "counts.csv")
    assert counts["people"].sum() == 6 and set(counts["month"]) == {"m2"}
    # infer on the period's release: last month's counts are constants (the base's concentrations
    # 4 + 1, 1 + 1, 0 + 1), the released month's counts the target; exact posterior by enumeration
    y = [int(counts.loc[counts["county"] == c, "people"].iloc[0]) for c in "abc"]
    splits = np.array(list(_compositions(6, 3)))
    post = np.exp([_brute_log_likelihood(y, c, 2 / (2 * 2), [5, 2, 1]) for c in splits])
    post /= post.sum()
    draws = 4000
    res = dpspec.infer(str(src / "s.dps"), str(tmp_path / "out"), "count people by month, county", draws=draws,
                       seed=1, method="rejection")
    labels = [c["cell"] for c in res.cells]
    assert sorted(labels) == [f"month=m2, county={c}" for c in "abc"]
    assert any("earlier period's counts" in u for u in res.used)
    for j, county in enumerate("abc"):
        i = labels.index(f"month=m2, county={county}")
        mean = splits[:, j] @ post
        tolerance = 4 * math.sqrt(splits[:, j] ** 2 @ post - mean**2) / math.sqrt(draws)
        assert abs(res.samples[:, i].mean() - mean) <= tolerance
