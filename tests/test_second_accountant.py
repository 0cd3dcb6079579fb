"""A second accountant: the bundled budgets recomputed through OpenDP's own privacy maps and conversions.

Where OpenDP 0.16 can express a bundled spec's mechanism (discrete Gaussian and discrete Laplace
noise, randomized response) or conversion (zCDP to (epsilon, delta), pure to zCDP, change-one to
add/remove), each test builds the same measurements in OpenDP, with the noise parameters dpspec's
plugin draws with, composes them with OpenDP's combinators and asserts that OpenDP's figure is
dpspec's. Only the "contrib" feature is enabled: every measurement is one of OpenDP's own
constructors, so no user-defined map ("honest-but-curious") is trusted.

Tolerance: OpenDP's maps return f64 and round every step outward; dpspec's figures are exact
rationals. The scale OpenDP is given is the square root of an exact rational, rounded once to f64
(relative error 1.1e-16, doubled in the squared scale), and a composition of n <= 100 measurements
adds at most n roundings, so the two agree to about 1e-14. RTOL = 1e-9 leaves a margin of 10^5
over that and is still 35 times finer than the smallest real difference between two bundled
figures (P.L. 94's noise variances, rounded up to dyadic rationals, cost 3.5e-8 less than the
stated rho): a disagreement in any budget, sensitivity or share would fail it.

Differences of definition (each also in docs/theory.md, "A second accountant"):

- Change-one neighbours. OpenDP reaches a change-one neighbour through `make_metric_unbounded`
  (one change is symmetric distance 2) and its histogram stability bounds the L2 distance by the
  symmetric distance, so a change-one neighbour costs rho x 4 there (and pure epsilon x 2).
  dpspec's ledger uses that generic conversion ('symdiff-to-hamming'), and OpenDP reproduces it
  exactly; TopDown (s^2 = 2) and the programs' SafeTab and PHSafe figures use the tighter exact
  sensitivity (a changed record leaves one cell and enters another: L2 = sqrt 2 per count, rho x 2),
  which the tests give OpenDP as the L2 distance `d_in` of its Gaussian measurement.
- Parallel composition. OpenDP 0.16 has no combinator for parallel composition over a partition of
  records outside its Polars front end. A level's counts over all its geounits form one vector in
  which a change-one neighbour moves at most two entries by one, so one OpenDP Gaussian over that
  vector is the level's measurement (its map does not depend on the number of geounits, tested
  below through `make_count_by_categories`). TopDown's bypassed single-child units give records
  different paths through the levels; each path is composed in OpenDP and the guarantee is the
  maximum over paths (a record follows one path; a change between paths costs half of each).
- Z-Pufferfish. OpenDP has no Pufferfish definitions: for `noisy_postprocessed` the test checks
  only that the noise meets the stated epsilon against neighbours of one size (the period total
  is in Z), whose L1 sensitivity OpenDP computes as the change-one one.
"""

from __future__ import annotations

import glob
import math
import os
from fractions import Fraction
from functools import lru_cache
from importlib import metadata

import pytest

dp = pytest.importorskip("opendp.prelude", reason="opendp (the test extra) is not installed")
if tuple(int(x) for x in metadata.version("opendp").split(".")[:2]) < (0, 16):
    # checked against 0.16 only: OpenDP has renamed its combinators between releases
    pytest.skip(
        f"the second accountant is written against opendp 0.16, found {metadata.version('opendp')}",
        allow_module_level=True,
    )
dp.enable_features("contrib")

from dpspec.budget import PureDP, ZCDP, convert  # noqa: E402
from dpspec.budget.budget_report import budget_summary  # noqa: E402
from dpspec.budget.spec_account import spec_ledger  # noqa: E402
from dpspec.budget.units import change_relation  # noqa: E402
from dpspec.language.parser import parse, read_source  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")
RTOL = 1e-9


def _bundled(*patterns) -> list[str]:
    return sorted({os.path.relpath(p, SPECS) for pat in patterns for p in glob.glob(os.path.join(SPECS, pat))})


TOPDOWN = _bundled("*topdown*.dps", "pl94_*.dps", "dhc_*.dps")
SAFETAB = _bundled("safetab_*.dps")
PHSAFE = _bundled("sdhc_*.dps")
ZCDP_SPECS = TOPDOWN + SAFETAB + PHSAFE
RR = _bundled("acs_ma_vision_rr.dps", "acs_program/*_rr.dps")
LAPLACE = _bundled("pa_covid/postprocessing_*.dps")


