"""The SafeTab mechanism: threshold choice, the isolation of stage 1, fan-out sensitivity, exact
budgets of both production specs (recomputed here from the published numbers), noise variance,
zero suppression, the add/remove -> change-one conversion, SafeTab-H's conditioning, compile
end to end, and located errors for bad input."""

from __future__ import annotations

import math
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.budget.budget_report import budget_summary
from dpspec.run.compiler import compile_spec, make_rng
from dpspec.check.data import load_data
from dpspec.errors import DataError, SpecError
from dpspec.run.noise import discrete_gaussian_pmf, discrete_gaussian_variance
from dpspec_safetab import engine, measured
from dpspec_safetab.design import sigma2
from dpspec_safetab.iterations import IterationTable, encode_records, flatten
from tests.safetab_helpers import variant as _variant

ROOT = Path(__file__).resolve().parents[1]
P_SPEC = ROOT / "specs" / "safetab_p_production.dps"
H_SPEC = ROOT / "specs" / "safetab_h_production.dps"
D = F(1, 1000)  # the production configurations give decimals to three to six places

# ---- the published production numbers, typed in again (DDHCA NMFv7-2020, DDHCB NMFv5) --------
P_RHO = {
    "nation": (8 * D, 2134 * D),
    "state": (8 * D, 2134 * D),
    "county": (8 * D, 159 * D),
    "tract": (8 * D, 159 * D),
    "place": (8 * D, 159 * D),
    "aiannh": (0, 159 * D),
}
H_RHO = {
    "nation": (F("0.006915"), F("1.9208")),
    "state": (F("0.006915"), F("1.9208")),
    "county": (F("0.006915"), F("0.142869")),
    "tract": (F("0.006915"), F("0.142869")),
    "place": (F("0.006915"), F("0.142869")),
    "aiannh": (0, F("0.142869")),
}


@pytest.fixture(scope="module")
def p_result():
    return compile_spec(dpspec.load(str(P_SPEC)), seed=11, audit=True)


@pytest.fixture(scope="module")
def h_result():
    return compile_spec(dpspec.load(str(H_SPEC)), seed=12, audit=True)


# ---- the adaptive choice ---------------------------------------------------------------------


@pytest.mark.parametrize("thresholds", [(971, 4971, 19971), (471, 971, 6971), (4971, 19971, 149970)])
def test_threshold_selection_at_and_around_each_boundary(thresholds):
    values, expected = [], []
    for k, t in enumerate(thresholds, start=1):
        values += [t - 1, t, t + 1]
        expected += [k - 1, k, k]
    values += [-50, 0, 10**9]
    expected += [0, 0, len(thresholds)]
    assert engine.choose_detail(np.array(values), thresholds).tolist() == expected


def test_one_threshold_ladder_as_safetab_h_t4():
    assert engine.choose_detail(np.array([970, 971, 972, np.nan_to_num(-np.inf)]), (971,)).tolist() == [0, 1, 1, 0]


