"""The aggregate mechanism: noisy counts, sums, means and quantiles over declared keys, with an
exact budget and a 95% interval from the exact noise law beside every number."""

from __future__ import annotations

import textwrap
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.api import check
from dpspec.errors import DataError, SpecError

STAFF = """region,grade,salary
north,1,40
north,2,90
south,3,120
south,1,35
east,4,250
"""


def _spec(
    tmp_path,
    mechanism: str,
    columns: str = "",
    unit: str = "unit staff : symdiff",
    extra: str = "",
    csv: str = STAFF,
    budget: str = "budget epsilon <= 100",
    premetric: str = "premetric pure",
) -> str:
    (tmp_path / "staff.csv").write_text(csv)
    text = textwrap.dedent("""\
        spec "staff"
        domain hr {{
          table staff unit person {{
            region : {{north, south, east, west}}
            grade  : int 1..4
            salary : int 0..500{columns}
          }}
        }}
        data staff from "staff.csv"
        {extra}
        {unit}
        {premetric}
        mechanism aggregate {{
        {mechanism}
        }}
        {budget}
        """).format(columns=columns, extra=extra, unit=unit, premetric=premetric, mechanism=mechanism, budget=budget)
    (tmp_path / "staff.dps").write_text(text)
    return str(tmp_path / "staff.dps")


def _compile(path, seed=1):
    return dpspec.compile(dpspec.load(path), seed=seed)


def test_every_declared_region_is_released_and_the_empty_one_has_its_noise(tmp_path):
    out = _compile(_spec(tmp_path, "table: staff  by: region  epsilon: 1  statistic: count")).outputs["statistics"]
    assert out["region"].tolist() == ["north", "south", "east", "west"]  # west: nobody, still released
    assert {"count", "count_scale", "count_lower", "count_upper"} <= set(out.columns)
    assert (out["count_lower"] <= out["count"]).all() and (out["count"] <= out["count_upper"]).all()


def test_shares_split_the_epsilon_exactly_and_the_budget_is_their_sum(tmp_path):
    path = _spec(
        tmp_path,
        textwrap.dedent("""\
        table: staff  by: region  epsilon: 1
        queries: {
          n: { statistic: count  share: 1/4 }
          pay: { statistic: sum  column: salary  bounds: [0, 200]  share: 3/4 }
        }"""),
    )
    result = _compile(path)
    assert result.ledger.declared.epsilon == pytest.approx(1.0, abs=1e-15)
    notes = " ".join(result.statement.notes)
    assert "discrete Laplace scale 4 for L1 sensitivity 1" in notes  # 1 / (1/4)
    assert "discrete Laplace scale 800/3 for L1 sensitivity 200" in notes  # 200 / (3/4)


def test_a_unit_holding_at_most_three_rows_triples_the_pure_budget(tmp_path):
    columns = "\n    team   : int 1..9"
    csv = "region,grade,salary,team\nnorth,1,40,1\nnorth,2,90,1\nsouth,3,120,2\n"
    path = _spec(tmp_path, "table: staff  by: region  epsilon: 1  statistic: count", columns=columns, csv=csv)
    text = (
        open(path)
        .read()
        .replace(
            "  table staff unit person {",
            "  table teams unit team {\n    team : int 1..9\n  }\n  table staff unit person in teams by team at most 3 {",
        )
        .replace("unit staff : symdiff", "unit teams : symdiff holds at most 3 staff")
    )
    (tmp_path / "teams.csv").write_text("team\n1\n2\n")
    text = text.replace('data staff from "staff.csv"', 'data staff from "staff.csv"\ndata teams from "teams.csv"')
    open(path, "w").write(text)
    result = _compile(path)
    assert result.ledger.declared.epsilon == pytest.approx(3.0)


def test_change_one_counts_cost_twice_add_remove_under_laplace_and_twice_under_gaussian(tmp_path):
    pure = _compile(
        _spec(
            tmp_path,
            "table: staff  by: region  epsilon: 1  statistic: count",
            unit="unit staff : hamming",
            extra="invariants { count staff }",
        )
    )
    assert "L1 sensitivity 2" in " ".join(pure.statement.notes)
    zcdp = _compile(
        _spec(
            tmp_path,
            "table: staff  by: region  noise: gaussian  rho: 1/2  statistic: count",
            unit="unit staff : hamming",
            extra="invariants { count staff }",
            premetric="premetric zcdp",
            budget="budget rho <= 1",
        )
    )
    notes = " ".join(zcdp.statement.notes)
    assert "sigma² 2 for L2² sensitivity 2" in notes  # 2 / (2 · 1/2): not the 4 of two add/remove steps
    assert zcdp.ledger.declared.rho == pytest.approx(0.5)