@lru_cache(maxsize=None)
def _spec(name):
    path = os.path.join(SPECS, name)
    return parse(read_source(path), path)


@lru_cache(maxsize=None)
def _summary(name) -> dict:
    return budget_summary(_spec(name))


def _mechanism(name):
    checked = spec_ledger(_spec(name))[0]
    return checked.mechanism, checked.params


INTS = dp.vector_domain(dp.atom_domain(T=int))
L2 = dp.l2_distance(T=float)


@lru_cache(maxsize=None)
def gaussian(sigma2: Fraction):
    """OpenDP's Gaussian on integer vectors (the discrete Gaussian) at dpspec's exact sigma^2,
    with zCDP output: its map is rho = d_in^2 / (2 sigma^2) for L2 distance d_in."""
    return dp.m.make_gaussian(INTS, L2, scale=math.sqrt(sigma2))


def _close(theirs: float, ours) -> bool:
    return math.isclose(theirs, float(ours), rel_tol=RTOL)


# ---- TopDown: one discrete Gaussian per (level, query), composed along each geography path ----


def topdown_paths(summary: dict):
    """Every path a record can take through the levels: a level measured with its own rows, or a
    run of levels whose single-child units are measured once at the top with the run's shares
    (the spine's bypass classes). Yields (path, allocation rows)."""
    rows = summary["allocation"]
    levels = list(dict.fromkeys(r["level"] for r in rows))
    by_level = {lv: [r for r in rows if r["level"] == lv] for lv in levels}
    bypass = {}
    for c in (summary.get("spine") or {}).get("bypass", {}).get("classes", []):
        bypass.setdefault((c["level"], c["through"]), []).append(c)

    def paths_from(i):
        if i == len(levels):
            yield ()
            return
        for tail in paths_from(i + 1):
            yield (levels[i],) + tail
        for j in range(i + 1, len(levels)):
            if (levels[i], levels[j]) in bypass:
                for tail in paths_from(j + 1):
                    yield ((levels[i], levels[j]),) + tail

    for path in paths_from(0):
        yield path, [r for seg in path for r in (by_level[seg] if isinstance(seg, str) else bypass[seg])]


TOPDOWN_S = math.sqrt(2)  # a change-one neighbour moves one count down and one up: L2 = sqrt 2


def _topdown_cost(rows) -> Fraction:
    """What the noise costs exactly: s^2 / (2 sigma^2) per measurement with s^2 = 2."""
    return sum((1 / Fraction(r["sigma2_exact"]) for r in rows), Fraction(0))


@pytest.mark.parametrize("name", TOPDOWN)
def test_opendp_charges_each_topdown_query_at_most_its_share_when_given_the_plugins_variance(name):
    s = _summary(name)
    assert s["mechanism"]["name"] == "topdown" and s["flavor"]["relation"] == "hamming"
    for r in s["allocation"]:
        theirs = gaussian(Fraction(r["sigma2_exact"])).map(TOPDOWN_S)
        assert _close(theirs, 1 / Fraction(r["sigma2_exact"])), (r["level"], r["query"])
        assert theirs <= float(Fraction(r["rho_exact"])) * (1 + RTOL), (r["level"], r["query"])


@pytest.mark.parametrize("name", TOPDOWN)
def test_opendp_composes_every_topdown_geography_path_to_the_stated_rho(name):
    s = _summary(name)
    stated = sum((Fraction(r["rho_exact"]) for r in s["allocation"]), Fraction(0))
    assert float(stated) == s["budget"]["rho"]
    totals = []
    for path, rows in topdown_paths(s):
        # every path spends exactly the stated shares...
        assert sum((Fraction(r["rho_exact"]) for r in rows), Fraction(0)) == stated, path
        # ...OpenDP's sequential composition charges what the noise costs, which is within them
        cost = _topdown_cost(rows)
        theirs = dp.c.make_composition([gaussian(Fraction(r["sigma2_exact"])) for r in rows]).map(TOPDOWN_S)
        assert _close(theirs, cost), path
        assert cost <= stated, path
        totals.append(theirs)
    assert len(totals) >= 1
    # parallel composition over the paths: the worst one is the guarantee, and it is the stated rho
    assert max(totals) <= float(stated) * (1 + RTOL)
    assert max(totals) == pytest.approx(float(stated), rel=1e-7)  # 1e-7: P.L. 94's rounded-up variances


