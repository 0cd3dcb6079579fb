"""Data errors about the geography a TopDown spec declares cite where the spec declares it: a
block the geography file puts on both sides of the AIAN split cites the spine's `aian` setting, a block missing from the
reference geography the spine's `geography` setting, a geography that is no tree the domain's
hierarchy, and a node the failsafe cannot save the level's budget share and the `failsafe`
setting that was applied (issue 24, "Bad input": every DataError about a construct cites it)."""

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import DataError
from dpspec.language.parser import parse
from dpspec.run.compiler import compile_spec
from tests.test_topdown_located_data_errors import _cites
from tests.topdown_geography import declared

SPEC = """spec "located geography errors"
domain d "persons on an AIAN spine, and every block" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category values from "geography.csv"
    county : category in state values from "geography.csv"
    block : category in county values from "geography.csv"
    aian : category values from "geography.csv"
    hhgq : {0, 1, 2}
    votingage : {0, 1}
  }
  table blocks unit block {
    state : category values from "geography.csv"
    county : category in state values from "geography.csv"
    block : category in county values from "geography.csv"
    aian : {0, 1}
  }
}
data persons from "persons.parquet"
data blocks from "blocks.parquet"
invariants {
  count persons by state
}
public {
  keys "geography.csv" released "the test state's geography"
}
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: hhgq, votingage
  rho: 1
  workers: 1
  spine: {
    aian: aian
    geography: blocks
  }
  failsafe: {
    minimal_schema: [hhgq]
  }
  levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }
  queries: { total: 1/2  detailed: 1/2 }
}
release {
  microdata persons
}
"""


def _persons(n=400, seed=5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 12, n)
    return pd.DataFrame(
        {
            "state": "01",
            "county": np.where(block < 6, "01001", "01003"),
            "block": [f"b{b:02d}" for b in block],
            "aian": (block % 4 == 0).astype(np.int64),
            "hhgq": rng.choice([0, 1, 2], n, p=[0.8, 0.1, 0.1]),
            "votingage": rng.integers(0, 2, n),
        }
    )


def _blocks(persons) -> pd.DataFrame:
    return persons[["state", "county", "block", "aian"]].drop_duplicates().reset_index(drop=True)


def _compile(tmp_path, persons, blocks=None, text=SPEC):
    """The compile's result, or the DataError it stops with, and the spec's path."""
    folder = tmp_path / "in"
    folder.mkdir()
    persons.to_parquet(folder / "persons.parquet")
    (_blocks(persons) if blocks is None else blocks).to_parquet(folder / "blocks.parquet")
    declared(text, folder)  # the geography file: the data's blocks, with their AIAN flags
    path = folder / "s.dps"
    path.write_text(text)
    return str(path), compile_spec(parse(text, str(path)), seed=1, audit=False)


def _refused(tmp_path, persons, blocks=None, text=SPEC):
    with pytest.raises(DataError) as info:
        _compile(tmp_path, persons, blocks, text)
    return str(tmp_path / "in" / "s.dps"), info.value


def test_the_spec_compiles_on_its_data(tmp_path):
    persons = _persons()
    _, result = _compile(tmp_path, persons)
    assert len(result.published["persons"].to_pandas()) == len(persons)


def test_a_block_on_both_sides_of_the_aian_split_cites_the_spines_aian_setting(tmp_path):
    persons = _persons()
    row = persons.index[persons["block"] == "b00"][0]
    persons.loc[row, "aian"] = 0  # the geography file then lists b00 inside and outside the AIAN area
    path, error = _refused(tmp_path, persons, _blocks(persons[persons.index != row]))
    assert error.message == (
        "the AIAN spine needs every block wholly inside or outside the AIAN areas: "
        "the geography file lists block 'b00' with aian = 0 and aian = 1"
    )
    _cites(error, path, SPEC, ("the spine's aian setting", "aian: aian", None))


def test_a_block_missing_from_the_reference_geography_cites_the_spines_geography_setting(tmp_path):
    persons = _persons()
    blocks = _blocks(persons)
    path, error = _refused(tmp_path, persons, blocks[blocks["block"] != "b05"])
    assert error.message == "the reference geography has no block b05 (1 units of the data are not in it)"
    _cites(error, path, SPEC, ("the spine's geography setting", "geography: blocks", None))


def test_a_node_the_failsafe_cannot_save_cites_the_levels_share_and_the_failsafe(tmp_path, monkeypatch):
    from dpspec.errors import MechanismError
    from dpspec_topdown.estimation import node_solve
    from dpspec_topdown.estimation import postprocess

    exact = node_solve._solve_node

    def failing(task, queries, solver, plan):  # a county part with four blocks or more: the block level
        if task.parent is not None and task.n_children >= 4:
            raise MechanismError("no nonnegative split (forced by the test)")
        return exact(task, queries, solver, plan)

    def no_rescue(task, queries, why=""):
        raise postprocess.FailsafeError(task.key, "no solution even with the children sums relaxed (forced)")

    monkeypatch.setattr(node_solve, "_solve_node", failing)
    monkeypatch.setattr(postprocess, "solve_relaxed", no_rescue)
    path, error = _refused(tmp_path, _persons())
    assert error.message.startswith("TopDown cannot split the county 01001/non-AIAN")
    assert error.message.endswith(" into its block units: no solution even with the children sums relaxed (forced)")
    _cites(
        error,
        path,
        SPEC,
        ("the block level's budget share", "levels:", "block: 1/4"),
        ("'failsafe'", "failsafe:", None),
    )


def test_a_geography_file_that_is_no_tree_cites_the_hierarchy(tmp_path):
    persons = _persons()
    persons.loc[persons.index[persons["block"] == "b01"][0], "county"] = "01003"
    folder = tmp_path / "in"
    folder.mkdir()
    _blocks(persons).sort_values("block").to_csv(folder / "geography.csv", index=False)  # b01 in both counties
    kept = pd.concat([persons[persons["block"] != "b01"], persons[persons["block"] == "b01"].iloc[:1]])
    kept.to_parquet(folder / "persons.parquet")  # the records agree with one of b01's counties
    _blocks(kept).to_parquet(folder / "blocks.parquet")
    path = folder / "s.dps"
    path.write_text(SPEC)
    with pytest.raises(DataError) as info:
        compile_spec(parse(SPEC, str(path)), seed=1, audit=False)
    assert info.value.message.startswith("geography is not a tree: the geography file lists block 'b01' under more")
    _cites(info.value, str(path), SPEC, ("the geography 'g'", "geography g", None))


def test_a_geography_that_is_no_tree_cites_the_hierarchy(tmp_path):
    """The compiler's own reading refuses such data first (its domain says block is in county);
    a caller of the plugin's run with data read otherwise meets the engine's check, located."""
    from dpspec.check.checker import check
    from dpspec_topdown.params.broken_places import located
    from dpspec_topdown.geography.hierarchy import build_hierarchy

    persons = _persons()
    persons.to_parquet(tmp_path / "persons.parquet")
    _blocks(persons).to_parquet(tmp_path / "blocks.parquet")
    declared(SPEC, tmp_path)
    spec = parse(SPEC, str(tmp_path / "s.dps"))
    params = check(spec).params
    persons.loc[persons.index[persons["block"] == "b01"][0], "county"] = "01003"
    with pytest.raises(DataError) as info:
        with located(spec, params):
            build_hierarchy(persons, ["nation", "state", "county", "block"])
    assert info.value.message.startswith("geography is not a tree: block 'b01' lies in more than one county")
    _cites(info.value, str(tmp_path / "s.dps"), SPEC, ("the geography 'g'", "geography g", None))
