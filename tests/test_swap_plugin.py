"""The `swap` plugin through the spec path: registration, checks, invariants, budget by
Theorem II.1 on the 1940 Massachusetts households, carrying persons along, utility, report."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.contract import plugins
from dpspec.budget.budget_report import budget_summary, spec_ledger
from dpspec.check.checker import check
from dpspec.run.compiler import compile_spec
from dpspec.check.data import load_data
from dpspec.errors import SpecError
from dpspec.language.parser import parse, read_source
from dpspec_swap import PermutationSwapping
from dpspec_swap.report import sections
from dpspec_swap.whatif import alternative_keys

SPECS = Path(__file__).resolve().parents[1] / "specs"
MA1940 = SPECS / "ma1940_swap.dps"
ACS = SPECS / "acs_ma2019_swap.dps"
B_1940 = 264_331


def load(path: Path, text: str | None = None):
    """A spec from its file, optionally with its text replaced (data paths stay relative to it)."""
    return parse(text if text is not None else read_source(str(path)), str(path))


def with_rate(text: str, rate: str) -> str:
    out, n = re.subn(r"rate: [0-9./]+", f"rate: {rate}", text)
    assert n == 1
    return out.replace("budget epsilon <= 16", "")


@pytest.fixture(scope="module")
def text1940() -> str:
    return read_source(str(MA1940))


@pytest.fixture(scope="module")
def data1940(text1940):
    data, _ = load_data(load(MA1940, text1940))
    return data


# ---- registration --------------------------------------------------------------------------


def test_registered_through_the_entry_point():
    assert "swap" in plugins.entry_points()
    mech = plugins.mechanisms()["swap"]
    assert isinstance(mech, PermutationSwapping)
    assert mech.needs_data_for_budget is True
    names = [p.name for p in mech.parameters.params]
    assert names == ["table", "match", "swap", "rate"]
    rate = mech.parameters.get("rate")
    assert (rate.low, rate.high) == (0, 1)


# ---- the paper's budgets through the spec --------------------------------------------------


@pytest.mark.parametrize(("rate", "paper"), [("0.01", 17.08), ("0.05", 15.43), ("0.10", 14.68), ("0.50", 12.48)])
def test_paper_budgets_for_1940_through_the_spec(text1940, data1940, rate, paper):
    spec = load(MA1940, with_rate(text1940, rate))
    _, facts, statement, flavor, ledger = spec_ledger(spec, data1940)
    assert facts["b"] == B_1940
    assert facts["largest_stratum"] == {"state": "MA", "size": 2}
    eps = statement.actual.epsilon
    assert round(float(eps), 2) == paper
    o = Fraction(rate) / (1 - Fraction(rate))
    assert eps == pytest.approx(math.log(B_1940 + 1) - math.log(o), rel=1e-13)  # lower branch
    assert ledger.declared.epsilon == eps  # native flavor = the spec's flavor
    assert statement.per_universe and statement.worst is None
    assert statement.depends_on["b"] == B_1940
    assert statement.depends_on["largest_stratum"] == {"state": "MA", "size": 2}
    assert (flavor.table, flavor.relation, flavor.premetric) == ("households", "hamming", "pure")


@pytest.mark.parametrize(("rate", "expected"), [("0.7", 11.64), ("0.99", 7.89)])
def test_upper_branch_for_1940_through_the_spec(text1940, data1940, rate, expected):
    # p > 1/2: max(ln o, ln(b+1) - ln o); with b this large the second term wins.
    spec = load(MA1940, with_rate(text1940, rate))
    eps = spec_ledger(spec, data1940)[2].actual.epsilon
    o = Fraction(rate) / (1 - Fraction(rate))
    assert eps == pytest.approx(max(math.log(o), math.log(B_1940 + 1) - math.log(o)), rel=1e-13)
    assert round(float(eps), 2) == expected


@pytest.mark.parametrize("rate", ["0", "1"])
def test_rates_zero_and_one_are_accepted_but_infinite(text1940, data1940, rate):
    spec = load(MA1940, with_rate(text1940, rate))
    check(spec)  # accepted
    statement = spec_ledger(spec, data1940)[2]
    assert math.isinf(statement.actual.epsilon)
    assert any("no finite epsilon" in n for n in statement.notes)


def test_budget_summary_reports_b_and_its_stratum(text1940):
    summary = budget_summary(load(MA1940, text1940))
    native = summary["native"]
    assert native["per_universe"] is True and native["worst_case"] is None
    assert native["depends_on"]["b"] == B_1940
    assert native["depends_on"]["largest_stratum"] == {"state": "MA", "size": 2}
    assert round(summary["budget"]["epsilon"], 2) == 15.43
    assert summary["bounds_hold"] is True
    assert any("no finite worst case" in n for n in native["notes"])


# ---- small household specs -----------------------------------------------------------------

HOUSEHOLDS = """\
spec "households"
domain d "test" {{
  stage edited
  geography g {{ state > county }}
  table households unit household {{
    hhid   : int 1..1000000
    state  : category
    county : category in state
    size   : int 1..20
    tenure : {{owned, rented}}
  }}
{persons_table}}}
data households from "households.csv"
{persons_data}
invariants {{
{invariants}
}}
unit households : hamming
premetric pure
mechanism swap {{
  table: households
  match: {match}
  swap: {swap}
  rate: {rate}
}}
"""
PERSONS_TABLE = """\
  table persons unit person in households by hhid {
    hhid   : int 1..1000000
    county : {a1, a2, a3, b1, b2, c1}
    age    : int 0..120
  }