def test_opendp_charges_one_measurement_per_level_when_the_level_has_many_geounits():
    """A level's counts over (geounit, cell) keys are one histogram: its stability (and so its
    Gaussian's rho) is the same for 1 geounit or 500, which is parallel composition over geounits."""

    def level(geounits):
        keys = [f"{g}:{c}" for g in range(geounits) for c in ("a", "b", "c")]
        t = dp.t.make_count_by_categories(
            dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance(), keys, MO="L2Distance<int>"
        )
        return t >> dp.m.then_gaussian(scale=2.0)

    assert level(1).map(1) == level(500).map(1) == 1 / 8


# ---- SafeTab and PHSafe: per (table, geography level, iteration level, stage) --------------


def _compose_by_sensitivity(parts) -> float:
    """OpenDP's composition needs one d_in: measurements with one L2 sensitivity compose in one
    make_composition at that d_in, and basic composition adds, so the groups' maps add."""
    groups = {}
    for d_in, sigma2 in parts:
        groups.setdefault(d_in, []).append(gaussian(sigma2))
    return sum(dp.c.make_composition(ms).map(d_in) for d_in, ms in groups.items())


def _safetab_parts(name, tight_change_one: bool = False):
    mech, _ = _mechanism(name)
    parts = []
    for c in _summary(name)["native"]["components"]:
        if "fanout" not in c:
            continue
        k = c["fanout"]
        sigma2 = Fraction(mech.noise_sigma2(k, Fraction(c["rho_exact"])))
        # add/remove: a record reaches k cells, L2 = sqrt k; change one: it leaves k and enters k
        parts.append((math.sqrt(2 * k if tight_change_one else k), sigma2))
    return parts


@pytest.mark.parametrize("name", SAFETAB)
def test_opendp_composes_safetab_measurements_to_the_native_rho(name):
    s = _summary(name)
    assert s["native"]["flavor"]["relation"] == "symdiff"
    native = sum((Fraction(c["rho_exact"]) for c in s["native"]["components"]), Fraction(0))
    assert float(native) == s["native"]["budget"]["rho"]
    assert _close(_compose_by_sensitivity(_safetab_parts(name)), native)


@pytest.mark.parametrize("name", SAFETAB)
def test_opendp_generic_change_one_reproduces_the_safetab_ledgers_figure_when_rho_is_quadrupled(name):
    """The spec's flavor is change one person; the ledger converts the native add/remove rho by
    group privacy (x 4). OpenDP's own route to a change-one neighbour (make_metric_unbounded, then
    a histogram whose L2 stability is the symmetric distance) charges the same x 4."""
    s = _summary(name)
    assert s["flavor"]["relation"] == "hamming" and s["steps"][0]["method"] == "symdiff-to-hamming"
    records = dp.vector_domain(dp.atom_domain(T=int), size=100)
    bounded = dp.t.make_metric_unbounded(records, dp.change_one_distance())
    histogram = dp.t.make_count_by_categories(
        bounded.output_domain, bounded.output_metric, [0, 1], MO="L2Distance<int>"
    )
    native = _compose_by_sensitivity(_safetab_parts(name))
    per_unit = (histogram >> dp.m.then_gaussian(scale=1.0)).map(1)
    per_change = (bounded >> histogram >> dp.m.then_gaussian(scale=1.0)).map(1)
    assert _close(native * per_change / per_unit, s["budget"]["rho"])