@pytest.mark.parametrize("noise,setting", [("laplace", "epsilon: 1/2"), ("gaussian", "rho: 1/8")])
def test_intervals_cover_at_their_exact_rate_and_the_noise_variance_is_the_theory(tmp_path, noise, setting):
    """20,000 cells in one release are 20,000 independent trials: the 95% intervals' coverage is the
    exact law's P(|X| <= k) within 4 standard errors, and the noise's variance is the law's within 6%
    (its standard error is about 1.6% for the Laplace, 1% for the Gaussian)."""
    from dpspec_aggregate.accuracy import half_width, variance

    cells = 20_000
    csv = "region,grade,salary,k\n" + "".join(f"north,1,1,{i}\n" for i in range(1, cells + 1, 2))
    columns = f"\n    k      : int 1..{cells}"
    premetric = "premetric pure" if noise == "laplace" else "premetric zcdp"
    budget = "budget epsilon <= 1" if noise == "laplace" else "budget rho <= 1"
    out = _compile(
        _spec(
            tmp_path,
            f"table: staff  by: k  noise: {noise}  {setting}  statistic: count",
            columns=columns,
            csv=csv,
            premetric=premetric,
            budget=budget,
        ),
        seed=11,
    ).outputs["statistics"]
    truth = (out["k"] % 2 == 1).astype(int).to_numpy()  # odd k: one person; even k: empty
    noise_draws = out["count"].to_numpy() - truth
    parameter = Fraction(2) if noise == "laplace" else Fraction(4)  # t = 1 / (1/2); sigma² = 1 / (2 · 1/8)
    k, exact_coverage = half_width(noise, parameter)
    covered = ((out["count_lower"] <= truth) & (truth <= out["count_upper"])).mean()
    se = np.sqrt(exact_coverage * (1 - exact_coverage) / cells)
    assert exact_coverage >= 0.95 and abs(covered - exact_coverage) < 4 * se
    assert noise_draws.var() == pytest.approx(variance(noise, parameter), rel=0.06)


def test_a_quantile_at_a_large_epsilon_lands_near_the_cells_median(tmp_path):
    csv = (
        "region,grade,salary\n"
        + "".join(f"north,1,{v}\n" for v in range(0, 101))
        + "".join(f"south,1,{v}\n" for v in range(200, 301))
    )
    out = (
        _compile(
            _spec(
                tmp_path,
                "table: staff  by: region  epsilon: 20\nstatistic: quantile  column: salary  "
                "bounds: [0, 400]  q: 1/2  grid_step: 1",
                csv=csv,
            )
        )
        .outputs["statistics"]
        .set_index("region")
    )
    assert abs(out.loc["north", "quantile"] - 50) <= 5 and abs(out.loc["south", "quantile"] - 250) <= 5
    assert 0 <= out.loc["west", "quantile"] <= 400  # an empty cell still gets a draw on the grid


def test_a_mean_is_kept_within_its_bounds_and_says_it_has_no_exact_interval(tmp_path):
    out = _compile(
        _spec(tmp_path, "table: staff  by: region  epsilon: 1/10\nstatistic: mean  column: salary  bounds: [0, 200]")
    ).outputs["statistics"]
    assert out["mean"].between(0, 200).all() and out["mean_lower"].isna().all()


def test_values_outside_the_bounds_are_clipped_and_counted_for_the_internal_report(tmp_path):
    result = _compile(_spec(tmp_path, "table: staff  epsilon: 1  statistic: sum  column: salary  bounds: [0, 100]"))
    assert result.release.internal["clipped"] == {"sum": 2}  # 120 and 250
    assert result.release.internal["truth"]["sum:value"].tolist() == [40 + 90 + 100 + 35 + 100]


