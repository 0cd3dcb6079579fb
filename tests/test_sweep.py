"""`dpspec sweep` (issue 28): the grid, overriding parameters through the checker, refusals, the
budget per point, expected error against the empirical variance, realized errors only in the
internal report, failing and interrupted sweeps."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.api import MechanismError, RunContext, parse, read_source
from dpspec.cli.main import main
from dpspec import progress
from dpspec.sweep import grid
from dpspec.sweep.grid import GridError, parse_axis, product
from dpspec.sweep.override import addressable, override
from dpspec.sweep.runner import pareto, run_sweep

SPECS = Path(__file__).resolve().parents[1] / "specs"
TOPDOWN = str(SPECS / "acs_ma_hispanic_topdown.dps")
RR = str(SPECS / "acs_ma_vision_rr.dps")
SAFETAB = str(SPECS / "safetab_p_production.dps")

SWAP = """spec "small swap"
domain d {
  geography g { state > county }
  table households unit household {
    state : category values from "counties.csv"
    county : category in state values from "counties.csv"
    size : int 1..4
    tenure : {owned, rented}
  }
}
data households from "households.csv"
public {
  keys "counties.csv" released "the test's list of counties"
}
invariants {
  count households by state, size, tenure
  count households by county, size
}
unit households : hamming
premetric pure
mechanism swap { table: households  match: state, size  swap: county  rate: 0.1 }
release {
  microdata households
  count households by county, tenure
}
"""


def load(path):
    return parse(read_source(path), path)


def cli(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def swap_spec(tmp_path):
    folder = tmp_path / "in"  # outputs go beside it: never where the inputs live
    folder.mkdir()
    rng = np.random.default_rng(5)
    n = 3000
    state = rng.choice(["A", "B"], size=n)
    county = np.where(state == "A", rng.choice(["a1", "a2", "a3"], size=n), rng.choice(["b1", "b2"], size=n))
    pd.DataFrame(
        {
            "state": state,
            "county": county,
            "size": rng.integers(1, 5, size=n),
            "tenure": rng.choice(["owned", "rented"], size=n),
        }
    ).to_csv(folder / "households.csv", index=False)
    (folder / "counties.csv").write_text("state,county\nA,a1\nA,a2\nA,a3\nB,b1\nB,b2\n")
    path = folder / "swap.dps"
    path.write_text(SWAP)
    return str(path)


# ---- the grid ------------------------------------------------------------------------------


def test_lists_percent_and_fractions_are_exact():
    axis = parse_axis("rate=0.01, 5%,1/20,0.1")
    assert axis.name == "rate"
    assert axis.values == (Fraction(1, 100), Fraction(1, 20), Fraction(1, 10))  # 5% and 1/20 are one value


def test_ranges_are_exact_and_inclusive():
    assert parse_axis("p=0.1:0.5:0.1").values == tuple(Fraction(k, 10) for k in range(1, 6))
    assert parse_axis("p=0:1:0.3").values == (0, Fraction(3, 10), Fraction(6, 10), Fraction(9, 10))
    assert parse_axis("p=0.5,0.1:0.2:0.1").values == (Fraction(1, 2), Fraction(1, 10), Fraction(1, 5))


def test_log_ranges_hit_both_ends_and_are_geometric():
    values = parse_axis("rho=log:1e-3:1:7").values
    assert len(values) == 7 and values[0] == Fraction(1, 1000) and values[-1] == 1
    ratios = [float(b / a) for a, b in zip(values, values[1:])]
    assert ratios == pytest.approx([10**0.5] * 6, rel=1e-5)
    assert all(isinstance(v, Fraction) for v in values)


def test_product_grid_shape_and_order():
    axes = [parse_axis("a=1,2"), parse_axis("b=0.1:0.3:0.1")]
    points = product(axes)
    assert len(points) == 6
    assert points[0] == {"a": 1, "b": Fraction(1, 10)} and points[1] == {"a": 1, "b": Fraction(1, 5)}
    assert points[-1] == {"a": 2, "b": Fraction(3, 10)}


@pytest.mark.parametrize(
    "text, message",
    [
        ("rate", "expected NAME=VALUES"),
        ("rate=", "no values"),
        ("rate=0.5:0.1:0.1", "no values"),
        ("rate=x", "is not a number"),
        ("rate=0:1:0", "step must be positive"),
        ("rho=log:0:1:3", "positive"),
        ("rho=log:1:2", "log:START:STOP:N"),
        ("rate=0:1:1e-9", "at most"),
    ],
)
def test_bad_axes_are_refused(text, message):
    with pytest.raises(GridError, match=message):
        parse_axis(text)


def test_grid_limits():
    with pytest.raises(GridError, match="the grid is empty"):
        grid.check_size(0, 1, 100, False)
    with pytest.raises(GridError, match="more than the limit of 100; .* --yes"):
        grid.check_size(101, 1, 100, False)
    grid.check_size(101, 1, 100, True)
    with pytest.raises(GridError, match="given twice"):
        product([parse_axis("a=1"), parse_axis("a=2")])


def test_pareto_keeps_points_no_other_beats_on_both():
    items = [(0, 1.0, 5.0), (1, 2.0, 3.0), (2, 2.0, 4.0), (3, 3.0, 3.0), (4, 1.0, 5.0), (5, math.inf, 0.0)]
    assert pareto(items) == {0, 1, 4}


# ---- overriding through the checker ---------------------------------------------------------


def test_nested_topdown_parameters_are_addressable_and_rechecked():
    spec = load(TOPDOWN)
    names = addressable(spec)
    assert {"rho", "levels.nation", "levels.PUMA", "queries.total", "queries.detailed", "pass_tolerance"} <= set(names)
    new = override(spec, {"queries.total": Fraction(1, 2), "queries.detailed": Fraction(1, 2), "rho": Fraction(2)})
    from dpspec.api import check

    params = check(new).params
    assert params["rho"] == 2
    assert params["queries"] == {"total": Fraction(1, 2), "detailed": Fraction(1, 2)}  # typed: the plain values
    assert spec.mechanism.params.get("rho").value == Fraction(1, 10)  # the original IR is untouched


def test_safetab_budgets_and_thresholds_are_addressable():
    names = addressable(load(SAFETAB))
    assert "tables.t1.rho.nation.level2" in names and names["tables.t1.rho.nation.level2"] == Fraction("2.134")
    assert names["tables.t1.thresholds.county.level2.1"] == 4971
    assert "stage1_fraction" in names and "total_rho" in names


def test_an_unknown_name_is_refused_with_did_you_mean():
    res = CliRunner().invoke(main, ["sweep", TOPDOWN, "--vary", "level.PUMA=0.5", "-o", "unused"])
    assert res.exit_code == 1
    assert "unknown parameter 'level.PUMA'" in res.output and "did you mean 'levels.PUMA'?" in res.output


def test_a_value_outside_the_range_is_refused_by_the_checker(swap_spec, tmp_path):
    res = CliRunner().invoke(main, ["sweep", swap_spec, "--vary", "rate=0.1,1.5", "-o", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "at the point rate = 1.5: parameter 'rate': 1.5 is outside the allowed range [0, 1]" in res.output
    assert not (tmp_path / "o").exists()


def test_shares_that_no_longer_sum_are_refused_and_balance_fixes_them(tmp_path):
    res = CliRunner().invoke(main, ["sweep", TOPDOWN, "--vary", "levels.nation=0.1,0.3", "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "shares must sum to exactly 1" in res.output
    res = cli(
        "sweep", TOPDOWN, "--vary", "levels.nation=0.1,0.3", "--balance", "levels.PUMA", "-o", str(tmp_path / "o")
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [p["values"] for p in report["points"]] == [
        {"levels.nation": "0.1", "levels.PUMA": "0.9"},
        {"levels.nation": "0.3", "levels.PUMA": "0.7"},
    ]
    # TopDown's expected error: the measurement variance s^2 / (2 rho_q) at each level's share
    nation_total = [e for e in report["points"][0]["expected_error"] if e["table"] == "nation: total"][0]
    assert nation_total["variance"] == pytest.approx(2 / (2 * 0.1 * 0.1 * 0.25), rel=1e-9)
    assert not (tmp_path / "o" / "internal-report.html").exists()  # no runs: nothing confidential


def test_an_empty_grid_and_a_large_grid_are_refused(tmp_path):
    res = CliRunner().invoke(main, ["sweep", RR, "--vary", "p=0.9:0.6:0.1"])
    assert res.exit_code == 1 and "no values" in res.output
    res = CliRunner().invoke(
        main, ["sweep", RR, "--vary", "p=0.6:0.9:0.01", "--limit", "10", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 1 and "31 points" in res.output and "--yes" in res.output
    assert not (tmp_path / "o").exists()


# ---- budgets and expected error --------------------------------------------------------------


def test_budget_per_point_in_the_spec_currency_and_the_common_one():
    spec = load(TOPDOWN)
    axes = [parse_axis("rho=0.1,1")]
    sweep = run_sweep(spec, axes, product(axes))
    a, b = sweep.points
    assert a.budget == {"premetric": "zcdp", "rho": 0.1} and b.budget["rho"] == 1
    assert a.common["method"] == "cks20" and a.common["delta"] == 1e-10
    from dpspec.budget import ZCDP, convert

    assert a.common["epsilon"] == pytest.approx(convert(ZCDP(0.1), "approx", delta=1e-10).result.epsilon)
    assert a.bounds_hold and not b.bounds_hold  # the spec declares rho <= 0.1


def test_randomized_response_expected_variance_matches_many_runs():
    """p(1-p) / (n (2p-1)^2) for the estimated proportion, against 3000 runs on the ACS data."""
    spec = load(RR)
    sweep = run_sweep(spec, [parse_axis("p=0.7")], [{"p": Fraction(7, 10)}])
    point = sweep.points[0]
    expected = point.expected[0].variance
    from dpspec.api import check, load_data, make_rng

    checked = check(point.checked.spec)
    data, _ = load_data(point.checked.spec)
    mech = checked.mechanism
    n = len(data["persons"])
    assert expected == pytest.approx(0.21 / (n * 0.16))
    rng = make_rng(11)
    truth = (data["persons"]["DEYE"].astype(str) == "1").to_numpy()
    runs = 3000
    from dpspec.api import bernoulli  # the sampler the mechanism draws with, batched over the runs

    reports = np.where(bernoulli(Fraction(7, 10), (runs, n), rng), truth, ~truth)
    estimates = (reports.mean(axis=1) - 0.3) / 0.4
    variance = estimates.var(ddof=1)
    # the sample variance of 3000 draws has relative sd sqrt(2/2999) = 2.6%: 4 sd
    assert variance == pytest.approx(expected, rel=4 * math.sqrt(2 / (runs - 1)))
    assert abs(estimates.mean() - truth.mean()) < 4 * math.sqrt(expected / runs)
    # and the mechanism's own run draws the same law: its estimate is one of these draws
    one = mech.run(checked.spec, checked.params, data, RunContext(rng)).outputs["estimate"].iloc[0]
    assert abs(one["estimate"] - truth.mean()) < 6 * math.sqrt(expected)


def test_topdown_expected_variance_matches_the_spread_of_its_measurements():
    """The noisy measurements of 12 runs: the pooled variance across runs per cell against the
    expected variance of the PUMA-level queries (275 degrees of freedom: relative sd 8.5%)."""
    spec = load(TOPDOWN)
    sweep = run_sweep(spec, [parse_axis("rho=0.1")], [{"rho": Fraction(1, 10)}])
    point = sweep.points[0]
    expected = {e.table: e.variance for e in point.expected}
    from dpspec.api import check, load_data
    from dpspec.engine import EngineRun, get_engine, run_mechanism
    from dpspec.run.compiler import make_rng
    from dpspec import progress

    checked = check(spec)
    data, _ = load_data(spec)
    engine = get_engine("local")
    frames = []
    with progress.reporting(None):
        for r in range(12):
            release = run_mechanism(
                checked.mechanism, spec, checked.params, data, make_rng(r), EngineRun(engine, 100 + r)
            )
            m = release.outputs["measurements"]
            m = m.to_pandas() if hasattr(m, "to_pandas") else m
            frames.append(m.assign(run=r))
    table = pd.concat(frames)
    table = table.astype({"level": str, "query": str, "geocode": str})
    for query, name in (("HISP", "PUMA: detailed"), ("total", "PUMA: total")):
        rows = table[(table["level"] == "PUMA") & (table["query"] == query)]
        cells = rows.groupby(["geocode", "cell"])["value"]
        dof = cells.size() - 1
        df = int(dof.sum())
        assert df == (5 * 5 if query == "HISP" else 5) * 11
        pooled = float((cells.var(ddof=1) * dof).sum() / df)
        assert pooled == pytest.approx(expected[name], rel=4 * math.sqrt(2 / df)), (name, pooled, df)


# ---- realized errors: internal only ---------------------------------------------------------


def test_realized_errors_never_reach_the_public_report(swap_spec, tmp_path):
    out = tmp_path / "o"
    res = cli(
        "sweep",
        swap_spec,
        "--vary",
        "rate=0.05,0.5",
        "--runs",
        "3",
        "--seed",
        "4",
        "-o",
        str(out),
        "--units",
        "mechanism",
    )  # local: the option is accepted and changes nothing
    assert res.exit_code == 0, res.output
    internal = json.loads((out / "internal-report.json").read_text())
    realized = internal["realized"]
    assert {r["table"] for r in realized} >= {
        "count households by county, tenure",
        "county: size x tenure",
        "state: total",
    }
    by = {(r["point"], r["table"], r["size"]): r for r in realized}
    assert (
        by[(1, "count households by county, tenure", "all")]["mape_mean"]
        > by[(0, "count households by county, tenure", "all")]["mape_mean"]
        > 0
    )
    assert by[(0, "county: total", "all")]["mae_mean"] == 0  # county totals are invariant: exact
    figures = {f"{r['mae_mean']:.6g}" for r in realized if r["mae_mean"]} | {
        f"{r['mape_mean']:.6g}" for r in realized if r["mape_mean"]
    }
    for name in ("report.json", "report.html", "report.md", "sweep.csv", "expected-error.csv"):
        text = (out / name).read_text()
        for word in ("mape", "MAPE", "realized", "mae_mean", "share_off", "Pareto"):
            assert word not in text, (name, word)
        assert not any(f in text for f in figures if len(f) > 4), name
    public = json.loads((out / "report.json").read_text())
    assert set(public) < set(internal) and "realized" not in public and "pareto" not in public
    # the internal report says what choosing by these figures means, and names the spec line
    html = (out / "internal-report.html").read_text()
    assert "data-dependent design" in html and "tuned on confidential" in html and "<svg" in html
    assert "across runs, by point" in html  # the boxplots
    md = (out / "internal-report.md").read_text()
    assert "tuned on confidential" in md
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "sweep" and set(manifest["files"]) >= {"report.html", "realized-errors-internal.csv"}
    from dpspec.publish.output_set import verify_set

    assert verify_set(str(out)) == []


def test_a_failing_point_is_reported_and_the_others_complete(swap_spec, tmp_path, monkeypatch):
    from dpspec_swap.plugin import PermutationSwapping

    real = PermutationSwapping.run

    def flaky(self, spec, params, data, ctx):
        if params["rate"] == Fraction(1, 5):
            raise MechanismError("the solver gave up")
        return real(self, spec, params, data, ctx)

    monkeypatch.setattr(PermutationSwapping, "run", flaky)
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["sweep", swap_spec, "--vary", "rate=0.1,0.2,0.3", "--runs", "2", "-o", str(out)])
    assert res.exit_code == 1
    assert "point 1 (rate = 0.2)" in res.output and "FAILED: the solver gave up" in res.output
    internal = json.loads((out / "internal-report.json").read_text())
    assert internal["failures"] == [{"point": 1, "values": {"rate": "0.2"}, "error": "the solver gave up"}]
    assert [p["status"] for p in internal["points"]] == ["ok", "failed", "ok"]
    assert {r["point"] for r in internal["realized"]} == {0, 2}
    assert "the solver gave up" not in (out / "report.json").read_text()  # run messages may quote data


def test_an_interrupted_sweep_leaves_no_partial_output_set(swap_spec, tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert cli("sweep", swap_spec, "--vary", "rate=0.1", "-o", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    from dpspec_swap.plugin import PermutationSwapping

    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    real = PermutationSwapping.run
    monkeypatch.setattr(PermutationSwapping, "run", interrupted)
    res = CliRunner().invoke(main, ["sweep", swap_spec, "--vary", "rate=0.2,0.3", "--runs", "2", "-o", str(out)])
    assert res.exit_code == 1 and "interrupted; no output was written" in res.output and len(calls) == 3
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the earlier set, whole
    # no staging folder left behind, and no lock file (a run removes its lock while it holds it)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "o"]


def test_randomized_response_realized_error_by_run(tmp_path):
    sweep = run_sweep(load(RR), [parse_axis("p=0.75,0.95")], product([parse_axis("p=0.75,0.95")]), runs=3, seed=2)
    for p in sweep.points:
        rows = [r for r in p.realized if r["size"] == "all"]
        assert len(rows) == 3 and all(r["table"] == "count of 'yes' (estimated)" for r in rows)
    mean = [np.mean([r["mae"] for r in p.realized if r["size"] == "all"]) for p in sweep.points]
    sd = [math.sqrt(p.expected[0].variance) * 7634 for p in sweep.points]  # n = 7,634 persons
    assert mean[0] < 5 * sd[0] and mean[1] < 5 * sd[1]


# ---- the seed's figure -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_seed_figure_point_at_half(tmp_path):
    """MAPE of the 1940 county x tenure table at p = 50%: the seed reports 13.78%. One run here
    (it swaps 1.14M households); benchmarks/bench_sweep.py runs the figure's 4 rates x 20 runs:
    mean 13.66%, run-to-run sd 0.21 points at 50%, which sets the tolerance: 3 sd of the seed's value."""
    spec = load(str(SPECS / "ma1940_swap.dps"))
    sweep = run_sweep(spec, [parse_axis("rate=0.5")], [{"rate": Fraction(1, 2)}], runs=1, seed=28)
    mapes = [
        r["mape_percent"]
        for r in sweep.points[0].realized
        if r["table"] == "count households by county, tenure" and r["size"] == "all"
    ]
    assert len(mapes) == 1
    assert all(abs(m - 13.78) < 3 * 0.21 for m in mapes), mapes
    assert round(sweep.points[0].common["epsilon"], 2) == 12.48