def test_opendp_adaptive_composition_admits_safetab_p_stage_two_when_chosen_after_stage_one():
    """SafeTab-P chooses each group's stage-2 table from its noisy stage-1 total: adaptive
    composition. OpenDP's adaptive compositor, given the two stages' rho, accepts the stage-2
    measurement after it has answered stage 1, and its map is the cell's rho."""
    name = "safetab_p_production.dps"
    mech, _ = _mechanism(name)
    comps = [c for c in _summary(name)["native"]["components"] if "fanout" in c]
    one = next(c for c in comps if c["stage"] == "stage 1")
    two = next(
        c
        for c in comps
        if c["stage"] == "stage 2"
        and c["table"] == one["table"]
        and c["geography"] == one["geography"]
        and c["iteration_level"] == one["iteration_level"]
    )
    k = one["fanout"]
    d_in = math.sqrt(k)
    m1, m2 = (gaussian(Fraction(mech.noise_sigma2(k, Fraction(c["rho_exact"])))) for c in (one, two))
    compositor = dp.c.make_adaptive_composition(
        INTS, L2, dp.zero_concentrated_divergence(), d_in=d_in, d_mids=[m1.map(d_in), m2.map(d_in)]
    )
    assert _close(compositor.map(d_in), Fraction(one["rho_exact"]) + Fraction(two["rho_exact"]))
    queryable = compositor([3, 40, 7])
    totals = queryable(m1)
    assert len(queryable(m2)) == len(totals) == 3


def _phsafe_parts(name, tight_change_one: bool = False):
    mech, params = _mechanism(name)
    design = mech.design(_spec(name), params)
    scale = 2 if tight_change_one else 1  # change one person: gained and lost rows, L2^2 at most doubles
    return [(math.sqrt(scale) * design.sensitivity(m.table), Fraction(design.sigma2(m))) for m in design.measured()]


@pytest.mark.parametrize("name", PHSAFE)
def test_opendp_composes_phsafe_measurements_to_the_stated_rho(name):
    s = _summary(name)
    assert s["mechanism"]["name"] == "phsafe" and s["flavor"]["relation"] == "symdiff"
    stated = Fraction(s["phsafe"]["total_rho_exact"])
    assert float(stated) == s["budget"]["rho"]
    assert _close(_compose_by_sensitivity(_phsafe_parts(name)), stated)


@pytest.mark.slow  # OpenDP composes every Census 2020 product
def test_opendp_composes_the_census_2020_program_to_its_ledger_total():
    """The program composes seven products for one person (change one): TopDown's paths at
    L2 = sqrt 2, SafeTab's and PHSafe's measurements at their tight change-one sensitivities (the
    figures the program states for them); OpenDP's totals add (basic composition)."""
    s = _summary(os.path.join("census2020", "program.dps"))
    theirs = 0.0
    for release in s["releases"]:
        member = os.path.normpath(os.path.join("census2020", release["spec"]))
        mech = _summary(member)["mechanism"]["name"]
        if mech == "topdown":
            part = max(
                dp.c.make_composition([gaussian(Fraction(r["sigma2_exact"])) for r in rows]).map(TOPDOWN_S)
                for _, rows in topdown_paths(_summary(member))
            )
        elif mech == "safetab":
            part = _compose_by_sensitivity(_safetab_parts(member, tight_change_one=True))
        else:
            assert mech == "phsafe"
            part = _compose_by_sensitivity(_phsafe_parts(member, tight_change_one=True))
        assert part <= release["budget"]["rho"] * (1 + RTOL)
        assert part == pytest.approx(release["budget"]["rho"], rel=1e-7), member
        theirs += part
    assert theirs == pytest.approx(s["ledger"]["total"]["rho"], rel=1e-7)
    assert theirs <= s["ledger"]["total"]["rho"] * (1 + RTOL)


# ---- conversions ---------------------------------------------------------------------------


def _measured_rho(rho: float):
    """A discrete Gaussian whose zCDP map at d_in = 1 is rho (to f64 rounding)."""
    return dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=math.sqrt(1 / (2 * rho)))


def _opendp_epsilon(rho: float, delta: float) -> float:
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(_measured_rho(rho)), delta)
    eps, d = approx.map(1)
    assert d == delta
    return eps


@pytest.mark.parametrize("name", ZCDP_SPECS)
def test_opendp_zcdp_to_approx_dp_matches_cks20_at_every_bundled_figure(name):
    s = _summary(name)
    cks = [c for c in s["conversions"] if c["method"] == "cks20"]
    assert cks
    for c in cks:
        assert _close(_opendp_epsilon(s["budget"]["rho"], c["delta"]), c["epsilon"])


@pytest.mark.parametrize(
    "rho,delta,published",
    [
        (Fraction(293764, 114921), 1e-10, 17.14),  # P.L. 94 persons, the production certificate
        (15.29, 1e-10, 51.56),  # the design's worked figure (52.82 under BS16)
    ],
)
def test_opendp_zcdp_to_approx_dp_gives_the_published_epsilon_when_rho_is_the_certificates(rho, delta, published):
    ours = convert(ZCDP(float(rho)), "approx", delta=delta, method="cks20").result.epsilon
    theirs = _opendp_epsilon(float(rho), delta)
    assert _close(theirs, ours) and round(theirs, 2) == published


