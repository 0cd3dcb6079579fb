"""Keys are declared, never discovered: a release's cells come from the spec and its public key
files, the checker refuses a keying column without declared values, and the compiler stops any
mechanism (built-in or third-party) whose released keys differ from the declared ones."""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest

import dpspec
from dpspec.api import check
from dpspec.api import Mechanism, NativeFlavor, OutputKeys, PureDP, BudgetStatement, Release, discrete_laplace
from dpspec.errors import MechanismError, SpecError

from .verify_helpers import registered

COUNTIES = "county\na\nb\nc\n"


def _cases(tmp_path, rows):
    path = tmp_path / "cases.csv"
    path.write_text("month,county,died\n" + "".join(f"{m},{c},{d}\n" for m, c, d in rows))
    return path


def _spec(
    tmp_path,
    county_type="{a, b, c}",
    public="",
    mechanism="wasserstein_exponential",
    extra_params="base: naive",
    release="output counts",
):
    text = textwrap.dedent(f"""\
        spec "keys"
        domain d {{
          table cases unit person {{
            month  : {{"2020-07", "2020-08"}}
            county : {county_type}
            died   : bool
          }}
        }}
        data cases from "cases.csv"
        {public}
        unit cases : symdiff
        premetric pure
        mechanism {mechanism} {{
          table: cases  cell: county  period: month  outcome: died  epsilon: 1  {extra_params}
        }}
        budget epsilon <= 100
        release {{ {release} }}
        """)
    path = tmp_path / "keys.dps"
    path.write_text(text)
    return dpspec.load(str(path))


# nobody lives in county c in August; one person does in July
ROWS = [
    ("2020-07", "a", "false"),
    ("2020-07", "c", "false"),
    ("2020-08", "a", "true"),
    ("2020-08", "a", "false"),
    ("2020-08", "b", "false"),
]


@pytest.mark.parametrize("mechanism,extra", [("wasserstein_exponential", "base: naive"), ("noisy_postprocessed", "")])
def test_an_empty_declared_county_is_released_with_its_noisy_count(tmp_path, mechanism, extra):
    _cases(tmp_path, ROWS)
    public = (
        'public { count cases by month released "the monthly total" used as total }'
        if mechanism == "noisy_postprocessed"
        else ""
    )
    result = dpspec.compile(_spec(tmp_path, public=public, mechanism=mechanism, extra_params=extra), seed=3)
    counts = result.outputs["counts"]
    assert list(counts["county"]) == ["a", "b", "c"]  # c is in the release although nobody is in it
    assert set(counts["month"]) == {"2020-08"}


def test_the_release_has_the_same_cells_whether_or_not_someone_is_alone_in_a_cell(tmp_path):
    _cases(tmp_path, ROWS)
    empty = dpspec.compile(_spec(tmp_path), seed=3).outputs["counts"]["county"].tolist()
    _cases(tmp_path, ROWS + [("2020-08", "c", "false")])
    alone = dpspec.compile(_spec(tmp_path), seed=3).outputs["counts"]["county"].tolist()
    assert empty == alone == ["a", "b", "c"]


def test_cells_come_from_a_public_key_file(tmp_path):
    _cases(tmp_path, ROWS)
    (tmp_path / "counties.csv").write_text(COUNTIES + "d\n")
    spec = _spec(
        tmp_path,
        county_type='category values from "counties.csv"',
        public='public { keys "counties.csv" released "the state\'s county list" }',
    )
    assert dpspec.compile(spec, seed=1).outputs["counts"]["county"].tolist() == ["a", "b", "c", "d"]


def test_a_released_column_without_declared_values_is_refused_at_the_column(tmp_path):
    _cases(tmp_path, ROWS)
    with pytest.raises(SpecError) as err:
        check(_spec(tmp_path, county_type="category"))
    text = str(err.value)
    assert "column 'county' of table 'cases'" in text and "values are not declared" in text
    assert ":5:" in text  # located at the county column's declaration
    assert "values from" in text and "keys" in text  # says how to declare them


def test_a_key_file_not_declared_public_is_refused(tmp_path):
    _cases(tmp_path, ROWS)
    (tmp_path / "counties.csv").write_text(COUNTIES)
    with pytest.raises(SpecError) as err:
        check(_spec(tmp_path, county_type='category values from "counties.csv"'))
    assert "which the public block does not declare" in str(err.value)


