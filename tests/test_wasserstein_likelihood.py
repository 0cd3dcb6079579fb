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
            w *= math.prod(
                math.comb(v[i] + alpha[i] - 1, v[i]) if alpha[i] > 0 else float(v[i] == 0) for i in range(len(v))
            )
        return w

    return math.log(weight(y) / sum(weight(v) for v in _compositions(sum(y), len(y))))


@pytest.mark.parametrize("base, alpha", [("congenial", None), ("prior", [2, 1, 4, 0])])
def test_the_joint_normalizer_matches_enumeration(base, alpha):
    y = [2, 1, 3, 0]
    frame = pd.DataFrame({"county": list("abcd"), "people": y})
    params = {"cell": "county", "table": "people", "outcome": None}
    (lik,) = naive_likelihoods(
        params, {"counts": frame}, 0.7, None, None, base, None if alpha is None else np.array(alpha)
    )
    truths = np.array([v for v in _compositions(6, 4)] + [(3, 3, 0, 0), (0, 0, 0, 6), (1, 1, 1, 1)])
    got = lik.logpmf(truths).sum(axis=1) + lik.joint(truths)
    for t, value in zip(truths, got):
        assert value == pytest.approx(_brute_log_likelihood(y, t, 0.7, alpha), abs=1e-9)
        assert value <= lik.log_max.sum() + lik.joint_max + 1e-12  # the rejection sampler's bound holds


@pytest.mark.parametrize("base, alpha", [("congenial", None), ("prior", [2, 1, 4, 1]), ("prior", [5, 1, 9, 3])])
def test_the_likelihood_is_largest_at_the_released_vector_and_the_bound_is_that_value(base, alpha):
    """Over every truth summing to the total, P(y | c) <= P(y | y) (Z(c) >= exp(-r ||y - c||) Z(y)):
    log_max_total is that value (plus a margin of about 1e-6), while the parts' bound, prod w(y),
    is looser by Z(y), by more than e^1 for the prior base here."""
    y = [2, 1, 3, 0]
    frame = pd.DataFrame({"county": list("abcd"), "people": y})
    params = {"cell": "county", "table": "people", "outcome": None}
    (lik,) = naive_likelihoods(
        params, {"counts": frame}, 0.7, None, None, base, None if alpha is None else np.array(alpha)
    )
    truths = np.array(list(_compositions(6, 4)))
    got = lik.logpmf(truths).sum(axis=1) + lik.joint(truths)
    at_y = int(np.flatnonzero((truths == y).all(axis=1))[0])
    assert got.max() == got[at_y]
    assert 0 < lik.log_max_total - got.max() < 1e-5
    assert lik.log_max_total <= lik.log_max.sum() + lik.joint_max
    if base == "prior":
        assert lik.log_max.sum() + lik.joint_max - lik.log_max_total > 1


def test_log_weights_are_the_dirichlet_multinomial_weights():
    w = log_weights(np.array([3, 1, 0]), 4)
    assert np.exp(w[0]) == pytest.approx([math.comb(k + 2, k) for k in range(5)])
    assert np.allclose(w[1], 0) and w[2, 0] == 0 and np.isneginf(w[2, 1:]).all()


def test_a_release_too_large_for_the_windowed_normalizer_is_refused_with_the_figure():
    """3,000 counties at rate 0.001: windows of 80,000 values each, 2.4e8 a draw (limit 2e7)."""
    frame = pd.DataFrame({"county": [str(i) for i in range(3000)], "people": np.full(3000, 400)})
    with pytest.raises(MechanismError) as err:
        naive_likelihoods({"cell": "county", "table": "people"}, {"counts": frame}, 0.001, None, None, "congenial")
    assert "values per posterior draw" in str(err.value) and "2.4e+08" in str(err.value)


SPEC = (
    SMALL.replace("MECH", "wasserstein_exponential").replace("BASE", "congenial")
    + """release {
  output counts
  output total
}
"""
)


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
    params = {
        "cell": "county",
        "table": "people",
        "outcome": None,
        "base": "prior",
        "prior_offset": 1,
        "epsilon": 2,
        "outcome_share": 0.5,
        "sensitivity": 2,
    }
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

    text = (
        SMALL.replace("MECH", "wasserstein_exponential")
        .replace("BASE", "prior\n  period: month")
        .replace("    county : {a, b, c}\n", "    month  : {m1, m2}\n    county : {a, b, c}\n")
        .replace(
            'count people released "bulletin" used as total',
            'count people by month released "bulletin" used as total\n'
            '  count people by month, county released "last month" used as base',
        )
        + "release {\n  output counts\n  output total\n  output base\n}\n"
    )
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
    res = dpspec.infer(
        str(src / "s.dps"),
        str(tmp_path / "out"),
        "count people by month, county",
        draws=draws,
        seed=1,
        method="rejection",
    )
    labels = [c["cell"] for c in res.cells]
    assert sorted(labels) == [f"month=m2, county={c}" for c in "abc"]
    assert any("earlier period's counts" in u for u in res.used)
    for j, county in enumerate("abc"):
        i = labels.index(f"month=m2, county={county}")
        mean = splits[:, j] @ post
        tolerance = 4 * math.sqrt(splits[:, j] ** 2 @ post - mean**2) / math.sqrt(draws)
        assert abs(res.samples[:, i].mean() - mean) <= tolerance