def test_safetab_expected_variance_follows_the_stage_split():
    """k / (2 rho_stage) per noisy count: doubling the stage-1 fraction halves stage 1's variance and
    moves stage 2's by (1 - 0.1) / (1 - 0.2); nation, level 1: rho 0.008 with k = 9 groups."""
    axes = [parse_axis("stage1_fraction=0.1,0.2")]
    a, b = run_sweep(load(SAFETAB), axes, product(axes)).points
    ea = {e.table: e.variance for e in a.expected}
    eb = {e.table: e.variance for e in b.expected}
    assert set(ea) == set(eb) and len(ea) == 22
    assert ea["t1: nation, iteration level 1, stage 1"] == pytest.approx(9 / (2 * 0.008 * 0.1), rel=1e-9)
    for name in ea:
        ratio = 2.0 if name.endswith("stage 1") else 0.8 / 0.9
        assert ea[name] / eb[name] == pytest.approx(ratio, rel=1e-6), name
    assert a.budget == b.budget  # the split moves noise between stages, not the total


@pytest.mark.slow  # starts headless Chromium
@pytest.mark.browser
def test_the_internal_report_renders_in_a_headless_browser(swap_spec, tmp_path):
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian package 'chromium')")
    out = tmp_path / "o"
    assert (
        cli("sweep", swap_spec, "--vary", "rate=0.05,0.5", "--runs", "2", "--seed", "1", "-o", str(out)).exit_code == 0
    )
    for name in ("report.html", "internal-report.html"):
        html = (out / name).read_text()
        assert "<script" not in html and "://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), name
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            (out / "internal-report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    ).stdout
    assert "Data-dependent design." in dom and "Pareto points" in dom
    assert dom.count("<svg") >= 3  # expected error, realized error against budget, boxplots


def test_runs_of_a_mechanism_that_only_records_a_budget_are_refused(tmp_path):
    spec = str(SPECS / "registry" / "dhc_persons.dps")
    res = CliRunner().invoke(main, ["sweep", spec, "--vary", "rho=1,2", "--runs", "1", "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "no algorithm to run" in res.output
    res = cli("sweep", spec, "--vary", "rho=1,2", "-o", str(tmp_path / "o"))  # budgets alone are fine
    assert res.exit_code == 0, res.output
    points = json.loads((tmp_path / "o" / "report.json").read_text())["points"]
    assert [p["budget"]["rho"] for p in points] == [1, 2]


@pytest.mark.slow
def test_a_sweep_on_spark_gives_the_local_figures(swap_spec, tmp_path, spark_session):
    """Each run's units of work run on the engine with streams keyed by (run key, point, run): the
    same seed gives the same realized errors on Spark as in this process."""
    from dpspec.engine.spark import SparkEngine

    folder = Path(swap_spec).parent
    pd.read_csv(folder / "households.csv").to_parquet(folder / "households.parquet")  # Spark holds Parquet tables
    text = (folder / "swap.dps").read_text().replace("households.csv", "households.parquet")
    spec = parse(text, str(folder / "swap_pq.dps"))
    axes = [parse_axis("rate=0.2,0.5")]  # a tiny grid: Spark's per-task overhead is the cost here
    local = run_sweep(spec, axes, product(axes), runs=1, seed=9)
    seen = []
    with progress.reporting(lambda stage, done, total: seen.append((stage, done, total))):
        spark = run_sweep(spec, axes, product(axes), runs=1, seed=9, engine=SparkEngine(session=spark_session))
    assert spark.engine == "spark"
    assert [p.realized for p in spark.points] == [p.realized for p in local.points]
    assert all(p.realized for p in local.points) and [p.runs_done for p in spark.points] == [1, 1]
    # every (point, run) was a Spark task of its own: the bar counts them
    tasks = [(d, t) for stage, d, t in seen if stage == "sweep (points x runs)"]
    assert tasks[-1] == (2, 2) and {t for _, t in tasks} <= {1, 2}
    # (units="mechanism", each run's own units spread on Spark, is the path dpspec compile takes;
    # its figures equal the local ones by the engine tests. Not repeated here: Spark's cost.)
    with pytest.raises(ValueError, match="units"):
        run_sweep(spec, axes, product(axes), runs=1, units="strata")


@pytest.mark.slow
def test_an_interrupted_sweep_on_spark_leaves_no_partial_output_set(swap_spec, tmp_path, monkeypatch, spark_session):
    """Ctrl-C on the driver as the runs are handed to Spark as tasks (one per point and run, after
    every point was accounted): the same path as a local interruption (exit 1, no output set
    written, the earlier set whole, no staging folder), and the session (not the sweep's to stop)
    is left running. The tasks themselves are not started, and the data is a CSV read on the
    driver: Spark's Python workers and engine-side reads would cost this test a minute."""
    from dpspec.engine.spark import SparkEngine

    out = tmp_path / "o"
    assert cli("sweep", swap_spec, "--vary", "rate=0.1", "-o", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    tasks = []

    def interrupted(self, items, *args, **kwargs):
        tasks.append(len(items))  # one task per (point, run)
        raise KeyboardInterrupt

    monkeypatch.setattr(SparkEngine, "map_items", interrupted)
    res = CliRunner().invoke(
        main, ["sweep", swap_spec, "--vary", "rate=0.2,0.3", "--runs", "2", "--engine", "spark", "-o", str(out)]
    )
    assert res.exit_code == 1 and "interrupted; no output was written" in res.output, res.output
    assert tasks == [4]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "o"]
    assert not spark_session.sparkContext._jsc.sc().isStopped()  # (a job here would cost a cold JVM's first)


@pytest.mark.slow
def test_a_failing_point_on_spark_is_reported_and_the_others_complete(tmp_path, spark_session, stratified_plugin):
    """The run fails inside its task on an executor (the mechanism, shipped with the task, raises
    at scale 3): the point is reported with the run and message, the other points complete."""
    from dpspec.engine.spark import SparkEngine

    from .conftest import write_stratified_case

    path = write_stratified_case(str(tmp_path), rows=400)
    text = Path(path).read_text().replace("scale: 2 }", "scale: 2  fail_scale: 3 }")
    spec = parse(text, path)
    axes = [parse_axis("scale=2,3,4")]
    sweep = run_sweep(spec, axes, product(axes), runs=1, seed=5, engine=SparkEngine(session=spark_session))
    assert [p.status for p in sweep.points] == ["ok", "failed", "ok"]
    assert sweep.points[1].error == "run 0: RuntimeError: told to fail at scale 3" and not sweep.points[1].realized
    assert [p.runs_done for p in sweep.points] == [1, 0, 1]
    assert sweep.points[0].common and sweep.points[2].common  # budgets accounted on the driver


@pytest.mark.slow  # starts a process pool
def test_points_as_units_of_work_on_a_process_pool_give_the_same_figures(swap_spec):
    spec = load(swap_spec)
    axes = [parse_axis("rate=0.05,0.2,0.5")]
    one = run_sweep(spec, axes, product(axes), runs=2, seed=12)
    pooled = run_sweep(spec, axes, product(axes), runs=2, seed=12, workers=2)
    assert [p.status for p in pooled.points] == ["ok"] * 3
    assert [p.realized for p in pooled.points] == [p.realized for p in one.points]
    assert [p.common for p in pooled.points] == [p.common for p in one.points]
    assert pooled.data_hashes == one.data_hashes and one.data_hashes


def test_a_task_run_again_draws_the_same_noise(swap_spec):
    """What Spark does when it retries a task after losing an executor: the same (point, run)
    payload, run again in a worker, gives the same figures as the first time and as the local sweep."""
    from dpspec.sweep import runner

    spec = load(swap_spec)
    axes = [parse_axis("rate=0.1,0.5")]
    local = run_sweep(spec, axes, product(axes), runs=2, seed=31)
    point = local.points[1]
    hashes = local.data_hashes
    from dpspec.engine import new_run_key

    payload = (spec, hashes, point.checked, point.index, point.values, 1, new_run_key(31), local.off_by)
    first = runner._task((1, 1), payload, None)
    runner._WORKER.clear()  # a fresh worker: reads the data again
    again = runner._task((1, 1), payload, None)
    assert "error" not in first and first["rows"] == again["rows"]
    assert first["rows"] == [r for r in point.realized if r["run"] == 1]
    stale = runner._task((1, 1), (spec, {k: "0" * 64 for k in hashes}, *payload[2:]), None)
    assert "differ from the data the driver read" in stale["error"]
    runner._WORKER.clear()