@pytest.mark.parametrize(
    "mechanism,message",
    [
        ("table: staff  epsilon: 1  statistic: sum  column: salary  bounds: [10, 5]", "lo > hi"),
        (
            "table: staff  epsilon: 1  statistic: quantile  column: salary  bounds: [0, 9]  q: 3/2",
            "strictly between 0 and 1",
        ),
        ("table: staff  epsilon: 1  statistic: sum  column: region  bounds: [0, 1]", "needs a numeric column"),
        ("table: staff  epsilon: 1  statistic: sum  column: salary", "needs clipping 'bounds"),
        (
            "table: staff  epsilon: 1\nqueries: { a: { statistic: count  share: 1/2 } b: { statistic: count  share: 1/3 } }",
            "add up to 5/6, not 1",
        ),
        ("table: staff  noise: gaussian  epsilon: 1  statistic: count", "set by 'rho', not 'epsilon'"),
    ],
)
def test_bad_parameters_are_located_spec_errors(tmp_path, mechanism, message):
    with pytest.raises(SpecError) as err:
        check(dpspec.load(_spec(tmp_path, mechanism)))
    assert message in str(err.value)
    assert err.value.diagnostics[0].line is not None


def test_an_undeclared_key_column_is_refused_at_check(tmp_path):
    path = _spec(
        tmp_path,
        "table: staff  by: office  epsilon: 1  statistic: count",
        columns="\n    office : category",
        csv="region,grade,salary,office\nnorth,1,1,x\n",
    )
    with pytest.raises(SpecError, match="column 'office' of table 'staff' keys mechanism 'aggregate'"):
        check(dpspec.load(path))


def test_a_missing_numeric_value_is_a_data_error_naming_column_and_row(tmp_path):
    path = _spec(
        tmp_path,
        "table: staff  epsilon: 1  statistic: sum  column: salary  bounds: [0, 100]",
        csv="region,grade,salary\nnorth,1,40\nnorth,2,\n",
    )
    text = open(path).read().replace("salary : int 0..500", "salary : int 0..500 nullable")
    open(path, "w").write(text)
    with pytest.raises(DataError, match="column 'salary', row 2"):
        _compile(path)


def test_the_budget_json_lists_every_measurement_with_its_interval(tmp_path):
    from dpspec.api import check as checked_of

    c = checked_of(dpspec.load(_spec(tmp_path, "table: staff  by: region  epsilon: 1  statistic: count")))
    rows = c.mechanism.budget_breakdown(c.spec, c.params).figures["measurements"]
    assert rows[0]["spent"] == "1" and rows[0]["interval_half_width"] >= 1
    expected = c.mechanism.expected_error(c.spec, c.params, {})
    assert expected[0].variance == pytest.approx(2 * np.exp(-1) / (1 - np.exp(-1)) ** 2)
    assert isinstance(pd.DataFrame(rows), pd.DataFrame)


# ---- the internal report: released values against the confidential ones ----------------------


def test_the_internal_report_compares_every_cell_with_its_true_value(tmp_path):
    path = _spec(
        tmp_path,
        textwrap.dedent("""\
        table: staff  by: region  epsilon: 2
        queries: {
          n: { statistic: count }
          pay: { statistic: mean  column: salary  bounds: [0, 100] }
        }"""),
    )
    result = dpspec.compile(dpspec.load(path), seed=4, runs=3)
    u = result.utility
    assert u["runs"] == 3 and u["records"] == 5 and u["cells"] == 4
    n, pay = u["queries"]
    cells = u["per_cell"]
    assert cells["region"] == ["north", "south", "east", "west"]
    assert cells["n (true)"] == [2.0, 2.0, 1.0, 0.0]
    assert cells["n (released)"] == result.outputs["statistics"]["n"].astype(float).tolist()
    # the mean's truth is unclipped (east: 250, not 100), west has none; clipping's own bias is stated
    assert cells["pay (true)"] == [65.0, 77.5, 250.0, None]
    assert pay["cells"] == 3 and pay["cells_without_a_value"] == 1
    assert pay["clipped_values"] == 2 and pay["clipped_share"] == pytest.approx(2 / 5)
    assert pay["clipping_bias"] == pytest.approx(((65 - 65) + (67.5 - 77.5) + (100 - 250)) / 3)
    assert n["mean_absolute_error"] >= 0 and n["rmse"] >= n["mean_absolute_error"]


