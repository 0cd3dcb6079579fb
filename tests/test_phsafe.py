"""PHSafe (the 2020 Supplemental DHC): the budget pinned to the production configuration, the
tabulation (join, truncation, cells) against hand-counted households, the noise's law, the
specs compiled end to end, and bad input refused with its location."""

from __future__ import annotations

import json
import re
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec import schemas
from dpspec.api import DataError, discrete_gaussian_variance, load
from dpspec.cli.main import main
from dpspec_phsafe.plugin import PHSafe
from dpspec_phsafe.tabulate import Records, measure, measure_exact
from tests.conftest import beside
from tests.safetab_helpers import variant

ROOT = Path(__file__).resolve().parent.parent
US = ROOT / "specs" / "sdhc_production.dps"
PR = ROOT / "specs" / "sdhc_production_pr.dps"
DATA = ROOT / "specs" / "data" / "sdhc"


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _budget(spec) -> dict:
    result = _run("budget", spec, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _variant(tmp_path, old: str, new: str, spec=US) -> Path:
    return variant(tmp_path, old, new, spec=spec)


# ---- the budget, pinned to DAS_2020_SDHC_Production_Code -----------------------------------

# configs/phsafe/NMFv8/us/config.json lines 2-67: the sum of every "privacy_budget" entry
US_RHO = F(1257281, 1000000)
# configs/phsafe/NMFv8/pr/config.json lines 2-67: the same with every "usa_*" entry 0.0
PR_RHO = F(1226649, 1000000)
# per table, the US configuration's entries summed (e.g. PH3, lines 23-30:
# 3 x 0.001061 + 0.662976 + 2 x 0.006630 = 0.679419)
US_TABLES = {
    "PH1_num": "0.182221",
    "PH1_denom": "0.001506",
    "PH2": "0.01899",
    "PH3": "0.679419",
    "PH4": "0.182221",
    "PH5_denom": "0.001506",
    "PH6": "0.007691",
    "PH7": "0.182221",
    "PH8_denom": "0.001506",
}
# tau, lines 68-75 of both configurations
TAU = {"PH1_num": 10, "PH2": 10, "PH3": 6, "PH4": 10, "PH6": 6, "PH7": 10}


@pytest.mark.parametrize(
    "spec,rho,household,measured",
    [(US, US_RHO, F(263251731, 1078000000), 46), (PR, PR_RHO, F(1410886569, 5929000000), 23)],
)
def test_budget_is_the_production_configuration(spec, rho, household, measured):
    out = _budget(spec)
    assert not schemas.problems("budget", out)
    assert out["native"]["flavor"]["relation"] == "symdiff" and out["flavor"]["relation"] == "symdiff"
    parts = out["native"]["components"]
    assert sum(F(c["rho_exact"]) for c in parts) == rho
    assert len([c for c in parts if F(c["rho_exact"]) > 0]) == measured
    assert F(out["phsafe"]["total_rho_exact"]) == rho
    assert out["phsafe"]["tau"] == TAU
    # the household figure: each measurement's rho x (tau / (2 tau + 2))^2, or x (1/2)^2 for a unit table
    assert F(out["phsafe"]["household_rho_exact"]) == household
    assert out["budget"]["rho"] == pytest.approx(float(rho))  # unit person, symdiff: no conversion
    for c in parts:  # sensitivity 2 tau + 2 (accuracy_report.py lines 291-295), variance D^2 / (2 rho)
        d = 2 * TAU[c["table"]] + 2 if c["table"] in TAU else 2
        assert c["sensitivity"] == d
        if F(c["rho_exact"]) > 0:
            assert c["noise_variance"] == pytest.approx(d * d / (2 * float(F(c["rho_exact"]))), rel=1e-8)


def test_per_table_budgets_and_pr_nation_skipped():
    us, pr = _budget(US), _budget(PR)
    assert us["phsafe"]["tables"] == US_TABLES
    assert all(F(c["rho_exact"]) == 0 for c in pr["native"]["components"] if c["geography"] == "usa")
    us_state = {
        (c["table"], c["iteration_level"]): c["rho_exact"]
        for c in us["native"]["components"]
        if c["geography"] == "state"
    }
    pr_state = {
        (c["table"], c["iteration_level"]): c["rho_exact"]
        for c in pr["native"]["components"]
        if c["geography"] == "state"
    }
    assert us_state == pr_state  # the PR configuration's state entries equal the US ones


def test_a_wrong_share_changes_a_pinned_figure(tmp_path):
    # PH3 state_A-G is 0.662976 (us/config.json line 27): moved to PH3 state_*, total unchanged
    moved = _variant(tmp_path, '"state_A-G": 0.662976', '"state_A-G": 0.652976')
    moved.write_text(
        moved.read_text().replace('"state_*": 0.00663\n    }\n    PH4', '"state_*": 0.01663\n    }\n    PH4', 1)
    )
    out = _budget(moved)
    assert F(out["phsafe"]["total_rho_exact"]) == US_RHO  # the total alone cannot see it
    assert out["phsafe"]["tables"] == US_TABLES  # nor the table's sum
    assert F(out["phsafe"]["household_rho_exact"]) == F(263251731, 1078000000)  # same tau within PH3
    parts = {(c["table"], c["geography"], c["iteration_level"]): F(c["rho_exact"]) for c in out["native"]["components"]}
    assert parts[("PH3", "state", "A-G")] != F("0.662976")  # the pinned share fails
    # a share moved between tables of different tau changes the household figure and the tables
    shifted = _variant(tmp_path, '"state_A-G": 0.141622', '"state_A-G": 0.141621')
    result = _run("budget", shifted, "--json")
    assert (
        result.exit_code == 1 and "total_rho is 1.257281 but the measurements' rho add up to 1.25728" in result.output
    )


# ---- the tabulation ------------------------------------------------------------------------


def _household(mafid, state, hht, hht2, cplt, ten, members, race=1, span=1):
    unit = dict(MAFID=mafid, state=state, RTYPE=2, HHT=hht, HHT2=hht2, CPLT=cplt, TEN=ten, HHRACE=race, HHSPAN=span)
    persons = [dict(MAFID=mafid, RTYPE=3, RELSHIP=rel, QAGE=age, CENRACE=race, CENHISP=span) for rel, age in members]
    return unit, persons


def _records(households, states=("09", "23")):
    units = pd.DataFrame([u for u, _ in households])
    persons = pd.DataFrame([p for _, ps in households for p in ps])
    return Records(persons, units, states, "persons.csv")


def _design_of(path):
    from dpspec.contract.mechanism import resolve_params

    spec = load(str(path))
    params, problems = resolve_params(PHSafe(), spec.mechanism, spec)
    assert not problems
    return PHSafe().design(spec, params)


@pytest.fixture(scope="module")
def us_design():
    return _design_of(US)


@pytest.fixture(scope="module")
def pr_design():
    return _design_of(PR)


def test_truncation_join_and_cells_by_hand(us_design):
    big = _household(1, "09", 1, 1, 1, 1, [(20, 40), (21, 38)] + [(25, 3)] * 4 + [(28, 30)] * 8)  # 14 persons
    alone = _household(2, "23", 6, 5, 5, 3, [(20, 70)], race=2, span=2)
    orphan = pd.DataFrame([dict(MAFID=99, RTYPE=3, RELSHIP=20, QAGE=30, CENRACE=1, CENHISP=1)])  # no unit
    rec = Records(
        pd.concat([pd.DataFrame([p for _, ps in (big, alone) for p in ps]), orphan]),
        pd.DataFrame([big[0], alone[0]]),
        ("09", "23"),
        "persons.csv",
    )
    truth = measure_exact(us_design, rec)

    def count(table, region, code, cell):
        hit = truth[
            (truth.table == table)
            & (truth.region_id == region)
            & (truth.iteration_code == code)
            & (truth.data_cell == cell)
        ]
        return int(hit["count"].sum())

    # PH1_num (tau 10): the 14-person household counts 10 persons, the orphan none
    assert count("PH1_num", "US", "*", 2) + count("PH1_num", "US", "*", 3) == 10 + 1
    # PH3 (tau 6, persons under 18): 4 own children of a married family with children -> cell 4
    assert count("PH3", "09", "A", 4) == 4
    # PH2: the married opposite-sex couple household (cell 3) counts 10 persons; the woman alone: cell 12
    assert count("PH2", "09", "*", 3) == 10 and count("PH2", "23", "*", 12) == 1
    # PH6 (tau 6): own children aged 3 of a married family -> cell 3 (under 4)
    assert count("PH6", "US", "*", 3) == 4
    # PH7 by tenure: mortgage (cell 2) 10, renter (cell 4) 1; PH8_denom units: owner 1, renter 1
    assert count("PH7", "US", "*", 2) == 10 and count("PH7", "US", "*", 4) == 1
    assert count("PH8_denom", "US", "*", 2) == 1 and count("PH8_denom", "US", "*", 3) == 1
    # iterations: the Black alone Hispanic householder is in B and H; the married household in A and I
    assert count("PH1_denom", "US", "B", 1) == 1 and count("PH1_denom", "US", "H", 1) == 1
    assert count("PH1_denom", "US", "I", 1) == 1
    # PH5_denom: family households only (HHT 1-3)
    assert count("PH5_denom", "US", "*", 1) == 1


def test_truncation_does_not_depend_on_record_order(us_design):
    big = _household(1, "09", 1, 1, 1, 1, [(20, 40), (21, 38)] + [(25, a) for a in range(1, 17)])
    units = pd.DataFrame([big[0]])
    persons = pd.DataFrame(big[1])
    a = measure_exact(us_design, Records(persons, units, ("09",), "p"))
    b = measure_exact(us_design, Records(persons.iloc[::-1], units, ("09",), "p"))
    pd.testing.assert_frame_equal(a, b)


def test_inconsistent_record_is_a_located_data_error(us_design):
    bad = _household(1, "09", 1, 2, 1, 1, [(20, 40), (25, 5)])  # own child under 18, HHT2 "without own children"
    with pytest.raises(
        DataError,
        match=r"persons.csv: 1 person record\(s\) of PH3's universe fit none of its cells.*"
        r"MAFID 1, RELSHIP 25, QAGE 5, HHT2 2",
    ):
        measure_exact(us_design, _records([bad]))


# ---- the noise -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled():
    units = pd.read_parquet(DATA / "units.parquet")
    persons = pd.read_parquet(DATA / "persons.parquet")
    return persons, units


def test_noise_is_centred_with_the_stated_variance(us_design, bundled):
    """One run has 12,000+ noisy counts: standardized by their stated variance, the errors must have
    mean 0 and variance 1. With n counts the mean's standard error is 1/sqrt(n) and the variance's
    about sqrt(2/n) (the discrete Gaussian is nearly normal); 5 standard errors each."""
    rec = Records(*bundled, us_design.states, "p")
    noisy = measure(us_design, rec, run_key=20201)
    noisy = noisy[~noisy.table.isin(["PH5_num", "PH8_num"])]
    truth = measure_exact(us_design, rec)
    keys = ["table", "region_type", "region_id", "iteration_code", "data_cell"]
    merged = noisy.merge(truth, on=keys, how="left", suffixes=("", "_true")).fillna({"count_true": 0})
    z = (merged["count"] - merged["count_true"]) / np.sqrt(merged["noise_variance"])
    n = len(z)
    assert n > 10000
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1) < 5 * np.sqrt(2 / n)
    # the stated variance is the exact discrete Gaussian variance at D^2 / (2 rho)
    ph3 = merged[
        (merged.table == "PH3") & (merged.region_type == "STATE") & merged.iteration_code.isin(list("ABCDEFG"))
    ]
    assert ph3["noise_variance"].iloc[0] == pytest.approx(discrete_gaussian_variance(F(14**2) / (2 * F("0.662976"))))


