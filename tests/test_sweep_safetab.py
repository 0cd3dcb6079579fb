"""SafeTab's realized error in a sweep (issue 28): every released count beside its confidential
count, through `run(..., keep_truths=True)` and `compared_counts`, measured by geography level and
size class; the realized mean absolute error against the discrete Gaussian's E|Z| at the design's
sigma² (an honest tolerance: 4.5 standard errors of a mean of |Z| over the cells and runs), for
SafeTab-P and SafeTab-H."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.api import parse, read_source
from dpspec.sweep import report
from dpspec.sweep.grid import parse_axis, product
from dpspec.sweep.runner import run_sweep

ROOT = Path(__file__).resolve().parents[1]
P_SPEC = ROOT / "specs" / "safetab_p_production.dps"
H_SPEC = ROOT / "specs" / "safetab_h_production.dps"
RUNS = 2


def _abs_moments(sigma2: float) -> tuple[float, float]:
    """E|Z| and E Z² of the discrete Gaussian with parameter sigma² (summed over its support)."""
    k = np.arange(-int(40 * math.sqrt(sigma2)) - 10, int(40 * math.sqrt(sigma2)) + 11, dtype=float)
    w = np.exp(-k * k / (2 * sigma2))
    w /= w.sum()
    return float((np.abs(k) * w).sum()), float((k * k * w).sum())


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two counties of the bundled synthetic state, thresholds low enough that small groups are
    broken down by sex and age (so cells, sums and margins are released, not only totals)."""
    low = {old: "[10, 40, 150]" for old in ("[471, 971, 6971]", "[971, 4971, 19971]")}
    return _two_county_sweep(
        tmp_path_factory.mktemp("safetab-sweep"), P_SPEC, "persons", low, "stage1_fraction=0.1", seed=2028
    )


def _two_county_sweep(folder, spec_path, table, edits, axis, seed):
    """A sweep of RUNS runs of a production SafeTab spec on the records of two counties of the
    bundled state (`table`.parquet), declared as the spec's geography (so no empty county joins
    the figures), with `edits` made to the spec's text."""
    records = pd.read_parquet(ROOT / "specs" / "data" / "safetab" / f"{table}.parquet")
    records = records[records["county"].isin(sorted(records["county"].unique())[:2])]
    records.to_parquet(folder / f"{table}.parquet")
    text = spec_path.read_text().replace(f'"data/safetab/{table}.parquet"', f'"{folder}/{table}.parquet"')
    for columns, name in (
        (["state", "county", "tract"], "geography.csv"),
        (["place"], "places.csv"),
        (["aiannh"], "aiannh.csv"),
    ):
        records[columns].dropna().drop_duplicates().to_csv(folder / name, index=False)
        text = text.replace(f'"data/safetab/{name}"', f'"{folder}/{name}"')
    if "safetab_p_published.parquet" in text:  # SafeTab-H's published totals: those of the declared units only
        totals = pd.read_parquet(ROOT / "specs" / "data" / "safetab" / "safetab_p_published.parquet")
        declared = {
            "nation": {"US"},
            "state": set(records["state"].astype(str)),
            "county": set(records["county"].astype(str)),
            "tract": set(records["tract"].astype(str)),
            "place": set(records["place"].dropna().astype(str)),
            "aiannh": set(records["aiannh"].dropna().astype(str)),
        }
        keep = [str(c) in declared.get(g, set()) for g, c in zip(totals["geography"], totals["geocode"])]
        totals[keep].to_parquet(folder / "safetab_p_published.parquet")
        text = text.replace('"data/safetab/safetab_p_published.parquet"', f'"{folder}/safetab_p_published.parquet"')
    text = text.replace('"data/', f'"{ROOT}/specs/data/')
    for old, new in edits.items():
        text = text.replace(old, new)
    path = folder / "two_counties.dps"
    path.write_text(text)
    spec = parse(read_source(str(path)), str(path))
    axes = [parse_axis(axis)]
    return run_sweep(spec, axes, product(axes), runs=RUNS, seed=seed)


def test_every_released_role_is_compared_by_geography_level_and_size(sweep):
    point = sweep.points[0]
    assert point.status == "ok" and point.runs_done == RUNS
    rows = point.realized
    tables = {r["table"] for r in rows}
    assert {r["run"] for r in rows} == set(range(RUNS))
    assert {r["level"] for r in rows} >= {"nation", "state", "county", "tract", "place"}
    for role in ("total", "cell", "sum of cells", "margin", "detailed-only total"):
        assert any(t.endswith(f", {role}") for t in tables), role
    assert {r["size"] for r in rows} >= {"all", "0", "1-9", "10-99"}
    for r in rows:
        assert r["cells"] > 0 and r["mae"] >= 0 and 0 <= r["share_off"] <= 1
        assert (r["mape_percent"] is None) == (r["size"] == "0")