@pytest.mark.slow  # two SafeTab-P production compiles of 5,000 persons: a few seconds
def test_stage1_totals_reach_the_output_only_through_the_choice(monkeypatch):
    """Shift every stage-1 total by 10^6 while the choice ignores their values: the release is
    identical, so nothing else reads them; and no published count carries the shift."""
    spec = dpspec.load(str(P_SPEC))
    data, _ = load_data(spec)
    persons = data["persons"].iloc[:5000].reset_index(drop=True)
    real_noise = engine.add_keyed_noise
    seen = []

    def run(shift):
        def noise(counts, s2, run_key, keys):
            out = real_noise(counts, s2, run_key, keys)
            stage1 = s2 in (sigma2(9, F(8, 10000)), sigma2(9, F(2134, 10000)), sigma2(9, F(159, 10000)))
            return out + shift if stage1 else out

        def choose(totals, thresholds):
            seen.append(float(np.min(totals)) if totals.size else None)
            return np.ones(totals.shape, dtype=np.int8)  # the same choice, whatever the totals

        monkeypatch.setattr(measured, "add_keyed_noise", noise)
        monkeypatch.setattr(measured, "choose_detail", choose)
        return compile_spec(spec, data={"persons": persons}, seed=5, audit=False).published["counts"]

    a, b = run(0), run(10**6)
    assert min(s for s in seen[len(seen) // 2 :] if s is not None) > 10**5  # the shifted totals were used
    pd.testing.assert_frame_equal(a, b)
    assert a["count"].max() < 10**5


# ---- characteristic iterations and the fan-out ------------------------------------------------


def _toy_table():
    codes = pd.DataFrame({"code": ["A1", "A2", "B1", "H0", "H1"]})
    iterations = pd.DataFrame(
        {
            "iteration": ["A", "Ac", "A1", "A1c", "B", "Bc", "NH", "HL", "Hd"],
            "kind": ["race"] * 6 + ["ethnicity"] * 3,
            "level": [1, 1, 2, 2, 1, 1, 1, 1, 2],
            "alone": [True, False, True, False, True, False, None, None, None],
            "detailed_only": [False] * 8 + [True],
            "coarse_only": [False] * 9,
        }
    )
    mapping = pd.DataFrame(
        {
            "code": ["A1", "A1", "A2", "A2", "A1", "A1", "B1", "B1", "H0", "H1", "H1"],
            "iteration": ["A", "Ac", "A", "Ac", "A1", "A1c", "B", "Bc", "NH", "HL", "Hd"],
        }
    )
    return IterationTable.build(codes, iterations, mapping)


def test_fanout_bound_is_production_formula():
    table = _toy_table()
    for r in (1, 2, 8):
        bound = table.fanout_bound(1, "coarse", r)
        assert (bound["h_race"], bound["h_ethnicity"]) == (1, 1)
        assert bound["fanout"] == 1 * max(2, r) + 1


def test_flattening_alone_needs_every_code_in_combination_any():
    table = _toy_table()
    frame = pd.DataFrame({"R1": ["A1", "A1", "A2"], "R2": [None, "B1", "A1"], "E": ["H0", "H1", "H0"]})
    rec = encode_records(frame, ["R1", "R2"], "E", table, max_race_codes=2)
    sel = table.selection(1, "coarse")
    rows, its = flatten(rec, table, sel, max_groups=4)
    groups = {r: sorted(sel["iteration"].to_numpy()[its[rows == r]]) for r in range(3)}
    assert groups[0] == ["A", "Ac", "NH"]  # one code: alone and in combination
    assert groups[1] == ["Ac", "Bc", "HL"]  # two major groups: in combination only
    assert groups[2] == ["A", "Ac", "NH"]  # two codes of one group: still alone
    assert np.bincount(rows).max() <= table.fanout_bound(1, "coarse", 2)["fanout"]


def test_a_record_beyond_the_declared_fanout_is_a_located_data_error():
    table = _toy_table()
    frame = pd.DataFrame({"R1": ["A1", "A1"], "R2": [None, "B1"], "E": ["H0", "H1"]})
    rec = encode_records(frame, ["R1", "R2"], "E", table, max_race_codes=2, source="persons.csv")
    with pytest.raises(
        DataError, match=r"persons.csv: row 1: .* 3 population groups, more than the declared maximum fan-out 2"
    ):
        flatten(rec, table, table.selection(1, "coarse"), max_groups=2, source="persons.csv")


def test_sensitivity_scales_the_noise_with_the_fanout():
    assert sigma2(9, F(159, 1000)) == F(9 * 1000, 2 * 159)
    assert sigma2(18, F(1, 2)) == 2 * sigma2(9, F(1, 2))


def test_unknown_codes_are_located():
    table = _toy_table()
    frame = pd.DataFrame({"R1": ["A1", "ZZ"], "E": ["H0", "H0"]})
    with pytest.raises(DataError, match=r"row 2: column 'R1' holds the code 'ZZ'"):
        encode_records(frame, ["R1"], "E", table, max_race_codes=1)
    bad_map = pd.DataFrame({"code": ["A1", "Q9"], "iteration": ["A", "A"]})
    with pytest.raises(DataError, match=r"row 2: the code 'Q9' is not in the codes table"):
        IterationTable.build(pd.DataFrame({"code": ["A1"]}), _toy_table().iterations, bad_map)


def test_too_many_race_codes_is_a_located_data_error():
    table = _toy_table()
    frame = pd.DataFrame({"R1": ["A1"], "R2": ["B1"], "E": ["H0"]})
    with pytest.raises(DataError, match=r"row 1: the record has 2 race codes, more than max_race_codes = 1"):
        encode_records(frame, ["R1", "R2"], "E", table, max_race_codes=1)


# ---- budgets ----------------------------------------------------------------------------------


def test_safetab_p_budget_recomputed_from_the_published_numbers():
    total = sum(a + b for a, b in P_RHO.values())
    assert total == F("4.944")
    s = budget_summary(dpspec.load(str(P_SPEC)))
    assert math.isclose(s["native"]["budget"]["rho"], float(total), rel_tol=1e-12)
    assert math.isclose(s["budget"]["rho"], 4 * float(total), rel_tol=1e-12)  # change one person
    parts = s["native"]["components"]
    for geo, (lv1, lv2) in P_RHO.items():
        for level, rho in ((1, lv1), (2, lv2)):
            mine = [c for c in parts if c["geography"] == geo and c["iteration_level"] == level]
            if rho == 0:
                assert [c["stage"] for c in mine] == ["not measured"]
                continue
            stages = {c["stage"]: F(c["rho_exact"]) for c in mine}
            assert stages == {"stage 1": rho / 10, "stage 2": rho * 9 / 10}
            assert all(math.isclose(c["in_spec_flavor"]["rho"], 4 * float(c["rho"]), rel_tol=1e-12) for c in mine)
    assert sum(F(c["rho_exact"]) for c in parts) == total
    assert s["bounds_hold"]


def test_safetab_h_budget_recomputed_from_the_published_numbers():
    per_table = sum(a + b for a, b in H_RHO.values())
    total = 2 * per_table  # T3 and T4 compose sequentially
    assert total == F("8.895302")
    s = budget_summary(dpspec.load(str(H_SPEC)))
    assert math.isclose(s["native"]["budget"]["rho"], float(total), rel_tol=1e-12)
    assert math.isclose(s["budget"]["rho"], 4 * float(total), rel_tol=1e-12)
    parts = s["native"]["components"]
    assert {c["stage"] for c in parts} == {"stage 2", "not measured"}  # no stage 1 of its own
    assert sum(F(c["rho_exact"]) for c in parts) == total


def test_add_remove_to_change_one_conversion_is_shown():
    s = budget_summary(dpspec.load(str(P_SPEC)))
    assert s["native"]["flavor"] == {"unit": "persons", "relation": "symdiff", "premetric": "zcdp"}
    (step,) = s["steps"]
    assert step["what"] == "relation" and "hamming" in step["method"]
    assert math.isclose(s["native"]["budget"]["rho"], 4.944) and math.isclose(s["budget"]["rho"], 19.776)
    (bound,) = s["bounds"]
    assert bound["holds"] and "hamming" in bound["currency"]


def test_safetab_h_is_conditioned_on_safetab_p(h_result):
    s = budget_summary(dpspec.load(str(H_SPEC)))
    assert len(s["public_information"]) == 6
    assert all("SafeTab-P" in p["released"] for p in s["public_information"])
    assert h_result.statement.public and "SafeTab-P" in h_result.statement.public[0].description
    (cond,) = s["native"]["conditioned_on"]
    assert "SafeTab-P" in cond["description"] and cond["source"].endswith("safetab_p_published.parquet")
    assert budget_summary(dpspec.load(str(P_SPEC)))["native"]["conditioned_on"] == []
    ids = [f.rule for f in h_result.findings]
    assert "public-information" in ids


# ---- noise and suppression, measured on the release -------------------------------------------


@pytest.mark.parametrize(
    "geos,level,roles,rho",
    [
        (("nation", "state"), 2, ("total", "cell"), F(2134, 1000) * F(9, 10)),  # stage 2: 0.9 of rho
        (("nation", "state"), 2, ("detailed-only total",), F(2134, 1000)),  # the whole rho
        (("county", "tract", "place", "aiannh"), 2, ("cell",), F(159, 1000) * F(9, 10)),  # cells: never suppressed
    ],
)
def test_noise_variance_per_cell(p_result, geos, level, roles, rho):
    """Realized squared error of each kind of published count against the exact discrete
    Gaussian variance k / (2 rho) with k = 9; 4 standard errors of the mean square (the
    stage-2 and detailed-only variances, 2.34 and 2.11, are 5.5 standard errors apart)."""
    errs = [
        e
        for e in p_result.release.internal["errors"]
        if e["geography"] in geos and e["level"] == level and e["role"] in roles
    ]
    n = sum(e["n"] for e in errs)
    mse = sum(e["sum_sq_error"] for e in errs) / n
    var = discrete_gaussian_variance(sigma2(9, rho))
    assert n > 100  # enough counts for the test to mean something (the tolerance below scales with n)
    assert abs(mse - var) < 4 * var * math.sqrt(2 / n)


def test_stage1_noise_variance():
    s2 = sigma2(9, F(159, 10000))
    x = engine.add_noise(np.zeros(200_000, dtype=np.int64), s2, make_rng(3))
    assert abs(x.var() - float(s2)) < 5 * float(s2) * math.sqrt(2 / x.size)
    assert abs(x.mean()) < 5 * math.sqrt(float(s2) / x.size)


def test_suppression_threshold_is_the_noise_quantile():
    s2 = sigma2(9, F(1431, 10000))
    t = engine.suppression_threshold(s2, F(9999, 10000))
    cdf = lambda v: discrete_gaussian_pmf(s2, np.arange(-400, v + 1)).sum()  # noqa: E731
    assert cdf(t) >= 0.9999 > cdf(t - 1)
    assert engine.suppression_threshold(s2, None) is None


def test_suppression_rate_of_true_zeros(p_result):
    errs = [
        e
        for e in p_result.release.internal["errors"]
        if e["geography"] in ("county", "tract", "place", "aiannh") and e["role"] == "total"
    ]
    zeros = sum(e["true_zero"] for e in errs)
    dropped = sum(e["suppressed_true_zero"] for e in errs)
    assert zeros > 50_000
    assert dropped / zeros > 0.9995  # expected 0.9999
    kept = p_result.published["counts"]
    assert not ((kept["geography"] == "tract") & (kept["count"] <= 0)).any()
    unsuppressed = [e for e in p_result.release.internal["errors"] if e["geography"] in ("nation", "state")]
    assert sum(e["suppressed"] for e in unsuppressed) == 0


# ---- compile end to end -------------------------------------------------------------------------


def test_safetab_p_release_is_long_form_with_the_chosen_detail(p_result):
    counts = p_result.published["counts"]
    assert list(counts.columns) == [
        "table",
        "geography",
        "geocode",
        "group",
        "group_level",
        "detail",
        "QSEX",
        "AGE4",
        "AGE9",
        "AGE23",
        "count",
    ]
    assert set(counts["geography"]) == {"nation", "state", "county", "tract", "place", "aiannh"}
    assert set(counts.loc[counts["geography"] == "aiannh", "group_level"]) == {2}  # level 1 has rho 0 there
    cells = counts[counts["detail"] == "QSEX*AGE9"]
    assert set(cells["AGE4"]) == {"*"} and set(cells["AGE9"]) == {"*"} | {str(i) for i in range(9)}
    per_group = cells[cells["AGE9"] != "*"].groupby(["geography", "geocode", "group"]).size()
    assert (per_group == 18).all()
    facts = p_result.release.facts
    assert facts["fanout"]["level2 coarse"]["fanout_used"] == 9


def test_totals_and_sex_margins_are_sums_of_the_published_cells(p_result):
    """Post-processing as production's T1/T2: a broken-down group's total and its male and female
    counts are the sums of its noisy cells (no fresh noise, no extra budget)."""
    counts = p_result.published["counts"]
    broken = counts[counts["detail"] != "total"].copy()
    age = broken[["AGE4", "AGE9", "AGE23"]].ne("*").any(axis=1)
    key = ["geography", "geocode", "group", "detail"]
    cells, margins = broken[age], broken[~age & (broken["QSEX"] != "*")]
    totals = broken[~age & (broken["QSEX"] == "*")].set_index(key)["count"]
    by_sex = cells.groupby([*key, "QSEX"])["count"].sum()
    assert len(margins) == len(by_sex) == 2 * len(totals) > 100
    pd.testing.assert_series_equal(
        margins.set_index([*key, "QSEX"])["count"].sort_index(), by_sex.sort_index(), check_names=False
    )
    pd.testing.assert_series_equal(
        totals.sort_index(), cells.groupby(key)["count"].sum().sort_index(), check_names=False
    )


def test_safetab_h_tabulates_only_groups_safetab_p_published(h_result):
    counts = h_result.published["counts"]
    published = pd.read_parquet(ROOT / "specs" / "data" / "safetab" / "safetab_p_published.parquet")
    keys = set(zip(published["geography"], published["geocode"], published["group"].astype(str)))
    mine = set(zip(counts["geography"], counts["geocode"], counts["group"].astype(str)))
    assert mine <= keys
    assert set(counts["table"]) == {"t3", "t4"}
    # the detail follows the published total against the thresholds (county, level 2: T1 = 971)
    t4 = counts[(counts["table"] == "t4") & (counts["geography"] == "county") & (counts["group_level"] == 2)]
    chosen = t4.groupby(["geocode", "group"])["detail"].first()
    pub = published[published["geography"] == "county"].set_index(["geocode", "group"])["count"]
    joined = pd.concat([chosen, pub], axis=1, join="inner")
    assert ((joined["count"] >= 971) == (joined["detail"] == "TENURE3")).all()


# ---- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("level2: [971, 4971, 19971]", "level2: [971, 971, 19971]", "must be strictly increasing"),
        ("stage1_fraction: 0.1", "stage1_fraction: 1", "stage1_fraction must lie strictly between 0 and 1"),
        ("stage1_fraction: 0.1", "stage1_fraction: 0", "stage1_fraction must lie strictly between 0 and 1"),
        ("total_rho: 4.944", "total_rho: 4.9", "add up to 4.944, not the declared 4.9"),
        ("level2: [971, 4971, 19971]", "level2: [971, 4971]", "has 2 thresholds but the ladder has 4 details"),
    ],
)
def test_bad_parameters_are_located_spec_errors(tmp_path, old, new, message):
    path = _variant(tmp_path, old, new)
    with pytest.raises(SpecError) as info:
        compile_spec(dpspec.load(str(path)), seed=1, audit=False)
    text = str(info.value)
    assert message in text
    line = next(
        i for i, row in enumerate(path.read_text().splitlines(), 1) if new in row and not row.lstrip().startswith("#")
    )
    assert f"variant.dps:{line}:" in text