def test_noise_is_keyed_per_cell(pr_design, bundled):
    us_design = pr_design  # Puerto Rico's 244 cells suffice here
    rec = Records(*bundled, us_design.states, "p")
    a, b, c = (measure(us_design, rec, run_key=k) for k in (7, 7, 8))
    pd.testing.assert_frame_equal(a, b)
    assert (a["count"] != c["count"]).mean() > 0.9
    # the same cell draws the same noise when other measurements are absent (keyed, not sequential)
    only = type(us_design)(
        tuple(m for m in us_design.measurements if m.table == "PH7"), us_design.tau, us_design.states
    )
    d = measure(only, rec, run_key=7)
    pd.testing.assert_frame_equal(
        d[d.table == "PH7"].reset_index(drop=True), a[a.table == "PH7"].reset_index(drop=True)[d.columns]
    )


def test_postprocessed_tables_follow_ph4_and_ph7(us_design, bundled):
    out = measure(us_design, Records(*bundled, us_design.states, "p"), run_key=3)
    ph4, ph5 = out[out.table == "PH4"], out[out.table == "PH5_num"]
    assert ph4["count"].tolist() == ph5["count"].tolist()
    ph7, ph8 = out[out.table == "PH7"], out[out.table == "PH8_num"]
    owner = ph7[ph7.data_cell.isin([2, 3])].groupby(["region_id", "iteration_code"])["count"].sum()
    got = ph8[ph8.data_cell == 2].set_index(["region_id", "iteration_code"])["count"]
    assert (owner.sort_index() == got.sort_index()).all()