@pytest.mark.parametrize("name", RR)
def test_opendp_randomized_response_costs_the_stated_epsilon_when_p_is_the_specs(name):
    mech, params = _mechanism(name)
    assert mech.name == "randomized_response"
    rr = dp.m.make_randomized_response_bool(prob=float(params["p"]))
    stated = _summary(name)["budget"]["epsilon"]
    assert _close(rr.map(1), stated)
    # and pure to zCDP: eps^2 / 2, OpenDP's make_pureDP_to_zCDP on the same measurement
    assert _close(dp.c.make_pureDP_to_zCDP(rr).map(1), convert(PureDP(stated), "zcdp").result.rho)


def test_opendp_composes_the_acs_program_to_its_ledger_epsilon_when_states_are_disjoint():
    """Vision (everyone) then hearing (each person in one state's release): a person in state P
    answers vision and P's hearing, so the guarantee is the worst state's composition."""
    s = _summary(os.path.join("acs_program", "program.dps"))
    rr = {
        r["spec"]: dp.m.make_randomized_response_bool(
            prob=float(_mechanism(os.path.join("acs_program", r["spec"]))[1]["p"])
        )
        for r in s["releases"]
    }
    everyone = [r["spec"] for r in s["releases"] if r["parallel_group"] is None]
    parts = [r["spec"] for r in s["releases"] if r["parallel_group"] is not None]
    theirs = max(dp.c.make_composition([rr[n] for n in everyone + [p]]).map(1) for p in parts)
    assert _close(theirs, s["ledger"]["total"]["epsilon"])


@pytest.mark.parametrize("name", LAPLACE)
def test_opendp_discrete_laplace_costs_the_stated_epsilon_when_the_total_is_held_fixed(name):
    """noisy_postprocessed adds discrete Laplace noise to the counts and the outcome counts,
    scale = sensitivity / epsilon each. Given the period total (Z), two worlds differ by a changed
    record: OpenDP's change-one route (make_metric_unbounded, the L1 histogram, make_laplace on
    integers, which samples the discrete Laplace) composed over the two vectors gives the epsilon."""
    mech, params = _mechanism(name)
    scales = mech.noise_scales(_spec(name), params)
    records = dp.vector_domain(dp.atom_domain(T=int), size=100)
    histogram = dp.t.make_metric_unbounded(records, dp.change_one_distance()) >> dp.t.then_count_by_categories(
        [0, 1, 2], MO="L1Distance<int>"
    )
    laplace = [histogram >> dp.m.then_laplace(scale=float(scales[k])) for k in ("counts", "outcome")]
    assert _close(dp.c.make_composition(laplace).map(1), _summary(name)["budget"]["epsilon"])


# ---- unit conversions ----------------------------------------------------------------------


def test_opendp_counts_a_change_one_neighbour_as_two_add_remove_steps_like_dpspecs_conversion():
    records = dp.vector_domain(dp.atom_domain(T=int), size=10)
    bounded = dp.t.make_metric_unbounded(records, dp.change_one_distance())
    assert bounded.map(1) == 2
    histogram = dp.t.then_count_by_categories([0, 1], MO="L2Distance<int>")
    add_remove = dp.t.make_count_by_categories(
        dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance(), [0, 1], MO="L2Distance<int>"
    )
    rho_ar = (add_remove >> dp.m.then_gaussian(scale=3.0)).map(1)
    rho_c1 = (bounded >> histogram >> dp.m.then_gaussian(scale=3.0)).map(1)
    assert _close(rho_c1, change_relation(ZCDP(rho_ar), "symdiff", "hamming").result.rho)
    l1 = dp.t.make_count_by_categories(dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance(), [0, 1])
    eps_ar = (l1 >> dp.m.then_laplace(scale=3.0)).map(1)
    eps_c1 = (bounded >> dp.t.then_count_by_categories([0, 1]) >> dp.m.then_laplace(scale=3.0)).map(1)
    assert _close(eps_c1, change_relation(PureDP(eps_ar), "symdiff", "hamming").result.epsilon)
