"""SafeTab-H's published totals choose its detail, so their keys are declared: the public block
states the totals over `person_groups`, whose geography and group columns read public key files
(the geography files, the groups of the iteration table); a spec that leaves one undeclared, or
does not state the totals, is refused at check, located; a totals file keyed by a unit or group
the spec does not declare is a DataError naming the row."""

from __future__ import annotations

import pandas as pd
import pytest

import dpspec
from dpspec.api import check
from dpspec.errors import DataError, SpecError
from dpspec.run.compiler import compile_spec
from tests.safetab_helpers import H_SPEC, ROOT, variant

DATA = ROOT / "specs" / "data" / "safetab"


def _line(path, text: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip() == text)


def test_the_bundled_safetab_h_specs_declare_the_keys_of_their_published_totals():
    for path in (H_SPEC, ROOT / "specs" / "census2020" / "pr" / "safetab_h_production_pr.dps"):
        check(dpspec.load(str(path)))


@pytest.mark.parametrize(
    "column, old, new",
    [
        ("group", f'group  : category values from "{DATA}/groups.csv"', "group  : category"),
        (
            "tract",
            f'tract  : category in county values from "{DATA}/geography.csv"\n    place',
            "tract  : category in county\n    place",
        ),
    ],
)
def test_an_undeclared_key_of_the_published_totals_is_refused_at_its_column(tmp_path, column, old, new):
    path = variant(tmp_path, old, new, spec=H_SPEC)
    with pytest.raises(SpecError) as e:
        check(dpspec.load(str(path)))
    found = [d for d in e.value.diagnostics if f"column '{column}' of table 'person_groups'" in d.message]
    assert found, e.value
    assert found[0].line == _line(path, new.split("\n")[0]) and "published totals" in found[0].message
    assert "values from" in found[0].hint and "public" in found[0].hint


def test_published_totals_the_public_block_does_not_state_are_refused_at_the_parameter(tmp_path):
    text = H_SPEC.read_text()
    stated = [line for line in text.splitlines() if line.strip().startswith("count person_groups by")]
    path = variant(tmp_path, "", "", spec=H_SPEC)
    body = path.read_text()
    for line in stated:
        body = body.replace(line + "\n", "")
    path.write_text(body)
    with pytest.raises(SpecError) as e:
        check(dpspec.load(str(path)))
    found = [d for d in e.value.diagnostics if "does not declare them" in d.message]
    assert found and found[0].line == next(
        i for i, t in enumerate(body.splitlines(), 1) if t.strip().startswith("public_totals:")
    )


@pytest.mark.parametrize(
    "where, value, message",
    [
        ("geocode", "99999999999", "tract '99999999999' is not a declared unit of that level"),
        ("group", "9999", "group '9999' is not a group of the public iteration table"),
    ],
)
def test_a_published_total_keyed_outside_the_declared_keys_is_a_data_error_naming_its_row(
    tmp_path, where, value, message
):
    totals = pd.read_parquet(DATA / "safetab_p_published.parquet")
    row = int((totals["geography"] == "tract").to_numpy().nonzero()[0][0])
    totals.loc[row, where] = value
    totals.to_csv(tmp_path / "totals.csv", index=False)
    path = variant(
        tmp_path,
        f'public_totals: "{DATA}/safetab_p_published.parquet"',
        f'public_totals: "{tmp_path}/totals.csv"',
        spec=H_SPEC,
    )
    spec = dpspec.load(str(path))
    with pytest.raises(DataError) as e:
        compile_spec(spec, seed=1, audit=False)
    assert f"totals.csv: row {row + 1} (line {row + 2})" in str(e.value) and message in str(e.value)