"""
INVARIANTS = ["  count households by state, size, tenure, hhid", "  count households by county, size"]
PERSONS_INVARIANT = "  count persons by hhid, age"


def household_spec(
    tmp_path,
    households: pd.DataFrame,
    *,
    rate="0.5",
    match="state, size",
    swap="county",
    invariants=INVARIANTS,
    persons: pd.DataFrame | None = None,
    persons_table=False,
    persons_data=None,
):
    persons_table = persons_table or persons is not None
    persons_data = persons is not None if persons_data is None else persons_data
    households.to_csv(tmp_path / "households.csv", index=False)
    if persons is not None:
        persons.to_csv(tmp_path / "persons.csv", index=False)
    text = HOUSEHOLDS.format(
        persons_table=PERSONS_TABLE if persons_table else "",
        persons_data='data persons from "persons.csv"' if persons_data else "",
        invariants="\n".join(invariants),
        match=match,
        swap=swap,
        rate=rate,
    )
    path = tmp_path / "households.dps"
    path.write_text(text)
    return parse(text, str(path))


def make_households(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    state = rng.choice(["A", "B"], size=n)
    county = np.where(state == "A", rng.choice(["a1", "a2", "a3"], size=n), rng.choice(["b1", "b2"], size=n))
    return pd.DataFrame(
        {
            "hhid": np.arange(1, n + 1),
            "state": state,
            "county": county,
            "size": rng.integers(1, 5, size=n),
            "tenure": rng.choice(["owned", "rented"], size=n),
        }
    )


def make_persons(households: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = households.loc[households.index.repeat(households["size"])]
    return pd.DataFrame(
        {
            "hhid": rows["hhid"].to_numpy(),
            "county": rows["county"].to_numpy(),
            "age": rng.integers(0, 90, size=len(rows)),
        }
    ).sample(frac=1, random_state=seed)


def problems_of(spec) -> str:
    with pytest.raises(SpecError) as err:
        check(spec)
    return str(err.value)


# ---- spec errors for bad parameters ---------------------------------------------------------


def test_unknown_column_is_a_spec_error_with_a_suggestion(tmp_path):
    message = problems_of(household_spec(tmp_path, make_households(10, 1), match="state, sise"))
    assert "unknown column 'sise'" in message
    assert "did you mean 'size'" in message
    assert "households.dps:" in message  # the checker placed it in the file


def test_column_of_another_table_is_not_a_column_of_the_swapped_table(tmp_path):
    hh = make_households(10, 1)
    spec = household_spec(
        tmp_path, hh, match="state, age", persons=make_persons(hh, 2), invariants=INVARIANTS + [PERSONS_INVARIANT]
    )
    message = problems_of(spec)
    assert "parameter 'match': unknown column 'age' in table 'households'" in message


def test_match_and_swap_must_be_disjoint(tmp_path):
    message = problems_of(household_spec(tmp_path, make_households(10, 1), match="state, size, county"))
    assert "county cannot both be in the match key and be swapped" in message
    assert "keeps" not in message  # no invariant errors computed from wrong parameters


def test_error_points_at_the_parameter_line(tmp_path):
    spec = household_spec(tmp_path, make_households(10, 1), match="state, size, county")
    with pytest.raises(SpecError) as err:
        check(spec)
    swap_line = next(i for i, line in enumerate(spec.text.splitlines(), 1) if line.strip().startswith("swap:"))
    assert [d.line for d in err.value.diagnostics] == [swap_line]


@pytest.mark.parametrize("rate", ["1.5", "-0.1", "3/2"])
def test_rate_out_of_range(tmp_path, rate):
    message = problems_of(household_spec(tmp_path, make_households(10, 1), rate=rate))
    assert "parameter 'rate'" in message and "outside the allowed range [0, 1]" in message


def test_swapping_a_nested_column_needs_its_parent_in_the_key(tmp_path):
    message = problems_of(
        household_spec(
            tmp_path,
            make_households(10, 1),
            match="size",
            invariants=["  count households by size, state, tenure, hhid", "  count households by county, size"],
        )
    )
    assert "'county' is nested in 'state'" in message
    assert "add 'state' to the match key" in message


def test_swapping_the_link_column_is_refused(tmp_path):
    hh = make_households(10, 1)
    message = problems_of(
        household_spec(
            tmp_path, hh, swap="county, hhid", persons=make_persons(hh, 2), invariants=INVARIANTS + [PERSONS_INVARIANT]
        )
    )
    assert "'hhid' links table 'persons' to 'households' and cannot be swapped" in message


# ---- invariants ----------------------------------------------------------------------------


def test_induced_invariants_for_1940(text1940):
    checked = check(load(MA1940, text1940))
    # county is nested in state, so match x swap is the count by size x county.
    assert [q.describe() for q in checked.induced] == [
        "count households by state, size, tenure",
        "count households by size, county",
    ]


@pytest.mark.parametrize(
    ("dropped", "missing"),
    [
        ("  count households by county, size\n", "count households by size, county"),
        ("  count households by state, size, tenure\n", "count households by state, size, tenure"),
    ],
)
def test_undeclared_invariant_is_rejected_by_name(text1940, dropped, missing):
    assert dropped in text1940
    message = problems_of(load(MA1940, text1940.replace(dropped, "")))
    assert f"keeps '{missing}' exact, but the invariants do not declare it" in message


def test_a_finer_declared_invariant_implies_the_induced_one(text1940):
    text = text1940.replace("count households by county, size\n", "count households by state, county, size\n")
    check(load(MA1940, text))


# ---- compile end to end on the 1940 households -----------------------------------------------


def counts(frame: pd.DataFrame, cols) -> pd.Series:
    return frame.groupby(list(cols), observed=True).size()


@pytest.mark.slow  # compiles the 1940 swap on its bundled data
def test_compile_1940_end_to_end(text1940, data1940):
    spec = load(MA1940, text1940)
    result = compile_spec(spec, data=data1940, seed=1940, audit=False)
    before, after = data1940["households"], result.published["households"]
    assert list(after.columns) == list(before.columns)
    assert list(after.dtypes) == list(before.dtypes)
    assert len(after) == len(before) == 1_144_424
    for cols in (["state", "size", "tenure"], ["county", "size"]):
        pd.testing.assert_series_equal(counts(before, cols), counts(after, cols))
    # the released county x tenure table is computed from the swapped microdata, and moved
    released = result.published["count_households_county_tenure"].set_index(["county", "tenure"])["count"]
    assert released.sum() == len(before)
    assert not released.sort_index().equals(counts(before, ["county", "tenure"]).sort_index().rename("count"))
    assert (after["county"] != before["county"]).sum() <= result.release.internal["run"]["swapped_records"]
    # selection: each of ~1.14M households in strata of two or more is picked with p = 1/20
    fraction = result.release.internal["run"]["swapped_fraction"]
    sd = math.sqrt(0.05 * 0.95 / len(before))
    assert abs(fraction - 0.05) < 5 * sd
    assert round(float(result.ledger.declared.epsilon), 2) == 15.43
    assert result.ledger.bounds_hold
    assert result.facts["b"] == B_1940
    # one run: its utility figures are internal, never among the public facts
    assert result.utility["runs"] == 1
    assert "count_households_county_tenure" in result.utility["tables"]
    assert "tables" not in result.facts and "swapped_records" not in result.facts


@pytest.mark.slow  # swaps at several rates
def test_runs_give_utility_figures_that_grow_with_the_rate(text1940, data1940):
    text = text1940.replace(
        "  count households by county, tenure\n",
        "  count households by county, tenure\n  count households by county, size\n",
    )
    mapes = {}
    for rate in ("0.05", "0.5"):
        result = compile_spec(load(MA1940, with_rate(text, rate)), data=data1940, seed=7, runs=2, audit=False)
        util = result.utility
        json.dumps(util, allow_nan=False)  # plain JSON for the internal report
        assert util["runs"] == 2 and util["rate"] == float(Fraction(rate))
        table = util["tables"]["count_households_county_tenure"]
        assert table["query"] == "count households by county, tenure"
        assert table["invariant"] is False and table["cells"] == 28
        assert len(table["mape_percent"]["per_run"]) == 2
        mapes[rate] = table["mape_percent"]["mean"]
        exact = util["tables"]["count_households_county_size"]
        assert exact["invariant"] is True
        assert exact["mape_percent"]["per_run"] == [0.0, 0.0]  # an invariant comes out exact
    assert 0 < mapes["0.05"] < mapes["0.5"]


# ---- persons carried along with their household ----------------------------------------------


def test_persons_carry_their_household_geography(tmp_path):
    hh = make_households(400, 11)
    persons = make_persons(hh, 12)
    spec = household_spec(tmp_path, hh, persons=persons, invariants=INVARIANTS + [PERSONS_INVARIANT])
    checked = check(spec)
    assert "count persons by hhid, age" in [q.describe() for q in checked.induced]
    result = compile_spec(spec, seed=5, audit=False)
    out_hh, out_p = result.published["households"], result.published["persons"]
    before_p = load_data(spec)[0]["persons"]
    assert list(out_p.columns) == list(before_p.columns) and len(out_p) == len(before_p)
    moved = (out_hh["county"].astype(str).to_numpy() != hh["county"].to_numpy()).sum()
    assert moved > 50  # p = 1/2: plenty of households changed county
    joined = out_p.merge(out_hh[["hhid", "county"]], on="hhid", suffixes=("", "_household"))
    assert len(joined) == len(out_p)
    assert (joined["county"].astype(str) == joined["county_household"].astype(str)).all()
    pd.testing.assert_series_equal(out_p["age"], before_p["age"])
    pd.testing.assert_series_equal(out_p["hhid"], before_p["hhid"])
    # size is in the match key, so persons per county cannot change either
    assert counts(out_p, ["county"]).equals(counts(before_p, ["county"]))


def test_persons_invariant_must_be_declared(tmp_path):
    hh = make_households(20, 1)
    message = problems_of(household_spec(tmp_path, hh, persons=make_persons(hh, 2)))
    assert "keeps 'count persons by hhid, age' exact" in message


def test_persons_without_data_are_not_released(tmp_path):
    spec = household_spec(tmp_path, make_households(50, 3), persons_table=True, persons_data=False)
    result = compile_spec(spec, seed=1, audit=False)
    assert set(result.published) == {"households"}


def test_persons_disagreeing_with_their_household_are_a_data_error(tmp_path):
    from dpspec.errors import DataError

    hh = make_households(30, 4)
    persons = make_persons(hh, 5)
    persons.iloc[0, persons.columns.get_loc("county")] = "c1"  # declared, but no household's
    spec = household_spec(tmp_path, hh, persons=persons, invariants=INVARIANTS + [PERSONS_INVARIANT])
    with pytest.raises(DataError, match="differs from its parent"):
        compile_spec(spec, seed=1, audit=False)


# ---- both ends of b ------------------------------------------------------------------------


def test_b_zero_gives_zero_budget(tmp_path):
    # every stratum holds one household, or identical ones: nothing can move
    hh = pd.DataFrame(
        {
            "hhid": [1, 2, 3],
            "state": ["A", "A", "B"],
            "county": ["a1", "a2", "b1"],
            "size": [1, 2, 1],
            "tenure": ["owned", "owned", "rented"],
        }
    )
    spec = household_spec(tmp_path, hh, rate="0.3")
    _, facts, statement, _, _ = spec_ledger(spec)
    assert facts["b"] == 0 and facts["largest_stratum"] is None
    assert statement.actual.epsilon == 0


def test_small_b_high_rate_takes_ln_o(tmp_path):
    # b = 2 at p = 9/10: ln(o) = ln 9 beats ln(3) - ln(9)
    hh = pd.DataFrame(
        {
            "hhid": [1, 2, 3],
            "state": ["A", "A", "B"],
            "county": ["a1", "a2", "b1"],
            "size": [2, 2, 1],
            "tenure": ["owned", "owned", "rented"],
        }
    )
    spec = household_spec(tmp_path, hh, rate="0.9")
    _, facts, statement, _, _ = spec_ledger(spec)
    assert facts["b"] == 2
    assert statement.actual.epsilon == pytest.approx(math.log(9), rel=1e-14)


# ---- the ACS excerpt, person-level -----------------------------------------------------------


def test_acs_person_swap_end_to_end():
    spec = load(ACS)
    checked = check(spec)
    assert [q.describe() for q in checked.induced] == [
        "count persons by STATE, SEX, AGE_BAND, RAC1P, HISP",
        "count persons by SEX, AGE_BAND, PUMA",
    ]
    result = compile_spec(spec, seed=2019, runs=5, audit=False)
    assert result.facts["b"] == 1161
    assert result.facts["largest_stratum"] == {"STATE": "25", "SEX": "2", "AGE_BAND": "45-64"}
    assert result.ledger.declared.epsilon == pytest.approx(math.log(1162) + math.log(9), rel=1e-13)
    before = load_data(spec)[0]["persons"]
    after = result.published["persons"]
    for q in checked.induced:
        assert counts(before, q.columns).equals(counts(after, q.columns))
    assert (after["PUMA"].astype(str) != before["PUMA"].astype(str)).any()
    assert set(result.utility["tables"]) == {"count_persons_PUMA_RAC1P", "count_persons_PUMA_HISP"}
    assert all(t["mape_percent"]["mean"] > 0 for t in result.utility["tables"].values())


# ---- what-if and the report section ----------------------------------------------------------


def test_alternative_keys_for_1940(text1940):
    checked = check(load(MA1940, text1940))
    keys = alternative_keys(checked.spec, checked.params)
    assert keys[0] == ("state", "size")
    assert set(keys) == {("state", "size"), (), ("size",), ("size", "tenure"), ("state",), ("state", "size", "tenure")}


@pytest.mark.slow  # swaps at several rates for the plot
def test_report_section_plots_budget_against_rate(text1940, data1940):
    result = compile_spec(load(MA1940, text1940), data=data1940, seed=2, runs=2, audit=False)
    secs = sections(result)
    public = [s for s in secs if not s.internal]
    assert len(public) == 1
    section = public[0]
    data = section.data
    json.dumps(data, allow_nan=False)
    assert data["b"] == B_1940 and round(data["epsilon"], 2) == 15.43
    by_b = {c["b"]: c for c in data["curves"]}
    assert set(by_b) == {B_1940, 1_144_424, 163_586}
    assert by_b[B_1940]["is_spec"] and ["state", "size"] in by_b[B_1940]["keys"]
    assert ["state", "size", "tenure"] in by_b[163_586]["keys"]
    assert len(by_b[B_1940]["epsilon"]) == len(by_b[B_1940]["rates"])
    # the what-if plot covers each curve's minimum (issue 28): ln(b+1)/2 = 6.24 for the 1940 b
    assert round(data["minimum_epsilon"], 2) == 6.24 and by_b[B_1940]["minimum"]["rate"] in by_b[B_1940]["rates"]
    assert min(e for e in by_b[B_1940]["epsilon"] if e != "inf") == pytest.approx(data["minimum_epsilon"])
    assert "No swap rate gives less than epsilon = 6.24" in section.markdown
    assert "<svg" in section.html and "<polyline" in section.html
    assert "15.43" in section.markdown and "state x size x tenure" in section.markdown
    internal = [s for s in secs if s.internal]
    assert internal and "county, tenure" in internal[0].markdown


def test_report_section_escapes_values(tmp_path):
    hh = pd.DataFrame(
        {
            "hhid": [1, 2, 3, 4],
            "state": ["<script>alert(1)</script>"] * 4,
            "county": ["a|1", "a*2", "a1", "a2"],
            "size": [2, 2, 2, 2],
            "tenure": ["owned", "owned", "rented", "rented"],
        }
    )
    spec = household_spec(tmp_path, hh, rate="0.5")
    result = compile_spec(spec, seed=1, audit=False)
    html = "".join(s.html for s in sections(result))
    markdown = "".join(s.markdown for s in sections(result))
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<script" not in markdown
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    from dpspec.report.render import screen

    assert all(screen(s.html) and screen(s.markdown) for s in sections(result))


def test_other_mechanisms_get_no_swap_section():
    class Other:
        mechanism = type("M", (), {"name": "randomized_response"})()
        facts = {}

    assert sections(Other()) == []


def test_alternative_keys_cover_coarser_and_finer_geography(tmp_path):
    text = """\