@pytest.mark.parametrize("alpha", [None, "prior"])
def test_the_windowed_normalizer_matches_the_exact_convolution_within_its_certified_bound(alpha):
    """A mid-size release (15 counties, total 900; the exact convolution takes 1.2e7 operations a
    draw): the windowed FFT normaliser, with its tilt, windows and certified bound, against the exact
    one, on draws near and far from the release; a window cut too short is caught by its bound."""
    from dpspec_wasserstein import likelihood as lk

    rng = np.random.default_rng(23)
    n, total = 15, 900
    a = None if alpha is None else np.concatenate([[0.0], rng.integers(1, 60, n - 1)]).astype(float)
    p = rng.dirichlet(np.ones(n) if a is None else a + 0.5)
    truth = np.array([rng.multinomial(total, p) for _ in range(6)])
    if a is not None:  # a cell with concentration 0 holds 0; another takes its count
        truth[:, 1] += truth[:, 0]
        truth[:, 0] = 0
    truth = np.vstack([truth, np.full(n, total // n), np.eye(n, dtype=np.int64)[1] * total])
    logw = np.zeros((n, total + 1)) if a is None else log_weights(a, total)
    for r in (1 / 16, 0.4):
        exact = lk.log_partition(truth, r, logw, total)
        got, bound = lk.log_partition_windowed(truth, r, a, total)
        assert np.all(bound <= lk.MAX_ERROR)
        # |log got - log exact| <= log(1 + bound), plus the exact convolution's own float rounding
        assert np.all(np.abs(got - exact) <= np.log1p(bound) + 1e-11), (r, np.abs(got - exact).max())
    # cut the windows at e^-2 of the mode: the tails are no longer negligible, and the bound says so
    from dpspec_wasserstein import windowed

    saved = windowed.WINDOW
    try:
        windowed.WINDOW = 2.0
        _, loose = windowed._solve(windowed._Law(0.4, np.ones(n) if a is None else a, total, None), truth.astype(float))
        assert loose.min() > 1e-3 and np.all(np.isfinite(loose[:6])), loose  # the bound, not a refusal
    finally:
        windowed.WINDOW = saved


def test_the_windowed_normalizer_certifies_vectors_one_count_off_a_sharp_release():
    """Rate 2.5 (epsilon 10 at sensitivity 2), prior weights, 10 counties, total 2,617: the vectors one
    count off the release, whose counties' modes cannot sum to the total (the tilt that makes them
    leaves a county balanced on its kink, a wide law; certified error 4e-3 before the saddle point,
    refused), are certified and agree with the exact convolution. A whole month at epsilon 10 needs
    them: `infer`'s proposal is built from them (docs/guides/z-pufferfish.md)."""
    from dpspec_wasserstein import likelihood as lk

    rng = np.random.default_rng(9)
    n = 10
    y = rng.integers(50, 400, n)
    a = np.maximum(1, (y * rng.uniform(0.1, 3, n)).astype(int)).astype(float)
    total = int(y.sum())
    truth = np.repeat(y[None, :], 2 * n + 1, axis=0)
    truth[1 + np.arange(n), np.arange(n)] += 1
    truth[1 + n + np.arange(n), np.arange(n)] -= 1
    got, bound = lk.log_partition_windowed(truth, 2.5, a, total)
    assert np.all(bound <= lk.MAX_ERROR)
    exact = lk.log_partition(truth, 2.5, log_weights(a, total), total)
    assert np.all(np.abs(got - exact) <= np.log1p(bound) + 1e-11), np.abs(got - exact).max()


def test_a_pennsylvania_sized_congenial_release_gets_the_windowed_normalizer():
    """67 counties, total 67,000: far beyond the exact convolution (3e11 operations a draw), so the
    windowed normaliser, whose bound the description states. With flat weights and every county far
    from 0, Z(c) = [x^N] prod_i x^(c_i) g(x) = [x^0] g(x)^67 whatever the split: the normaliser
    must give one value for very different truths (and one that differs for a county at 0)."""
    frame = pd.DataFrame({"county": [str(i) for i in range(67)], "people": np.full(67, 1000)})
    (lik,) = naive_likelihoods(
        {"cell": "county", "table": "people"}, {"counts": frame}, 1 / 16, None, None, "congenial"
    )
    assert "windowed FFT convolution" in lik.description
    truth = np.vstack(
        [np.full(67, 1000), np.r_[np.full(66, 900), 1000 + 66 * 100], np.r_[0, np.full(66, 1000 + 1000 // 66), 0][:67]]
    )
    truth[2, -1] = 67_000 - truth[2, :-1].sum()
    joint = lik.joint(truth)
    assert np.all(np.isfinite(joint)) and np.all(joint <= lik.joint_max)
    assert joint[0] == pytest.approx(joint[1], abs=1e-8)
    assert abs(joint[2] - joint[0]) > 0.1  # a county at 0 loses the values below it: Z changes