def test_declared_fanout_smaller_than_the_data_is_a_data_error(tmp_path):
    path = _variant(tmp_path, "max_groups: 9", "max_groups: 3")
    # the bundled Parquet table is held by the engine: no row numbers, the codes and how many rows
    with pytest.raises(
        DataError,
        match=r"persons.parquet: \d+ rows fall into more population groups than the declared "
        r"maximum fan-out 3, such as \d+ for race codes '\d+'.* and ethnicity code",
    ):
        compile_spec(dpspec.load(str(path)), seed=1, audit=False)


# ---- the language: geography components that do not nest ----------------------------------------

CROSSCUT = """spec "x"
domain d {
  geography g { state > county }
  crosscut { place, aiannh }
  table persons unit person {
    state  : category
    county : category in state
    place  : category nullable
    aiannh : category nullable
  }
}
"""


def test_crosscut_parses_formats_and_round_trips():
    from dpspec.language.formatter import format_spec

    spec = dpspec.load(CROSSCUT)
    assert spec.domain.geography.components == ("place", "aiannh")
    text = format_spec(spec)
    assert "  crosscut { place, aiannh }" in text
    assert dpspec.load(text).domain.geography == spec.domain.geography
    assert format_spec(dpspec.load(text)) == text


def test_crosscut_errors_are_located():
    from dpspec.check.checker import check

    with pytest.raises(SpecError, match=r"4:\d+: error: .*geography component column 'plaec'"):
        check(dpspec.load(CROSSCUT.replace("{ place,", "{ plaec,")))
    with pytest.raises(SpecError, match="needs a geography hierarchy"):
        dpspec.load(CROSSCUT.replace("  geography g { state > county }\n", ""))
    with pytest.raises(SpecError, match="geography component 'county' appears twice"):
        check(dpspec.load(CROSSCUT.replace("{ place,", "{ county,")))