spec "three levels"
domain d "test" {
  stage edited
  geography g { state > county > tract }
  table households unit household {
    state  : category
    county : category in state
    tract  : category in county
    size   : int 1..20
    tenure : {owned, rented}
  }
}
invariants {
  count households by state, size, tenure
  count households by tract, size
}
unit households : hamming
premetric pure
mechanism swap { match: state, size  swap: tract  rate: 0.02 }
"""
    message = problems_of(parse(text, str(tmp_path / "t.dps")))
    assert "'tract' is nested in 'county'" in message  # county must be held fixed too
    fixed = text.replace("match: state, size ", "match: county, size ").replace(
        "count households by state, size, tenure", "count households by county, size, tenure"
    )
    checked = check(parse(fixed, str(tmp_path / "t.dps")))
    # county fixes state (validated nesting), so state drops out of match x hold
    assert [q.describe() for q in checked.induced] == [
        "count households by county, size, tenure",
        "count households by size, tract",
    ]
    keys = alternative_keys(checked.spec, checked.params)
    assert keys[0] == ("county", "size")
    # coarser geography (state), the spec's (county) and none, each with and without size
    for key in [(), ("size",), ("state",), ("state", "size"), ("county",), ("county", "size", "tenure")]:
        assert key in keys
    assert not any("tract" in k for k in keys)
