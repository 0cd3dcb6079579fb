"""TopDown's geography comes from a declared, public geography file: an empty declared block is
measured and released with its noisy count, the release's structure does not depend on whether
someone lives there, a geography without declared values is refused at check, and a record in
an undeclared block is a DataError."""

from __future__ import annotations

import textwrap

import pytest

import dpspec
from dpspec.api import check
from dpspec.errors import DataError, SpecError

# two counties, four blocks; block 1b2 is declared and nobody lives in it
GEOGRAPHY = "county,block\n1,1b1\n1,1b2\n2,2b1\n2,2b2\n"
PERSONS = [("1", "1b1", 0), ("1", "1b1", 1), ("2", "2b1", 1), ("2", "2b2", 0), ("2", "2b2", 0)]


def _spec(tmp_path, persons=PERSONS, geography=GEOGRAPHY, declared=True):
    (tmp_path / "persons.csv").write_text("county,block,adult\n" + "".join(f"{c},{b},{a}\n" for c, b, a in persons))
    (tmp_path / "geography.csv").write_text(geography)
    values = ' values from "geography.csv"' if declared else ""
    public = 'public { keys "geography.csv" released "the test state\'s block list" }' if declared else ""
    text = textwrap.dedent(f"""\
        spec "declared geography"
        domain d {{
          geography g {{ county > block }}
          table persons unit person {{
            county : category{values}
            block  : category in county{values}
            adult  : {{0, 1}}
          }}
        }}
        data persons from "persons.csv"
        {public}
        unit persons : symdiff
        premetric zcdp
        mechanism topdown {{
          table: persons
          variables: adult
          rho: 1
          levels: {{ nation: 1/3  county: 1/3  block: 1/3 }}
          queries: {{ total: 1/2  detailed: 1/2 }}
        }}
        budget rho <= 1
        release {{ microdata persons  output measurements  count persons by block }}
        """)
    path = tmp_path / "g.dps"
    path.write_text(text)
    return dpspec.load(str(path))


def _released_blocks(result) -> tuple[list, list]:
    m = result.outputs["measurements"].to_pandas()
    counts = result.outputs["count_persons_block"]
    return sorted(m.loc[m["level"] == "block", "geocode"].astype(str).unique()), list(counts["block"].astype(str))


def test_an_empty_declared_block_is_measured_and_released_when_nobody_lives_in_it(tmp_path):
    result = dpspec.compile(_spec(tmp_path), seed=7)
    m = result.outputs["measurements"].to_pandas()
    empty = m[(m["level"] == "block") & (m["geocode"].astype(str) == "1b2")]
    assert len(empty) == 3  # its total and its two adult cells, each a noisy count
    assert set(empty["query"].astype(str)) == {"total", "adult"}
    measured, released = _released_blocks(result)
    assert measured == released == ["1b1", "1b2", "2b1", "2b2"]


def test_the_release_has_the_same_structure_whether_or_not_one_person_lives_in_the_empty_block(tmp_path):
    empty = dpspec.compile(_spec(tmp_path), seed=7)
    alone = dpspec.compile(_spec(tmp_path, PERSONS + [("1", "1b2", 1)]), seed=7)
    assert _released_blocks(empty) == _released_blocks(alone)
    shape = lambda r: r.outputs["measurements"].to_pandas()[["level", "geocode", "query", "cell"]].astype(str)
    assert shape(empty).equals(shape(alone))


def test_a_geography_column_without_declared_values_is_refused_at_check_at_the_column(tmp_path):
    spec = _spec(tmp_path, declared=False)
    with pytest.raises(SpecError) as e:
        check(spec)
    lines = spec.text.splitlines()
    found = [d for d in e.value.diagnostics if "geography column 'county'" in d.message]
    assert found and lines[found[0].line - 1].strip().startswith("county : category")
    assert any("geography column 'block'" in d.message for d in e.value.diagnostics)


def test_a_record_in_an_undeclared_block_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="3b1"):
        dpspec.compile(_spec(tmp_path, PERSONS + [("2", "3b1", 0)]), seed=7)


def test_a_record_in_a_declared_block_under_another_county_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="not a unit of the declared geography"):
        dpspec.compile(_spec(tmp_path, PERSONS + [("2", "1b2", 0)]), seed=7)
