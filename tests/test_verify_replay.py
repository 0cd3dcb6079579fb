"""`dpspec verify --replay`: each built-in mechanism replays clean on a small bundled spec; a plugin that
releases keys found in the data, one whose noise is set for too small a sensitivity, and one that fails on
a neighbour are each reported, the neighbour named."""

from __future__ import annotations

import json
import os
import textwrap
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec import schemas
from dpspec.api import (
    Mechanism,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    PureDP,
    Release,
    BudgetStatement,
    discrete_laplace,
    record_measurement,
)
from dpspec.cli.main import main
from dpspec.run import measurements
from dpspec.verify.miniature import VerifyError
from dpspec.verify.replay import replay
from tests.verify_helpers import registered

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")


def _clean(result):
    assert result.findings == [], result.text()
    assert result.exit_code == 0
    assert result.measurements > 0, "the mechanism recorded no measurement"


@pytest.mark.parametrize(
    "name, options",
    [
        ("acs_ma_vision_rr.dps", {}),
        ("pa_covid/wasserstein_naive_high_privacy.dps", {}),
        ("pa_covid/postprocessing_high_privacy.dps", {}),
        ("acs_ma_hispanic_topdown.dps", {"neighbours": 3}),
        pytest.param("sdhc_production.dps", {"neighbours": 3}, marks=pytest.mark.slow),  # the production S-DHC
        pytest.param("safetab_h_production.dps", {"neighbours": 2}, marks=pytest.mark.slow),  # SafeTab-H's cells
        ("ma1940_swap.dps", {"sample": 5000}),
    ],
)
def test_replay_of_each_built_in_mechanism_is_clean_when_run_on_its_small_bundled_spec(name, options):
    _clean(replay(os.path.join(SPECS, name), seed=3, **options))


def test_replay_refuses_when_the_mechanism_only_records_a_published_budget():
    with pytest.raises(VerifyError, match="nothing to replay"):
        replay(os.path.join(SPECS, "registry", "pl94_persons.dps"))


def test_the_recorder_keeps_nothing_when_no_replay_records():
    record_measurement("q", np.arange(3), "discrete_laplace", 2, sensitivity=1, norm="l1")  # no recorder: a no-op
    with measurements.recording() as rec:
        record_measurement("q", np.arange(3), "discrete_laplace", 2, sensitivity=1, norm="l1")
    record_measurement("q", np.arange(3), "discrete_laplace", 2)
    assert [m.label for m in rec.measurements] == ["q"] and rec.measurements[0].shape == (3,)
    assert not measurements.recording_now()


# ---- third-party test plugins ----------------------------------------------------------------

SPEC = textwrap.dedent("""\
    spec "replay"
    domain d "test" {
      stage edited
      table people unit person {
        county : {a, b, c}
        age : int 0..9
      }
    }
    data people from "people.csv"
    unit people : symdiff
    premetric pure
    mechanism MECH { table: people }
    budget epsilon <= 1
    """)
CSV = "county,age\n" + "".join(f"{c},{i % 10}\n" for i, c in enumerate(["a"] * 7 + ["b"] * 3))


class _Counts(Mechanism):
    """Noisy counts of people by county (discrete Laplace, epsilon 1)."""

    version = "0"
    parameters = ParameterSchema((ParamSpec("table", "table", "the table", required=True),))
    double = False
    fail_on = None

    def flavor(self, spec, params):
        return NativeFlavor("people", "symdiff", "pure")

    def budget(self, spec, params, facts):
        return BudgetStatement(PureDP(1.0), worst=PureDP(1.0))

    def output_keys(self, spec, params):
        return {"counts": OutputKeys("people", ("county",))}

    def cells(self, frame):
        return ["a", "b", "c"]

    def run(self, spec, params, data, rng):
        frame = data["people"]
        if self.fail_on is not None and (frame["county"] == self.fail_on).any():
            raise ValueError(f"no records of county {self.fail_on} expected")
        cells = self.cells(frame)
        counts = frame["county"].astype(str).value_counts().reindex(cells, fill_value=0).to_numpy()
        exact = 2 * counts if self.double else counts  # a person counted twice, noise set for one
        record_measurement(
            "counts by county", exact, "discrete_laplace", Fraction(1), sensitivity=1, norm="l1", keys=[cells]
        )
        noisy = exact + discrete_laplace(Fraction(1), len(cells), rng)
        return Release(outputs={"counts": pd.DataFrame({"county": cells, "count": noisy})})