def test_a_record_outside_the_declared_key_file_is_a_data_error(tmp_path):
    _cases(tmp_path, ROWS + [("2020-08", "z", "false")])
    (tmp_path / "counties.csv").write_text(COUNTIES)
    spec = _spec(
        tmp_path,
        county_type='category values from "counties.csv"',
        public='public { keys "counties.csv" released "the state\'s county list" }',
    )
    with pytest.raises(dpspec.errors.DataError, match="values outside"):
        dpspec.compile(spec, seed=1)


def test_a_count_table_released_from_swapped_microdata_has_every_declared_cell(tmp_path):
    (tmp_path / "hh.csv").write_text("county,size,tenure\n" + "a,1,owned\na,2,rented\nb,1,rented\nb,2,owned\n" * 5)
    (tmp_path / "swap.dps").write_text(
        textwrap.dedent("""\
        spec "swap keys"
        domain d {
          table households unit household {
            county : {a, b, c}
            size   : int 1..2
            tenure : {owned, rented}
          }
        }
        data households from "hh.csv"
        invariants {
          count households by size, tenure
          count households by county, size
        }
        unit households : hamming
        premetric pure
        mechanism swap { match: size  swap: county  rate: 0.1 }
        release { count households by county, tenure }
        """)
    )
    out = dpspec.compile(dpspec.load(str(tmp_path / "swap.dps")), seed=1).outputs["count_households_county_tenure"]
    assert list(zip(out["county"], out["tenure"])) == [(c, t) for c in "abc" for t in ("owned", "rented")]
    assert out.loc[out["county"] == "c", "count"].tolist() == [0, 0]


class _UniqueCells(Mechanism):
    """The mistake the built-ins once made: the cells released are the ones found in the data."""

    name = "unique_cells"
    outputs = {"counts": "noisy counts by the cells found in the data"}
    declare = True

    def flavor(self, spec, params):
        return NativeFlavor("cases", "symdiff", "pure")

    def budget(self, spec, params, facts):
        return BudgetStatement(PureDP(1.0))

    def output_keys(self, spec, params):
        return {"counts": OutputKeys("cases", ("county",))} if self.declare else {}

    def run(self, spec, params, data, rng):
        cell = data["cases"]["county"].astype(str)
        cells = sorted(cell.unique())
        counts = cell.value_counts().reindex(cells).to_numpy() + discrete_laplace(1, len(cells), rng)
        return Release({"counts": pd.DataFrame({"county": cells, "cases": counts})})


@pytest.mark.parametrize("declare", [True, False])
def test_a_plugin_releasing_data_dependent_keys_is_stopped_and_nothing_is_published(tmp_path, declare):
    _cases(tmp_path, ROWS[2:])  # August only: county c is empty
    mech = _UniqueCells()
    mech.declare = declare  # declared keys, or left to the compiler's reading of its columns
    spec = _spec(tmp_path, mechanism="unique_cells", extra_params="")
    (tmp_path / "keys.dps").write_text(
        spec.text.replace("table: cases  cell: county  period: month  outcome: died  epsilon: 1", "")
    )
    out = tmp_path / "out"
    with registered(mech):
        with pytest.raises(MechanismError, match=r"without the declared key county='c'"):
            dpspec.compile(dpspec.load(str(tmp_path / "keys.dps")), seed=1)
        from dpspec.cli.main import main

        with pytest.raises(SystemExit) as code:
            main(["compile", str(tmp_path / "keys.dps"), "-o", str(out), "--seed", "1"])
    assert code.value.code == 1 and not out.exists()


def test_a_plugin_releasing_an_undeclared_value_is_stopped(tmp_path):
    _cases(tmp_path, ROWS[2:])

    class Extra(_UniqueCells):
        def run(self, spec, params, data, rng):
            return Release({"counts": pd.DataFrame({"county": ["a", "b", "c", "zz"], "cases": [1, 2, 3, 4]})})

    spec = _spec(tmp_path, mechanism="unique_cells", extra_params="")
    (tmp_path / "keys.dps").write_text(
        spec.text.replace("table: cases  cell: county  period: month  outcome: died  epsilon: 1", "")
    )
    with registered(Extra()):
        with pytest.raises(MechanismError, match=r"with key county='zz', which is not declared"):
            dpspec.compile(dpspec.load(str(tmp_path / "keys.dps")), seed=1)
