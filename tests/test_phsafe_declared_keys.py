"""PHSafe releases the declared states' full grid, never the states the units lie in: a declared
state nobody lives in is released with its noisy counts, one household alone in a state changes
no key of the release, a spec declaring no states is refused at the state column, and a release
missing a declared cell is stopped."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dpspec.api import MechanismError, SpecError, check, load, load_data
from dpspec.run.compiler import compile_spec
from tests.safetab_helpers import variant

ROOT = Path(__file__).resolve().parent.parent
PR = ROOT / "specs" / "sdhc_production_pr.dps"
SEED = 38
DECLARED = ("01", "09", "23", "50", "72")  # the bundled units lie in 09, 23, 50 and 72; nobody in 01
KEYS = ["table", "region_type", "region_id", "iteration_code", "data_cell"]


def _declared_states(tmp_path) -> Path:
    """The PR spec with no `states` parameter: the state column declares the states instead."""
    path = variant(tmp_path, '  states: ["72"]\n', "", spec=PR)
    text = path.read_text()
    old = "    state  : category\n"
    assert old in text
    values = ", ".join(f'"{s}"' for s in DECLARED)
    path.write_text(text.replace(old, f"    state  : {{{values}}}\n", 1))
    return path


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    path = _declared_states(tmp_path_factory.mktemp("declared-states"))
    data, _ = load_data(load(str(path)))
    return path, data


def _counts(path, data) -> pd.DataFrame:
    return compile_spec(load(str(path)), data=data, seed=SEED, audit=False).published["counts"]


def test_a_declared_state_nobody_lives_in_is_released_with_its_noisy_counts(declared):
    path, data = declared
    assert "01" not in set(data["units"]["state"].astype(str))
    counts = _counts(path, data)
    states = counts[counts["region_type"] == "STATE"]
    assert set(states["region_id"]) == set(DECLARED)  # today's code released the four states in the data
    empty = states[states["region_id"] == "01"]
    grid = states[states["region_id"] == "09"]
    assert len(empty) == len(grid) > 0  # the same cells as an occupied state
    assert (empty["count"] != 0).mean() > 0.5  # truth 0 plus noise of sd >= 10 (sensitivity 2 tau + 2 >= 14)


def test_one_household_alone_in_a_state_changes_no_key_of_the_release(declared):
    path, data = declared
    units, persons = data["units"], data["persons"]
    in_72 = units["state"].astype(str) == "72"
    alone = units[~in_72 | (units.index == units.index[in_72][0])]
    mafid = alone.loc[alone["state"].astype(str) == "72", "MAFID"].iloc[0]
    with_it = {"units": alone, "persons": persons[persons["MAFID"].isin(alone["MAFID"])]}
    without = {
        "units": alone[alone["MAFID"] != mafid],
        "persons": persons[persons["MAFID"].isin(alone["MAFID"]) & (persons["MAFID"] != mafid)],
    }
    a, b = _counts(path, with_it), _counts(path, without)
    assert set(a[KEYS].itertuples(index=False, name=None)) == set(b[KEYS].itertuples(index=False, name=None))
    assert "72" in set(b["region_id"])


def test_a_spec_declaring_no_states_is_refused_at_the_state_column(tmp_path):
    path = variant(tmp_path, '  states: ["72"]\n', "", spec=PR)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip() == "state  : category")
    with pytest.raises(SpecError) as e:
        check(load(str(path)))
    d = next(d for d in e.value.diagnostics if "'state'" in d.message)
    assert d.line == line and "states" in d.hint and "values from" in d.hint


def test_a_release_missing_a_declared_cell_is_stopped(declared, monkeypatch):
    """Control: the run's own check of the grid has teeth."""
    import dpspec_phsafe.tabulate as tabulate

    real = tabulate.measure

    def drops_one(design, rec, run_key):
        out = real(design, rec, run_key)
        return out[~((out["region_id"] == "01") & (out["table"] == "PH2"))].reset_index(drop=True)

    monkeypatch.setattr(tabulate, "measure", drops_one)
    path, data = declared
    with pytest.raises(MechanismError, match="lacks the declared cell .*'region_id': '01'"):
        _counts(path, data)
