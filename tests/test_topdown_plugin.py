"""The `topdown` plugin through specs: the production allocation's budget, spec errors, and a
compile on the ACS national excerpt that keeps every guarantee."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.check.checker import check
from dpspec.cli.main import main
from dpspec.run.compiler import compile_spec
from dpspec.errors import DataError, SpecError
from dpspec.language.parser import parse, read_source
from tests.conftest import SPECS, edited_spec
from tests.key_files import keys_from

PL94 = os.path.join(SPECS, "pl94_production_topdown.dps")
ACS = os.path.join(SPECS, "acs_national_topdown.dps")


def _spec(path, replace=None):
    return edited_spec(read_source(path), path, replace)


def test_production_allocation_budget():
    result = CliRunner().invoke(main, ["budget", "--json", PL94])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert round(summary["budget"]["rho"], 3) == 2.556
    bs16 = next(c for c in summary["conversions"] if c["method"] == "bs16")
    assert round(bs16["epsilon"], 2) == 17.90
    assert bs16["delta"] == 1e-10
    assert summary["bounds_hold"] is True


def test_shares_that_do_not_sum_to_one_are_a_spec_error():
    spec = _spec(PL94, {"block: 165/4099": "block: 166/4099"})
    with pytest.raises(SpecError) as info:
        check(spec)
    assert "shares must sum to exactly 1" in str(info.value)
    assert "4100/4099" in str(info.value)


def test_query_shares_that_do_not_sum_to_one_are_a_spec_error():
    spec = _spec(ACS, {"total: 0.1": "total: 0.2"})
    with pytest.raises(SpecError, match="query shares .* must sum to exactly 1"):
        check(spec)


def test_invariant_the_mechanism_cannot_keep():
    spec = _spec(ACS, {"count persons by state\n": "count persons by state\n  count persons by puma, state\n"})
    with pytest.raises(
        SpecError,
        match="TopDown cannot keep the invariant 'count persons by puma, state' exact: it names two geography levels",
    ):
        check(spec)


def test_unknown_level_share():
    spec = _spec(ACS, {"puma: 0.5": "county: 0.5"})
    with pytest.raises(SpecError, match="levels: 'county' is not a geography level"):
        check(spec)


def test_declared_invariants_are_the_induced_ones():
    checked = check(_spec(ACS))
    assert [q.describe() for q in checked.induced] == ["count persons by state"]


@pytest.fixture(scope="module")
def acs_result():
    return compile_spec(_spec(ACS), seed=3, audit=False)


def test_acs_compile_keeps_every_guarantee(acs_result):
    persons = pd.read_csv(os.path.join(SPECS, "data", "acs_national", "acs_national_pl94.csv"), dtype=str)
    out = acs_result.published["persons"].to_pandas()  # streamed; small here
    # the invariant: state populations exact
    a = persons.groupby("state").size()
    b = out.groupby("state", observed=True).size()
    b.index = b.index.astype(str)
    assert a.sort_index().equals(b.sort_index())
    # consistency: microdata is integral by construction; PUMA counts sum to state counts
    puma = out.groupby(["state", "puma"], observed=True).size().groupby(level=0, observed=True).sum()
    assert (puma.to_numpy() == out.groupby("state", observed=True).size().to_numpy()).all()
    assert set(out.columns) == {"state", "puma", "hhgq", "votingage", "hispanic", "cenrace"}
    m = acs_result.published["measurements"].to_pandas()
    assert {"level", "geocode", "query", "cell", "value", "variance"} <= set(m.columns)
    assert set(m["level"].astype(str)) == {"nation", "state", "puma"}


def test_acs_accuracy_is_internal_only(acs_result):
    errors = acs_result.utility["error_by_level_and_query"]
    state_total = next(e for e in errors if e["level"] == "state" and e["query"] == "total")
    assert state_total["mean_absolute_error"] == 0.0  # an invariant
    assert all(e["mean_absolute_error"] >= 0 for e in errors)


@pytest.mark.slow  # two TopDown runs of the ACS excerpt
def test_fixed_seed_gives_the_same_release():
    a = compile_spec(_spec(ACS), seed=11, audit=False).published["persons"].to_pandas()
    b = compile_spec(_spec(ACS), seed=11, audit=False).published["persons"].to_pandas()
    pd.testing.assert_frame_equal(a, b)


def test_a_puma_in_two_states_is_a_data_error(tmp_path):
    persons = pd.read_csv(os.path.join(SPECS, "data", "acs_national", "acs_national_pl94.csv"), dtype=str)
    persons.loc[0, "state"] = "06"  # a declared state: its PUMA (of state 01) now lies in two states
    persons.to_csv(tmp_path / "p.csv", index=False)
    text = keys_from(
        read_source(ACS).replace('"data/acs_national/acs_national_pl94.csv"', f'"{tmp_path / "p.csv"}"'), SPECS
    )
    with pytest.raises(DataError, match="lies in more than one state"):
        compile_spec(parse(text, str(tmp_path / "x.dps")), seed=1, audit=False)


def test_error_shrinks_as_rho_grows():
    maes = []
    for rho in ("1/10", "10"):
        spec = _spec(
            ACS,
            {
                "rho: 2": f"rho: {rho}",
                "budget rho <= 2": f"budget rho <= {rho}",
                "budget epsilon <= 17 with delta = 1e-10 by bs16\n": "",
            },
        )
        result = compile_spec(spec, seed=5, audit=False)
        errors = result.utility["error_by_level_and_query"]
        maes.append(np.mean([e["mean_absolute_error"] for e in errors if e["level"] == "puma"]))
    assert maes[1] < maes[0] / 2
