"""An invariant on a recode of a histogram variable (production's units `gqhh_vect`: the housing
units, and each GQ type, per block, a recode of `tenvacgq`): stated as `count units by block,
KIND` with the table carrying the recode as a column of its name, held exactly by the solver at
every level, released as a column, the same bytes on both engines; misuse is a located SpecError
and data whose column is not the recode a DataError naming the block."""

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse, write_declared

SPEC = """spec "units with their GQ types invariant per block"

domain tiny "units on a small geography" {
  geography census { state > county > block }
  table units unit housing_unit {
    state  : category
    county : category in state
    block  : category in county
    tenvac : {owned, rented, vacant, gq101, gq301, gq501}
    kind   : {housing_unit, gq101, gq301, gq501}
  }
}

data units from "units.csv"

invariants {
  count units by block, kind
}

unit units : hamming
premetric zcdp

mechanism topdown {
  table: units
  variables: tenvac
  rho: 1/2
  levels: { state: 1/4  county: 1/4  block: 1/2 }
  queries: { detailed: 1 }
  recodes: {
    kind: {
      of: tenvac
      housing_unit: owned, rented, vacant
      gq101: [gq101]
      gq301: [gq301]
      gq501: [gq501]
    }
  }
}

release {
  microdata units
}
"""

KIND = {
    "owned": "housing_unit",
    "rented": "housing_unit",
    "vacant": "housing_unit",
    "gq101": "gq101",
    "gq301": "gq301",
    "gq501": "gq501",
}


def _units(seed: int = 3, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 24, n)
    tenvac = rng.choice(list(KIND), n, p=[0.4, 0.35, 0.13, 0.04, 0.04, 0.04])
    return pd.DataFrame(
        {
            "state": "01",
            "county": [f"01{b // 8:03d}" for b in block],
            "block": [f"01{b // 8:03d}{b:04d}" for b in block],
            "tenvac": tenvac,
            "kind": [KIND[t] for t in tenvac],
        }
    ).sort_values("block", kind="stable")


def _write(tmp_path, units, text=SPEC):
    (tmp_path / "in").mkdir()
    units.to_csv(tmp_path / "in" / "units.csv", index=False)
    spec = tmp_path / "in" / "units.dps"
    write_declared(spec, text)
    return str(spec)


def _line(text, start):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start))


def test_an_invariant_on_a_recode_checks_and_is_induced():
    from dpspec_topdown.plugin import TopDown

    spec = parse(SPEC, "u.dps")
    params = check(spec).params
    (q,) = TopDown().induced_invariants(spec, params)
    assert q.describe() == "count units by block, kind"


@pytest.mark.parametrize(
    "edit, message",
    [
        ("    kind   : {housing_unit, gq101, gq301, gq501}\n", "    kind   : {housing_unit, gq101, gq301, hu}\n"),
        ("      gq501: [gq501]\n", None),
    ],
)
def test_a_recode_column_that_does_not_match_its_recode_is_a_located_spec_error(edit, message):
    text = SPEC.replace(
        *(
            (edit, message)
            if message
            else ("      gq301: [gq301]\n      gq501: [gq501]\n", "      gq301_501: gq301, gq501\n")
        )
    )
    with pytest.raises(
        SpecError,
        match=rf"u.dps:{_line(text, 'count units by block, kind')}:.*keeps the recode 'kind' "
        r"of 'tenvac' exact, so column 'kind' must take exactly its group labels",
    ):
        check(parse(text, "u.dps"))


def test_an_invariant_on_a_column_that_is_no_recode_is_a_located_spec_error():
    text = SPEC.replace("    kind: {\n", "    kinds: {\n")
    with pytest.raises(
        SpecError,
        match=rf"u.dps:{_line(text, 'count units by block, kind')}:.*columns kind are neither "
        r"geography levels nor histogram variables nor recodes",
    ):
        check(parse(text, "u.dps"))


def test_a_column_that_is_not_the_recode_of_its_variable_is_a_data_error_naming_the_block(tmp_path):
    units = _units()
    at = units.index[units["tenvac"] == "gq301"][0]
    units.loc[at, "kind"] = "gq501"
    with pytest.raises(
        DataError,
        match=rf"table 'units': 1 record with kind different from the recode 'kind' of tenvac, "
        rf"e.g. in block '{units.loc[at, 'block']}' tenvac = 'gq301' has kind = 'gq501', not 'gq301'",
    ):
        dpspec.compile(_write(tmp_path, units), seed=1)