# ---- end to end, and bad specs ------------------------------------------------------------


def test_both_specs_check_and_compile(tmp_path):
    for spec in (US, PR):
        out = beside(tmp_path, spec.stem)
        result = _run("compile", spec, "-o", out)
        assert result.exit_code == 0, result.output
        for kind, name in (("report", "report.json"), ("manifest", "manifest.json")):
            assert not schemas.problems(kind, json.loads((out / name).read_text()))
        section = json.loads((out / "report.json").read_text())["sections"][0]
        assert section["title"] == "PHSafe: tables, unit and noise per measurement"
        assert len(section["data"]["measurements"]) == (46 if spec == US else 23)
        counts = pd.read_csv(out / "counts.csv", dtype={"region_id": str})
        assert set(counts["table"]) == {
            "PH1_num",
            "PH1_denom",
            "PH2",
            "PH3",
            "PH4",
            "PH5_denom",
            "PH6",
            "PH7",
            "PH8_denom",
            "PH5_num",
            "PH8_num",
        }
        if spec == PR:
            assert set(counts["region_id"]) == {"72"}
        else:
            assert "US" in set(counts["region_id"]) and "72" not in set(counts["region_id"])
            assert len(set(counts["region_id"]) - {"US"}) == 51


@pytest.mark.parametrize(
    "old,new,message",
    [
        ('    PH6: {\n      "usa_*": 0.001061\n      "state_*": 0.00663\n    }\n', "", r"table PH6 has no budget"),
        (
            '"usa_*": 0.002619\n      "state_*": 0.016371\n    }\n    PH3',
            '"usa_A-G": 0.002619\n      "state_*": 0.016371\n    }\n    PH3',
            r"PH2 has no measurement 'usa_A-G'",
        ),
        ("    PH3: 6\n", "", r"table PH3 needs a truncation threshold"),
        ("PH6: 6\n", "PH6: 2.5\n", r"PH6 must be a whole number of persons"),
        ("total_rho: 1.257281", "total_rho: 1.3", r"total_rho is 1.3 but the measurements' rho add up to 1.257281"),
    ],
)
def test_bad_specs_are_located(tmp_path, old, new, message):
    path = _variant(tmp_path, old, new)
    result = _run("check", path)
    assert result.exit_code == 1, result.output
    assert re.search(message, result.output), result.output
    assert re.search(r"variant\.dps:\d+:\d+", result.output), result.output  # spec line and column