class DataKeys(_Counts):
    """The old wasserstein_exponential: the cells found in the data, not the declared ones."""

    name = "replay_data_keys"

    def cells(self, frame):
        return sorted(frame["county"].astype(str).unique())


class Doubled(_Counts):
    name = "replay_doubled"
    double = True


class Failing(_Counts):
    name = "replay_failing"
    fail_on = "c"


class Honest(_Counts):
    name = "replay_honest"


@pytest.fixture
def spec_for(tmp_path):
    def make(mech: str) -> str:
        (tmp_path / "people.csv").write_text(CSV)
        path = tmp_path / f"{mech}.dps"
        path.write_text(SPEC.replace("MECH", mech))
        return str(path)

    return make


def test_a_plugin_with_declared_cells_replays_clean_when_a_declared_county_is_empty(spec_for):
    with registered(Honest()):
        _clean(replay(spec_for("replay_honest")))


def test_a_plugin_that_releases_the_counties_found_in_the_data_is_flagged_with_the_key_named(spec_for):
    with registered(DataKeys()):
        result = replay(spec_for("replay_data_keys"))
    assert result.exit_code == 1
    structure = [f.message for f in result.findings if f.kind == "structure"]
    assert any("county=c appears" in m for m in structure), result.text()
    assert any(f.kind == "control-flow" and "c" in f.message for f in result.findings)
    flagged = [n for n in result.neighbours if n.findings]
    assert any("empty declared cell county=c" in n.neighbour["label"] for n in flagged)


def test_a_plugin_whose_noise_is_set_for_a_smaller_sensitivity_than_it_has_is_flagged(spec_for):
    with registered(Doubled()):
        result = replay(spec_for("replay_doubled"))
    over = [f for f in result.findings if f.kind == "sensitivity"]
    assert len(over) == len(result.neighbours), result.text()  # every neighbour moves the counts twice as far
    assert all("above the sensitivity 1 its noise was set for" in f.message for f in over)
    assert "L1 change 2 between the neighbours" in over[0].message
    assert result.exit_code == 1


def test_a_plugin_that_fails_on_a_neighbour_gets_the_neighbour_reported_not_a_traceback(spec_for):
    with registered(Failing()):
        path = spec_for("replay_failing")
        out = CliRunner().invoke(main, ["verify", "--replay", path])
    assert out.exit_code == 1, out.output
    assert "FINDING [failed]" in out.output and "ValueError: no records of county c expected" in out.output
    assert "empty declared cell county=c: added record" in out.output
    assert "Traceback" not in out.output


def test_replay_json_is_valid_against_its_schema_and_its_exit_code_follows_the_findings(spec_for):
    for mech, code in [(Honest(), 0), (DataKeys(), 1)]:
        with registered(mech):
            out = CliRunner().invoke(main, ["verify", "--replay", "--json", "--neighbours", "4", spec_for(mech.name)])
        assert out.exit_code == code, out.output
        doc = json.loads(out.stdout)
        assert doc["format_version"] == schemas.version("replay")
        assert not schemas.problems("replay", doc)
        assert len(doc["neighbours"]) == 4
        assert doc["verdict"] == ("clean" if code == 0 else "findings")


def test_sample_is_refused_when_the_spec_links_several_tables():
    with pytest.raises(VerifyError, match="one data table"):
        replay(os.path.join(SPECS, "sdhc_production.dps"), sample=100)
