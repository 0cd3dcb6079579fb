"""SafeTab's noise is keyed per (geography, group) cell and stage: a cell's counts depend on the
run key, its own key and its own data only, never on how cells are batched or which other
cells exist, and no two cells (or stages of one cell) share a stream."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.api import RunContext
from dpspec.api import KeyColumns
from dpspec.check.data import load_data
from dpspec.engine.keyed_words import stream_keys
from dpspec.engine.streams import unit_rng
from dpspec.run import keyed_noise
from dpspec.run.compiler import compile_spec, make_rng
from dpspec.run.noise import discrete_gaussian
from dpspec_safetab import measured
from tests.safetab_helpers import P_SPEC

SEED = 5


@pytest.fixture(scope="module")
def persons():
    data, _ = load_data(dpspec.load(str(P_SPEC)))
    return data["persons"].iloc[:20000].reset_index(drop=True)


def counts_of(persons: pd.DataFrame) -> pd.DataFrame:
    spec = dpspec.load(str(P_SPEC))
    return compile_spec(spec, data={"persons": persons}, seed=SEED, audit=False).published["counts"]


@pytest.fixture(scope="module")
def release(persons):
    return counts_of(persons)


@pytest.mark.slow  # SafeTab runs in several batchings
def test_rebatching_cells_gives_identical_counts(persons, release, monkeypatch):
    """The sampler's internal batches cut at every 1,009 draws instead of 2**17: same release."""
    monkeypatch.setattr(keyed_noise, "_BATCH_DRAWS", 1009)
    pd.testing.assert_frame_equal(counts_of(persons), release)


def test_a_cell_does_not_depend_on_other_cells(persons, release):
    """Drop every person of half the counties: every county and tract left keeps its counts, to
    the row (its choice of detail and its noise come from its own streams)."""
    counties = sorted(persons["county"].unique())
    kept = persons["county"].isin(counties[::2])
    fewer = counts_of(persons[kept].reset_index(drop=True))
    tracts = set(persons.loc[kept, "tract"]) - set(persons.loc[~kept, "tract"])

    def local(rows):
        keep = (rows["geography"].eq("county") & rows["geocode"].isin(counties[::2])) | (
            rows["geography"].eq("tract") & rows["geocode"].isin(tracts)
        )
        return rows[keep].reset_index(drop=True)

    assert len(local(release)) > 300
    pd.testing.assert_frame_equal(local(fewer), local(release))
    assert (
        not release[release["geography"] == "state"]
        .reset_index(drop=True)
        .equals(fewer[fewer["geography"] == "state"].reset_index(drop=True))
    )  # the state's own counts did change


@pytest.mark.slow  # a statistical test over every cell: about 5 s
def test_no_two_cells_share_a_stream_and_each_draws_its_own(persons, monkeypatch):
    """Every noise call of a run, recorded: all (cell, stage) keys and their SHA-256 stream keys
    are distinct, and a sample of cells' noise is exactly discrete_gaussian on unit_rng(key)."""
    calls = []
    real = measured.add_keyed_noise

    def recording(counts, s2, run_key, keys):
        out = real(counts, s2, run_key, keys)
        calls.append((counts, s2, run_key, keys, out))
        return out

    monkeypatch.setattr(measured, "add_keyed_noise", recording)
    counts_of(persons)
    assert {c[2] for c in calls} == {SEED}  # the engine's run key: the seed
    keys = [k.key(i) for _, _, _, k, _ in calls for i in range(len(k))]
    assert len(keys) > 20000 and len(set(keys)) == len(keys)
    stages = {key[-1] for key in keys}
    assert stages == {"stage 1", "stage 2", "detailed-only total"}
    words = np.concatenate([stream_keys(SEED, k) for _, _, _, k, _ in calls])
    assert len({row.tobytes() for row in words}) == len(keys)
    rng = np.random.default_rng(0)
    for counts, s2, run_key, cells, out in (calls[i] for i in rng.choice(len(calls), 12, replace=False)):
        rows = counts.reshape(len(cells), -1)
        noisy = out.reshape(len(cells), -1)
        for i in rng.choice(len(cells), min(5, len(cells)), replace=False):
            own = discrete_gaussian(s2, rows.shape[1], unit_rng(run_key, cells.key(i)))
            assert np.array_equal(noisy[i] - rows[i], own)


def test_cell_keys_name_table_geography_level_geocode_group_and_stage(persons, monkeypatch):
    seen = []
    monkeypatch.setattr(measured, "add_keyed_noise", lambda counts, s2, run_key, keys: seen.append(keys) or counts)
    counts_of(persons)
    assert all(isinstance(k, KeyColumns) and len(k.columns) == 2 for k in seen)
    county = next(k for k in seen if k.prefix[2] == "county")
    stream, table, geo, level, geocode, group, stage = county.key(0)
    assert (stream, table, geo, stage) == (measured.NOISE_STREAM, "t1", "county", "stage 1") and level in (1, 2)
    assert geocode in set(persons["county"]) and isinstance(group, str)


@pytest.mark.slow  # SafeTab runs with and without an engine
def test_without_an_engine_the_run_key_comes_from_the_rng(persons):
    """Old callers pass only a generator: a run key is drawn from it, so a seeded rng still
    gives a reproducible release, and another seed another one."""
    spec = dpspec.load(str(P_SPEC))
    from dpspec.check.checker import check

    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    data = {"persons": persons}
    one = mech.run(spec, params, data, RunContext(make_rng(3))).outputs["counts"]
    pd.testing.assert_frame_equal(mech.run(spec, params, data, RunContext(make_rng(3))).outputs["counts"], one)
    assert not mech.run(spec, params, data, RunContext(make_rng(4))).outputs["counts"].equals(one)


def test_stage1_noise_has_the_declared_variance(monkeypatch, persons):
    """Stage-1 draws across all cells of the run: variance within 5% of sigma² (a published
    calibration, not a random figure), so keying per cell left the law alone."""
    draws = []
    real = measured.add_keyed_noise

    def recording(counts, s2, run_key, keys):
        out = real(counts, s2, run_key, keys)
        if keys.suffix == ("stage 1",):
            draws.append(((out - counts).ravel(), s2))
        return out

    monkeypatch.setattr(measured, "add_keyed_noise", recording)
    counts_of(persons)
    for s2 in {s for _, s in draws}:
        noise = np.concatenate([d for d, s in draws if s == s2])
        if noise.size > 20000:  # standard error of the variance ratio below 1%
            assert abs(noise.var() / float(Fraction(s2)) - 1) < 0.05, s2