def test_the_report_explains_clipping_publicly_and_counts_it_internally(tmp_path):
    from dpspec.report import render_all

    path = _spec(tmp_path, "table: staff  by: region  epsilon: 1  statistic: sum  column: salary  bounds: [0, 100]")
    result = dpspec.compile(dpspec.load(path), seed=1)
    files = render_all(result)
    public, internal = files["markdown"][1], files["internal_markdown"][1]
    assert "a value above 100 counts as 100" in public and "never taken from the data" in public
    assert "lay outside" not in public and "realized error" not in public  # figures of the confidential data
    assert "2 value(s) of salary (40.0% of the records) lay outside [0, 100]" in internal
    assert "| east | 1.00 |" not in public


def test_sweep_compares_each_count_and_sum_with_its_truth(tmp_path):
    path = _spec(
        tmp_path,
        textwrap.dedent("""\
        table: staff  by: region  epsilon: 1
        queries: {
          n: { statistic: count }
          total: { statistic: sum  column: salary  bounds: [0, 300] }
        }"""),
    )
    result = _compile(path)
    checked = result.checked
    compared = checked.mechanism.compared_counts(checked.spec, checked.params, {}, result.release)
    assert [c.table for c in compared] == ["statistics: n", "statistics: total"]
    assert compared[0].truth.tolist() == [2, 2, 1, 0] and compared[1].truth.tolist() == [130, 155, 250, 0]
    assert list(compared[1].released.index.get_level_values("region")) == ["north", "south", "east", "west"]


# ---- consistency with a public total ----------------------------------------------------------

PUBLIC_TOTAL = 'public {\n  count staff released "the annual report: total staff" used as total\n}'


def test_counts_made_consistent_with_the_public_total_add_up_to_it_and_say_their_bias(tmp_path):
    path = _spec(
        tmp_path, "table: staff  by: region  epsilon: 1/2  statistic: count  postprocess: total", extra=PUBLIC_TOTAL
    )
    for seed in range(5):
        result = _compile(path, seed=seed)
        out = result.outputs["statistics"]
        assert out["count"].sum() == 5 and (out["count"] >= 0).all()
        assert out["count"].dtype.kind == "i"
        assert out["count_lower"].isna().all() and out["count_upper"].isna().all()  # no interval after projection
    assert any("small cells come out too high" in n for n in result.release.notes)
    assert "public-information" in {f.rule for f in result.findings}  # conditioned on the total, and says so


def test_a_public_total_by_a_key_column_fixes_each_groups_sum(tmp_path):
    public = 'public {\n  count staff by region released "the annual report" used as total\n}'
    path = _spec(
        tmp_path, "table: staff  by: region, grade  epsilon: 1/2  statistic: count  postprocess: total", extra=public
    )
    out = _compile(path, seed=2).outputs["statistics"]
    assert out.groupby("region", sort=False)["count"].sum().tolist() == [2, 2, 1, 0]
    assert len(out) == 16


@pytest.mark.parametrize(
    "extra,by,message",
    [
        ("", "region", "declares no count of 'staff' 'used as total'"),
        ('public {\n  count staff by grade released "x" used as total\n}', "region", "which the release is not by"),
    ],
)
def test_a_public_total_the_release_cannot_meet_is_a_located_spec_error(tmp_path, extra, by, message):
    path = _spec(tmp_path, f"table: staff  by: {by}  epsilon: 1  statistic: count  postprocess: total", extra=extra)
    with pytest.raises(SpecError) as err:
        check(dpspec.load(path))
    assert message in str(err.value) and err.value.diagnostics[0].line is not None


def test_the_shared_projection_gives_zeros_for_a_zero_total():
    from dpspec.api import project_to_total

    assert project_to_total(np.array([3, -2, 5]), 0).tolist() == [0, 0, 0]
    assert project_to_total(np.array([3, -2, 5]), 7).sum() == 7


# ---- on Spark: the group-by where the table lives, the noise on the driver ----------------------