def test_inconsistent_data_stops_the_compile_with_exit_1(tmp_path):
    persons = pd.read_parquet(DATA / "persons.parquet")
    units = pd.read_parquet(DATA / "units.parquet")
    married = units.loc[units["HHT2"] == 1, "MAFID"].iloc[0]  # a married couple with own children under 18
    units.loc[units["MAFID"] == married, "HHT2"] = 2  # now coded "without own children"
    folder = tmp_path / "in"
    folder.mkdir()
    units.to_parquet(folder / "units.parquet")
    persons.to_parquet(folder / "persons.parquet")
    path = _variant(tmp_path, f'"{ROOT}/specs/data/sdhc/units.parquet"', f'"{folder}/units.parquet"', spec=PR)
    text = path.read_text().replace(f'"{ROOT}/specs/data/sdhc/persons.parquet"', f'"{folder}/persons.parquet"')
    text = text.replace('states: ["72"]', 'states: ["09", "23", "50", "72"]')
    path.write_text(text)
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert f"MAFID {married}" in result.output and "fit none of its cells" in result.output
    assert "Traceback" not in result.output


def test_expected_error_is_the_exact_variance_of_every_measurement(us_design):
    from dpspec.contract.mechanism import resolve_params

    spec = load(str(US))
    params, _ = resolve_params(PHSafe(), spec.mechanism, spec)
    rows = PHSafe().expected_error(spec, params, {})
    assert len(rows) == 46
    ph2 = next(r for r in rows if r.table == "PH2: state, iteration level *")
    # PH2 state_* rho 0.016371 (us/config.json line 21), tau 10: sigma^2 = 22^2 / (2 x 0.016371)
    assert ph2.variance == pytest.approx(discrete_gaussian_variance(F(484) / (2 * F("0.016371"))))


def test_records_typed_by_the_loader_count_as_raw_ones(us_design, bundled):
    """The loader gives enum columns (RTYPE : {2, 4}) as categoricals of text: the counts must
    not change with it."""
    from dpspec.api import load_data

    data = load_data(load(str(US)))[0]
    typed = measure_exact(us_design, Records(data["persons"], data["units"], us_design.states, "p"))
    raw = measure_exact(us_design, Records(*bundled, us_design.states, "p"))
    pd.testing.assert_frame_equal(typed, raw)
    assert typed.loc[typed.table == "PH1_denom", "count"].sum() > 0


def test_verify_finds_the_claim_consistent_and_refutes_too_little_noise(monkeypatch):
    """`dpspec verify` on the mechanism's own neighbours (one child added to a woman living alone):
    consistent with the production noise, refuted when every sigma^2 is 4,000 times too small."""
    result = _run("verify", PR, "--runs", 1500, "--seed", 3)
    assert result.exit_code == 0, result.output
    assert "neighbours: supplied by the mechanism" in result.output
    from dpspec_phsafe.design import Design

    real = Design.sigma2
    monkeypatch.setattr(Design, "sigma2", lambda self, m: real(self, m) / 4000)
    result = _run("verify", PR, "--runs", 1500, "--seed", 3)
    assert result.exit_code == 1, result.output