def test_the_release_keeps_the_recode_invariant_at_every_block_and_carries_the_column(tmp_path):
    units = _units()
    result = dpspec.compile(_write(tmp_path, units), seed=1)
    out = result.release.outputs["units"].to_pandas().astype(str)
    assert list(out.columns) == ["state", "county", "block", "tenvac", "kind"]
    assert (out["kind"] == out["tenvac"].map(KIND)).all()
    count = lambda frame: frame.groupby(["block", "kind"]).size().sort_index()  # noqa: E731
    assert count(out).equals(count(units.astype(str)))
    # the tenures and vacancies are noisy: the invariant holds on the recode, not the variable
    assert (
        not out.groupby(["block", "tenvac"])
        .size()
        .sort_index()
        .equals(units.astype(str).groupby(["block", "tenvac"]).size().sort_index())
    )


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_the_recode_invariant_releases_the_same_bytes_on_spark(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes

    spec = _write(tmp_path, _units(seed=5))
    local = release_bytes(compile_on(spec, "local"), tmp_path / "local")
    on_spark = release_bytes(compile_on(spec, SparkEngine(session=spark_session)), tmp_path / "spark")
    assert set(local) == {"units.csv"}
    assert on_spark == local


def test_a_recode_invariant_on_a_column_the_table_lacks_is_the_checker_located_error():
    text = SPEC.replace("    kind   : {housing_unit, gq101, gq301, gq501}\n", "")
    with pytest.raises(
        SpecError,
        match=rf"u.dps:{_line(text, 'count units by block, kind')}:3: error: unknown column "
        r"'kind' in table 'units'",
    ):
        check(parse(text, "u.dps"))


def _joint_spec(tmp_path, units_frame):
    """The joint households/units spec of test_topdown_dhc_solver with the units' occupancy (a
    recode of the joint table's variable) invariant per block, carried as a column."""
    from tests.test_topdown_dhc_solver import JOINT_SPEC
    from tests.test_topdown_joint_production import _data

    households, _ = _data(seed=6)
    (tmp_path / "in").mkdir()
    households.to_csv(tmp_path / "in" / "households.csv", index=False)
    units_frame.to_csv(tmp_path / "in" / "units.csv", index=False)
    text = (
        JOINT_SPEC.replace("    vacs   : {0, 1, 2}\n", "    vacs   : {0, 1, 2}\n    occupancy : {occupied, vacant}\n")
        .replace(
            "unit households : hamming",
            'data households from "households.csv"\ndata units from "units.csv"\n\n'
            "invariants {\n  count units by block, occupancy\n}\n\nunit households : hamming",
        )
        .replace("release {\n  microdata households\n}", "release {\n  microdata households\n  microdata units\n}")
    )
    spec = tmp_path / "in" / "joint.dps"
    write_declared(spec, text)
    return str(spec)


def _joint_units():
    from tests.test_topdown_joint_production import _data

    _, units = _data(seed=6)
    return units.assign(occupancy=np.where(units["vacs"] == 0, "occupied", "vacant"))


def test_a_joint_table_keeps_an_invariant_on_its_recode_and_releases_the_column(tmp_path):
    units = _joint_units()
    result = dpspec.compile(_joint_spec(tmp_path, units), seed=2)
    out = result.release.outputs["units"].to_pandas().astype(str)
    assert "occupancy" in out.columns
    count = lambda frame: frame.groupby(["block", "occupancy"]).size().sort_index()  # noqa: E731
    assert count(out).equals(count(units.astype(str)))


def test_a_joint_table_whose_recode_column_is_wrong_is_a_data_error(tmp_path):
    units = _joint_units()
    at = units.index[units["vacs"] == 1][0]
    units.loc[at, "occupancy"] = "occupied"
    with pytest.raises(
        DataError,
        match=rf"table 'units': 1 record with occupancy different from the recode 'occupancy' "
        rf"of vacs, e.g. in block '{units.loc[at, 'block']}'",
    ):
        dpspec.compile(_joint_spec(tmp_path, units), seed=2)
