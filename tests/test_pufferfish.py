"""Z-Pufferfish in the language and the budget calculus (seed 2; issue 23): the class of
distributions, Wasserstein sensitivities against closed forms computed independently here, the
budget statement, and bad input at the spec line."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction

import numpy as np
import pytest

import dpspec
from dpspec.budget import pufferfish as pf
from dpspec.budget.budget_report import budget_summary
from dpspec.check.checker import check
from dpspec.errors import SpecError
from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "..", "specs", "pa_covid")

SMALL = """spec "small"
domain d {
  table people unit person {
    county : {a, b, c}
  }
}
public {
  count people released "bulletin" used as total
}
pufferfish {
  class CLASS
}
unit people : symdiff
premetric pure
mechanism wasserstein_exponential {
  table: people
  cell: county
  epsilon: 2
  base: congenial
}
budget epsilon <= 2
"""


def small(cls="independent", **replace):
    text = SMALL.replace("CLASS", cls)
    for a, b in replace.items():
        text = text.replace(a, b)
    return text


# ---- closed forms -----------------------------------------------------------------------


def _w_inf_by_cdf_shifts(p: dict, q: dict) -> int:
    """W_inf on the integers, exactly: the least d with F_P(k) <= F_Q(k + d) and F_Q(k) <= F_P(k + d)
    for every k (Strassen's theorem for the inf-transport on the line), in rational arithmetic."""
    support = sorted(set(p) | set(q))
    lo, hi = support[0], support[-1]

    def cdf(m, k):
        return sum(v for x, v in m.items() if x <= k)

    for d in range(0, hi - lo + 1):
        if all(cdf(p, k) <= cdf(q, k + d) and cdf(q, k) <= cdf(p, k + d) for k in range(lo, hi + 1)):
            return d
    return hi - lo


def _binomial(n, q):
    return {k: Fraction(math.comb(n, k)) * q**k * (1 - q) ** (n - k) for k in range(n + 1)}


@pytest.mark.parametrize(
    "n, q0, q1",
    [
        (5, Fraction(1, 2), Fraction(1, 2)),
        (5, Fraction(1, 5), Fraction(4, 5)),
        (6, Fraction(1, 10), Fraction(1, 2)),
        (4, Fraction(0), Fraction(1)),
        (7, Fraction(3, 10), Fraction(2, 5)),
    ],
)
def test_one_count_under_the_section_4_4_family_matches_an_exact_computation(n, q0, q1):
    given_one = {k + 1: v for k, v in _binomial(n - 1, q1).items()}
    given_zero = _binomial(n - 1, q0)
    exact = _w_inf_by_cdf_shifts(given_one, given_zero)
    assert pf.dependent_count_sensitivity(n, q0, q1) == exact
    if q0 == q1:
        assert exact == 1  # independence: the DP sensitivity (Lemma 12)
    if (q0, q1) == (0, 1):
        assert exact == n  # the most extreme dependence: the whole group


def test_the_dependence_class_takes_the_worst_member_and_grows_with_dependence():
    c = lambda p0, p1: parse(small(f"dependence p0 {p0} p1 {p1} n 50")).pufferfish
    values = [
        pf.count_sensitivity(c(Fraction(1, 2) - d, Fraction(1, 2) + d))
        for d in map(Fraction, ("0", "0.1", "0.2", "0.3", "0.5"))
    ]
    assert values[0] == 1 and values == sorted(values) and values[-1] == 50
    assert pf.count_sensitivity(parse(small()).pufferfish) == 1
    assert pf.cell_counts_sensitivity(parse(small()).pufferfish, total_in_z=True) == 2


def _conditional_slope(n, sigma2, tau, gamma, omega):
    """d E[mean(X) | X_j = x, Z] / dx from the full joint covariance (independent of the module)."""
    cov = np.full((n + 1, n + 1), tau, dtype=float)
    np.fill_diagonal(cov, sigma2)
    cov[n, :n] = cov[:n, n] = gamma
    cov[n, n] = omega
    given = [0, n]
    mean_row = cov[:n, given].mean(axis=0)
    coef = np.linalg.solve(cov[np.ix_(given, given)], mean_row)
    return coef[0]


@pytest.mark.parametrize(
    "n, sigma2, tau, gamma, omega",
    [
        (10, "1", "0", "0", "1"),
        (10, "1", "0.3", "0", "2"),
        (25, "2", "0.5", "0.7", "1.5"),
        (4, "1", "0.2", "-0.4", "1"),
    ],
)
def test_example_1_normal_mean_sensitivity_matches_the_conditional_normal(n, sigma2, tau, gamma, omega):
    r = Fraction(2)
    moments = [Fraction(v) for v in (sigma2, tau, gamma, omega)]
    expected = abs(float(r) * _conditional_slope(n, *map(float, moments)))
    got = pf.normal_mean_sensitivity(n, r, *moments)
    assert isinstance(got, Fraction) and math.isclose(got, expected, rel_tol=1e-12)
    if moments[1] == moments[2] == 0:
        assert got == r / n  # independence: the DP exponential mechanism's sensitivity


def test_w_inf_of_shifted_and_reflected_laws():
    k = np.arange(10)
    pmf = [3 ** (10 - int(v)) for v in k]
    assert pf.w_inf_discrete(k, pmf, k + 3, pmf) == 3
    assert pf.w_inf_discrete(k, pmf, k, pmf) == 0
    assert pf.w_inf_discrete(k, pmf, 9 - k, pmf) == 9


# ---- the language -------------------------------------------------------------------------


def test_the_block_parses_formats_and_round_trips():
    spec = parse(small("dependence p0 0.1 p1 0.9 n 20"))
    assert spec.pufferfish.kind == "dependence" and spec.pufferfish.option("p1") == Fraction(9, 10)
    assert spec.public[0].use == "total"
    again = parse(format_spec(spec))
    assert again.pufferfish == spec.pufferfish and again.public == spec.public


def test_specs_without_the_block_are_unchanged_lemma_8():
    text = small().replace("pufferfish {\n  class independent\n}\n", "").replace(" used as total", "")
    spec = parse(text)
    assert spec.pufferfish is None and spec.public[0].use is None
    from dpspec.language.describe import notation

    assert "-DP(" in notation(spec)


@pytest.mark.parametrize(
    "cls, words",
    [
        ("arbitrary", "no finite guarantee"),
        ("dependence p0 0.1 n 5", "needs 'p1'"),
        ("dependence p0 0.1 p1 1.5 n 5", "must lie in [0, 1]"),
        ("independant", "class of distributions"),
    ],
)
def test_bad_classes_are_errors_at_the_spec_line(cls, words):
    with pytest.raises(SpecError) as err:
        check(parse(small(cls)))
    d = err.value.diagnostics[0]
    assert words in d.message and d.line == 11


def test_arbitrary_dependence_says_no_free_lunch_in_words():
    with pytest.raises(SpecError) as err:
        check(parse(small("arbitrary")))
    d = err.value.diagnostics[0]
    assert "no free lunch" in d.message and "class independent" in d.hint


def test_an_unknown_use_of_public_information_is_an_error():
    with pytest.raises(SpecError) as err:
        check(parse(small(**{"used as total": "used as totl"})))
    assert err.value.diagnostics[0].line == 8


def test_a_congenial_base_without_a_total_in_z_is_refused():
    with pytest.raises(SpecError) as err:
        check(parse(small(**{" used as total": ""})))
    assert "used as total" in err.value.diagnostics[0].message


# ---- the budget statement -------------------------------------------------------------------


def test_show_answers_with_z_and_the_class():
    from dpspec.language.describe import describe_spec

    text = describe_spec(parse(small("dependence p0 0.2 p1 0.8 n 30")))
    assert "Z-Pufferfish" in text and "class=dependence(p0=0.2, p1=0.8, n=30)" in text
    assert "between 0.2 and 0.8" in text and "the mechanism uses it as its total" in text


def test_show_says_a_base_is_the_earlier_periods_counts():
    from dpspec.language.describe import describe_spec

    text = describe_spec(dpspec.load(os.path.join(CASE, "wasserstein_prior_high_privacy.dps")))
    assert "the mechanism uses it as its base: its counts of the periods before the released one" in text


def test_budget_json_carries_both_sensitivities_and_the_assumptions(tmp_path):
    path = tmp_path / "s.dps"
    path.write_text(small())
    summary = budget_summary(dpspec.load(str(path)))
    json.dumps(summary)
    sens = summary["pufferfish"]["sensitivity"]["counts"]
    assert sens["wasserstein"] == 2 and sens["dp"] == 1
    assert "conditionally independent" in summary["pufferfish"]["composition"]
    assert summary["budget"]["epsilon"] == 2 and summary["bounds_hold"]
    # the Section 4.4 class at strong dependence: the same mechanism, the honest budget is larger
    path.write_text(small("dependence p0 0.1 p1 0.9 n 10").replace("epsilon: 2", "epsilon: 2\n  sensitivity: 2"))
    summary = budget_summary(dpspec.load(str(path)))
    counts = summary["pufferfish"]["sensitivity"]["counts"]
    w = counts["wasserstein"]
    # given the total, the class's exact supremum 2 (1 + 8) (tests/test_pufferfish_given_total.py), below 2n
    assert w == 18 and counts["certified"] is True and "exact supremum" in counts["derivation"]
    assert math.isclose(summary["budget"]["epsilon"], 2 * w / 2) and not summary["bounds_hold"]


def test_the_case_study_specs_check():
    for name in sorted(os.listdir(CASE)):
        if name.endswith(".dps"):
            check(dpspec.load(os.path.join(CASE, name)))


# ---- the audit ----------------------------------------------------------------------------


def _audit(tmp_path, text, baseline=None):
    from dpspec.audit import audit

    path = tmp_path / "a.dps"
    path.write_text(text)
    base = None
    if baseline is not None:
        (tmp_path / "b.dps").write_text(baseline)
        base = dpspec.load(str(tmp_path / "b.dps"))
    return audit(dpspec.load(str(path)), baseline=base, compute_budget=False)


def test_the_audit_names_the_class_and_flags_a_guarantee_conditional_on_independence(tmp_path):
    findings = {f.rule: f for f in _audit(tmp_path, small()).findings}
    f = findings["pufferfish-class"]
    assert f.severity == "warning" and "conditional on independence" in f.message
    dep = {f.rule: f for f in _audit(tmp_path, small("dependence p0 0.2 p1 0.8 n 30")).findings}["pufferfish-class"]
    assert dep.severity == "info" and "between 0.2 and 0.8" in dep.message


def test_the_audit_compares_block_by_block_with_a_dp_baseline(tmp_path):
    dp = (
        small()
        .replace("pufferfish {\n  class independent\n}\n", "")
        .replace('public {\n  count people released "bulletin" used as total\n}\n', "")
        .replace("base: congenial", "base: naive")
    )
    findings = {f.rule: f for f in _audit(tmp_path, small(), dp).findings}
    f = findings["pufferfish-vs-dp"]
    for block in (
        "domain:",
        "multiverse:",
        "unit:",
        "premetric:",
        "budget:",
        "public information:",
        "class of distributions:",
    ):
        assert block in f.message
    assert "count people" in f.evidence["public_not_in_baseline"]
    # the budget row compares figures in one currency; the finding says an equal figure is not equal protection
    assert "an equal figure protects less than the DP baseline's" in f.message
    # a DP spec audited against itself says nothing of the kind
    assert "pufferfish-vs-dp" not in {f.rule for f in _audit(tmp_path, dp, dp).findings}


def test_the_bundled_case_study_specs_audit_against_their_bundled_dp_baseline():
    """specs/pa_covid/baseline/dp_high_privacy.dps is the case study's DP baseline (no Z, no
    class): each Wasserstein and post-processing spec of the case study audits against it, block
    by block, naming the public statistics the baseline lacks and the class as an assumption."""
    from pathlib import Path

    from dpspec.audit import audit

    specs = Path(__file__).resolve().parents[1] / "specs" / "pa_covid"
    baseline = dpspec.load(str(specs / "baseline" / "dp_high_privacy.dps"))
    assert "pufferfish-vs-dp" not in {f.rule for f in audit(baseline, baseline=baseline, compute_budget=False).findings}
    for name in ("wasserstein_congenial_high_privacy", "wasserstein_prior_high_privacy", "postprocessing_high_privacy"):
        findings = {
            f.rule: f
            for f in audit(dpspec.load(str(specs / f"{name}.dps")), baseline=baseline, compute_budget=False).findings
        }
        f = findings["pufferfish-vs-dp"]
        assert "count cases by month" in f.evidence["public_not_in_baseline"], name
        assert "independent" in f.message and "the DP baseline holds for every distribution" in f.message, name
        assert findings["pufferfish-class"].severity == "warning", name


def test_a_program_states_the_conditional_independence_lemma_6_assumes(tmp_path):
    from dpspec.budget.program import program_summary

    (tmp_path / "a.dps").write_text(small().replace('spec "small"', 'spec "a"'))
    dp = (
        small()
        .replace('spec "small"', 'spec "b"')
        .replace("pufferfish {\n  class independent\n}\n", "")
        .replace('public {\n  count people released "bulletin" used as total\n}\n', "")
        .replace("base: congenial", "base: naive")
    )
    (tmp_path / "b.dps").write_text(dp)
    (tmp_path / "p.dps").write_text('program "p" {\n  include "a.dps"\n  include "b.dps"\n}\nbudget epsilon <= 4\n')
    summary = program_summary(dpspec.load(str(tmp_path / "p.dps")))
    notes = " ".join(summary["ledger"]["notes"])
    assert "Lemma 6" in notes and "conditionally independent given the data and Z" in notes
    assert "every release's class" in notes and summary["total"]["epsilon"] == 4


def test_a_program_of_parallel_pufferfish_releases_states_lemma_7(tmp_path):
    """Releases of disjoint parts (two months, say) in a `parallel` group compose by Lemma 7; the
    note says so, and the sequential assumption of Lemma 6 beside it."""
    from dpspec.budget.program import program_summary

    for name in ("a", "b"):
        (tmp_path / f"{name}.dps").write_text(small().replace('spec "small"', f'spec "{name}"'))
    (tmp_path / "p.dps").write_text(
        'program "p" {\n  parallel "months" { include "a.dps"  include "b.dps" }\n}\nbudget epsilon <= 2\n'
    )
    summary = program_summary(dpspec.load(str(tmp_path / "p.dps")))
    notes = " ".join(summary["ledger"]["notes"])
    assert "2 of the releases are epsilon-Z-Pufferfish guarantees (class independent)" in notes
    assert "compose by Lemma 7" in notes and "Lemma 6" in notes
    assert summary["total"]["epsilon"] == 2


def test_post_processing_calibrates_its_noise_to_the_vector_given_the_total(tmp_path):
    """The noise is added to the count vector before the post-processing, so given the total in Z a
    pair moves that vector by the class's vector sensitivity (2 under independence: one unit moved
    between cells), not by the DP sensitivity 1; the noise scale is calibrated to it and epsilon
    stays the Z-Pufferfish budget. Without a pufferfish block it is a DP spec (Lemma 8)."""
    path = tmp_path / "pp.dps"
    text = (
        small()
        .replace("mechanism wasserstein_exponential", "mechanism noisy_postprocessed")
        .replace("  base: congenial\n", "")
    )
    path.write_text(text)
    summary = budget_summary(dpspec.load(str(path)))
    counts = summary["pufferfish"]["sensitivity"]["counts"]
    assert summary["budget"]["epsilon"] == 2 and counts["wasserstein"] == 2 and counts["dp"] == 1
    path.write_text(text.replace("class independent", "class dependence p0 0.2 p1 0.6 n 10"))
    summary = budget_summary(dpspec.load(str(path)))
    exact = pf.dependence_given_total(Fraction(1, 5), Fraction(3, 5), 10)
    assert exact.certified and 2 < exact.value < 20
    assert summary["budget"]["epsilon"] == 2
    assert summary["pufferfish"]["sensitivity"]["counts"]["wasserstein"] == float(exact.value)
    assert summary["pufferfish"]["sensitivity"]["counts"]["certified"] is True


# ---- the vector loss given the total under the dependence class ----------------------------


def _exact_member(group, q0, q1, rest, p):
    """Independent of `vector_given_total_sensitivity`: enumerate every assignment of the secrets of
    the group's others and of the rest (exact rationals), condition on each total, and take the
    least d with F1(k) <= F0(k + d) and F0(k) <= F1(k + d) for the count in the unit's cell."""
    import itertools

    best = 0
    for t in range(group + rest + 1):
        laws = {}
        for x, q in ((1, q1), (0, q0)):
            law = {}
            for bits in itertools.product((0, 1), repeat=group - 1 + rest):
                if x + sum(bits) != t:
                    continue
                k = sum(bits[: group - 1])
                w = q**k * (1 - q) ** (group - 1 - k) * p ** (t - x - k) * (1 - p) ** (rest - (t - x - k))
                law[x + k] = law.get(x + k, 0) + w
            laws[x] = law
        if not laws[1] or not laws[0]:
            continue
        s1, s0 = sum(laws[1].values()), sum(laws[0].values())
        cdf = lambda law, s, k: sum(v for key, v in law.items() if key <= k) / s  # noqa: E731
        d = next(
            d
            for d in range(group + 1)
            if all(
                cdf(laws[1], s1, k) <= cdf(laws[0], s0, k + d) and cdf(laws[0], s0, k) <= cdf(laws[1], s1, k + d)
                for k in range(-1, group + 1)
            )
        )
        best = max(best, 2 * d)  # same total: the vectors are 2 |difference in the unit's cell| apart
    return best


@pytest.mark.parametrize(
    "group, q0, q1, rest, p",
    [
        (3, Fraction(1, 20), Fraction(3, 10), 8, Fraction(1, 2)),
        (3, Fraction(3, 10), Fraction(1, 20), 6, Fraction(1, 10)),
        (4, Fraction(1, 2), Fraction(1, 2), 5, Fraction(1, 3)),
        (2, Fraction(1, 10), Fraction(9, 10), 7, Fraction(4, 5)),
        (3, Fraction(1, 5), Fraction(4, 5), 0, Fraction(1, 2)),
    ],
)
def test_the_vector_loss_given_the_total_matches_enumeration(group, q0, q1, rest, p):
    got = pf.vector_given_total_sensitivity(group, q0, q1, rest, p)
    assert got == _exact_member(group, q0, q1, rest, p)
    assert got <= 2 * group  # the bound the class uses


def test_given_the_total_the_dependence_class_can_exceed_twice_the_count_sensitivity():
    """Conditioning on a public total can push the two secrets' laws apart: twice the count's
    own sensitivity, the value used before, understates this member, so the class uses 2n;
    independence (p0 = p1) stays at exactly 2."""
    member = pf.vector_given_total_sensitivity(3, Fraction(1, 20), Fraction(3, 10), 40, Fraction(1, 10))
    assert member == 6 > 2 * pf.dependent_count_sensitivity(3, Fraction(1, 20), Fraction(3, 10)) == 4
    c = parse(small("dependence p0 0.05 p1 0.3 n 3")).pufferfish
    assert pf.cell_counts_sensitivity(c, True) == 6 >= member
    assert pf.cell_counts_sensitivity(parse(small("dependence p0 0.3 p1 0.3 n 3")).pufferfish, True) == 2
    assert pf.cell_counts_sensitivity(parse(small("independent")).pufferfish, True) == 2
    for rest in (0, 1, 4, 12):  # every member at or below the independence value when p0 = p1
        assert pf.vector_given_total_sensitivity(4, Fraction(3, 10), Fraction(3, 10), rest, Fraction(3, 5)) <= 2


# ---- Example 4: a count whose release satisfies SDL measures (Z) ------------------------------


def _quantile_w_inf(law_a, law_b):
    """sup over u of |F_a^-1(u) - F_b^-1(u)|, walking both quantile functions over the merged
    cumulative levels (exact rationals): independent of the CDF criterion `w_inf_exact` uses."""

    def steps(law):
        total, acc, out = sum(law.values()), Fraction(0), []
        for v in sorted(law):
            acc += law[v] / total
            out.append((acc, v))
        return out

    a, b = steps(law_a), steps(law_b)
    i = j = 0
    worst = 0
    while i < len(a) and j < len(b):
        worst = max(worst, abs(a[i][1] - b[j][1]))
        if a[i][0] < b[j][0]:
            i += 1
        elif b[j][0] < a[i][0]:
            j += 1
        else:
            i, j = i + 1, j + 1
    return worst


@pytest.mark.parametrize(
    "n, k, t, ref",
    [
        (8, 2, None, None),
        (8, 2, Fraction(1, 4), Fraction(1, 2)),
        (9, 3, Fraction(1, 3), Fraction(1, 3)),
        (8, 1, None, None),
    ],
)
@pytest.mark.parametrize("theta", [Fraction(1, 5), Fraction(1, 2), Fraction(7, 10)])
def test_example_4_sdl_count_sensitivity_matches_enumeration(n, k, t, ref, theta):
    """Every binary dataset of n records, kept when its count satisfies k-anonymity and t-closeness,
    split by record j's value: the W_inf of the two conditional laws of the count."""
    import itertools

    laws = {0: {}, 1: {}}
    for bits in itertools.product((0, 1), repeat=n):
        total = sum(bits)
        cells_ok = all(c == 0 or c >= k for c in (total, n - total))
        close_ok = t is None or abs(Fraction(total, n) - ref) <= t
        if cells_ok and close_ok:
            w = theta**total * (1 - theta) ** (n - total)
            laws[bits[0]][total] = laws[bits[0]].get(total, 0) + w
    expected = _quantile_w_inf(laws[1], laws[0]) if laws[0] and laws[1] else None
    assert pf.sdl_count_sensitivity(n, theta, k, t, ref) == expected


def test_example_4_sdl_restricts_the_pairs_not_the_sensitivity():
    """Admissible counts forming an interval keep the DP sensitivity 1 for every theta (the paper's
    claim); k-anonymity that admits an empty cell leaves a gap of k, and the value jumps to k;
    a closeness window one secret cannot reach removes the pair."""
    for theta in (Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)):
        assert pf.sdl_count_sensitivity(30, theta, 4, Fraction(1, 5), Fraction(1, 2)) == 1
        assert pf.sdl_count_sensitivity(30, theta, 4) == 4
    assert pf.sdl_admissible(30, 4, Fraction(1, 5), Fraction(1, 2)) == list(range(9, 22))
    assert pf.sdl_count_sensitivity(5, Fraction(1, 2), 1, Fraction(0), Fraction(0)) is None  # only T = 0