def test_on_spark_the_release_is_the_local_one_and_only_totals_reach_the_driver(tmp_path, counts_only_spark):
    rng = np.random.default_rng(40)
    n = 3000
    frame = pd.DataFrame(
        {
            "region": rng.choice(["north", "south", "east"], n),
            "grade": rng.integers(1, 5, n),
            "salary": rng.integers(0, 400, n),
        }
    )
    frame.to_parquet(tmp_path / "staff.parquet")
    path = _spec(
        tmp_path,
        textwrap.dedent("""\
        table: staff  by: region, grade  epsilon: 3
        queries: {
          n: { statistic: count }
          pay: { statistic: mean  column: salary  bounds: [0, 300] }
          median: { statistic: quantile  column: salary  bounds: [0, 300]  q: 1/2  grid_step: 10 }
        }"""),
    )
    text = open(path).read().replace('data staff from "staff.csv"', 'data staff from "staff.parquet"')
    open(path, "w").write(text)
    engine, collected = counts_only_spark
    local = dpspec.compile(dpspec.load(path), seed=9, engine="local")
    spark = dpspec.compile(dpspec.load(path), seed=9, engine=engine)
    assert spark.engine == "spark"
    a, b = local.outputs["statistics"], spark.outputs["statistics"]
    assert a.to_csv(index=False) == b.to_csv(index=False)  # west: declared, nobody there, released on both
    assert len(a) == 16 and (a[a["region"] == "west"]["n"].abs() < 60).all()
    assert spark.release.internal["clipped"] == local.release.internal["clipped"]
    assert spark.release.internal["observed_ranges"] == local.release.internal["observed_ranges"]
    # the engine refuses to hand the driver the table or row-level outputs (counts_only_spark); what
    # did reach it are aggregates, far fewer rows than the records
    assert max(collected) < n / 5


def test_the_local_engines_clipped_totals_and_buckets_are_the_plain_figures():
    from dpspec.engine import LocalEngine

    frame = pd.DataFrame({"region": ["a", "a", "b", "b", "b"], "v": [5, 250, -3, 40, 100]})
    got = LocalEngine().clipped_totals(frame, ["region"], [("v", 0, 100)])
    assert got.to_dict("list") == {
        "region": ["a", "b"],
        "count": [2, 3],
        "sum0": [105, 140],
        "clipped0": [1, 1],
        "min0": [5, -3],
        "max0": [250, 100],
    }
    buckets = LocalEngine().bucket_counts(frame, ["region"], "v", 0, 50, 100)  # grid 0, 50, 100
    assert buckets.to_dict("list") == {
        "region": ["a", "a", "b", "b", "b"],
        "bucket": [1, 2, 0, 1, 2],
        "count": [1, 1, 1, 1, 1],
    }
    total = LocalEngine().clipped_totals(frame, [], [("v", 0, 100)])
    assert total["count"].tolist() == [5] and total["sum0"].tolist() == [245]


def test_budget_states_the_expected_error_a_priori():
    """`dpspec budget` gives each noisy part's error before any data is read: its standard
    deviation and the exact interval holding at least 95% of the noise."""
    import os

    from click.testing import CliRunner

    from dpspec.cli.main import main
    from tests.conftest import ROOT

    result = CliRunner().invoke(main, ["budget", os.path.join(ROOT, "specs", "staff_aggregate.dps")])
    assert result.exit_code == 0, result.output
    # headcount: discrete Laplace of scale 2, sd sqrt(2 e^{-1/2}) / (1 - e^{-1/2}) = 2.799
    assert (
        "headcount: discrete Laplace scale 2 for L1 sensitivity 1 (one row added or removed changes one "
        "cell's count by 1), epsilon 0.5; expected error a priori: standard deviation 2.799, 96.2% of noisy "
        "answers within ±6 of the truth"
    ) in result.output


@pytest.mark.parametrize(
    "noise, parameter",
    [
        ("laplace", Fraction(2)),
        ("laplace", Fraction(1600)),
        ("laplace", Fraction(1, 3)),
        ("gaussian", Fraction(1, 2)),
        ("gaussian", Fraction(9)),
        ("gaussian", Fraction(12345, 7)),
    ],
)
def test_the_error_a_priori_is_the_one_every_released_value_carries(noise, parameter):
    """`budget`'s numpy-free figures equal the release's interval and variance (`accuracy`)."""
    import math

    from dpspec_aggregate.a_priori import expected_error
    from dpspec_aggregate.accuracy import half_width, variance

    sd, k, coverage = expected_error(noise, parameter)
    assert (k, coverage) == pytest.approx(half_width(noise, parameter), rel=1e-12)
    assert k == half_width(noise, parameter)[0]
    assert sd == pytest.approx(math.sqrt(variance(noise, parameter)), rel=1e-9)