def test_realized_error_matches_the_noise_the_design_states(sweep):
    """Stage 2's cells carry noise of sigma² = k / (2 rho_stage2) whatever detail the noisy stage 1
    chose (the stages draw independent noise), and no threshold drops them: the mean |released -
    true| over the cells with a positive truth is E|Z|. (Totals below county level are released
    only above a suppression threshold, which selects on the noise: not compared here.)"""
    point = sweep.points[0]
    mech, spec, params = point.checked.mechanism, point.checked.spec, point.checked.params
    design = mech.design(spec, params)
    sigma2 = {
        (c["geography"], c["iteration_level"]): c["noise_variance"]
        for c in mech.components(design, mech.fanouts(spec, params, design))
        if c["stage"] == "stage 2"
    }
    pooled = defaultdict(lambda: [0, 0.0])  # (geo, level, role) -> cells, sum of |error|
    for r in point.realized:
        if r["size"] in ("all", "0"):
            continue
        head, role = r["table"].rsplit(", ", 1)
        geo, level = r["level"], int(head.rsplit(" ", 1)[1])
        if role == "cell" or (role == "total" and geo in ("nation", "state")):
            pooled[(geo, level, role)][0] += r["cells"]
            pooled[(geo, level, role)][1] += r["cells"] * r["mae"]
    checked = 0
    for (geo, level, role), (n, total) in pooled.items():
        if n < 30:
            continue
        mean_abs, second = _abs_moments(sigma2[(geo, level)])
        se = math.sqrt((second - mean_abs**2) / n)
        assert abs(total / n - mean_abs) < 4.5 * se, (geo, level, role, n, total / n, mean_abs)
        checked += 1
    assert checked >= 6, pooled.keys()
    # and the statement is falsifiable: half the noise would be far outside the tolerance
    geo, level, role = max(pooled, key=lambda k: pooled[k][0])
    n, total = pooled[(geo, level, role)]
    half, second = _abs_moments(sigma2[(geo, level)] / 4)
    assert abs(total / n - half) > 4.5 * math.sqrt((second - half**2) / n)


def test_safetab_realized_errors_stay_in_the_internal_report(sweep):
    out = report.files(sweep)
    public = json.loads(out["json"][1])
    assert "realized" not in public and "realized" not in json.dumps(public["points"])
    internal = json.loads(out["internal_json"][1])
    assert any(r["table"].startswith("t1: county, iteration level 2") for r in internal["realized"])
    assert "<svg" in out["internal_html"][1] and "t1: tract" in out["internal_html"][1]
    assert set(out["realized_csv"][1]["level"]) >= {"county", "tract"}


# ---- SafeTab-H: households, its detail chosen from published (public) totals ----------------


@pytest.fixture(scope="module")
def h_sweep(tmp_path_factory):
    """The production SafeTab-H spec on the households of two counties of the bundled state (its
    public Detailed DHC-A totals as bundled): a sweep of two runs with `--runs`."""
    return _two_county_sweep(
        tmp_path_factory.mktemp("safetab-h-sweep"), H_SPEC, "households", {}, "total_rho=8.895302", seed=2029
    )


@pytest.mark.slow  # sweeps SafeTab-H (the module's h_sweep)
def test_safetab_h_sweep_reports_mae_mape_and_share_off_per_table_and_level(h_sweep):
    """Every row comes from `SafeTab.compared_counts` (t3 and t4, each geography level and role),
    with MAE, MAPE and share off per size class; and the realized MAE of the released cells at the
    nation and state is the discrete Gaussian's E|Z| at the design's sigma² = k / (2 rho), the
    whole rho spent on the chosen table (one stage)."""
    point = h_sweep.points[0]
    assert point.status == "ok" and point.runs_done == RUNS
    rows = point.realized
    assert {r["run"] for r in rows} == set(range(RUNS))
    tables = {r["table"] for r in rows}
    assert {t.split(":")[0] for t in tables} == {"t3", "t4"}
    assert {r["level"] for r in rows} >= {"nation", "state", "county", "tract"}
    for role in ("total", "cell", "sum of cells"):
        assert any(t.endswith(f", {role}") for t in tables), role
    for r in rows:
        assert r["cells"] > 0 and r["mae"] >= 0 and 0 <= r["share_off"] <= 1
        assert (r["mape_percent"] is None) == (r["size"] == "0")
    mech, spec, params = point.checked.mechanism, point.checked.spec, point.checked.params
    design = mech.design(spec, params)
    sigma2 = {
        (c["table"], c["geography"], c["iteration_level"]): c["noise_variance"]
        for c in mech.components(design, mech.fanouts(spec, params, design))
        if c.get("noise_variance")
    }
    pooled = defaultdict(lambda: [0, 0.0])
    for r in rows:
        head, role = r["table"].rsplit(", ", 1)
        if r["size"] in ("all", "0") or role != "cell" or r["level"] not in ("nation", "state"):
            continue
        key = (head.split(":")[0], r["level"], int(head.rsplit(" ", 1)[1]))
        pooled[key][0] += r["cells"]
        pooled[key][1] += r["cells"] * r["mae"]
    checked = 0
    for key, (n, total) in pooled.items():
        if n < 20:
            continue
        mean_abs, second = _abs_moments(sigma2[key])
        assert abs(total / n - mean_abs) < 4.5 * math.sqrt((second - mean_abs**2) / n), (key, n, total / n, mean_abs)
        checked += 1
    assert checked >= 2, dict(pooled)
    # falsifiable: a quarter of the variance would be far outside the tolerance
    key = max(pooled, key=lambda k: pooled[k][0])
    n, total = pooled[key]
    half, second = _abs_moments(sigma2[key] / 4)
    assert abs(total / n - half) > 4.5 * math.sqrt((second - half**2) / n)
