"""What `dpspec verify --replay` can compare: TopDown's sparse (keyed) queries are recorded, their
unlisted cells 0, so a neighbour's change in which cells are nonzero is a change of values (compared
against the sensitivity), not of control flow; a plugin that crashes on a neighbour is a finding
naming the neighbour, with the exit code of a failed verification (1), whatever it raises."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

import dpspec
from dpspec.run import measurements
from dpspec.verify.replay import Merged, Run, _control_flow, _sensitivities, replay
from tests.conftest import SPECS
from tests.test_topdown_declared_geography import _spec


def test_topdowns_sparse_detailed_query_is_recorded_and_replays_clean(tmp_path, monkeypatch):
    from dpspec_topdown.measurement import node_noise

    monkeypatch.setattr(node_noise, "KEYED_GROUPS", 1)  # every query of more than one group is keyed
    spec = _spec(tmp_path)
    with measurements.recording() as rec:
        dpspec.compile(spec, seed=7)
    sparse = [m for m in rec.measurements if m.sparse]
    assert sparse and all(m.label.endswith("/adult") for m in sparse)  # the detailed query: adult
    assert {m.label.split("/")[0] for m in sparse} >= {"county", "block"}
    # a bundled spec whose release size is invariant (the microdata's rows are the state's count)
    result = replay(os.path.join(SPECS, "acs_ma_hispanic_topdown.dps"), neighbours=2, seed=3)
    assert result.findings == [], result.text()


def _merged(keys, values, sparse=True):
    return Merged(
        "discrete_gaussian", np.asarray(values, dtype=float), (len(values),), tuple(keys), 2, 1, "l2", 0, False, sparse
    )


def test_a_sparse_query_whose_nonzero_cells_change_is_compared_cell_by_cell_not_flagged_as_control_flow():
    base = Run({"q": _merged(["0|1", "1|0"], [1, 3])}, frozenset(), {})
    other = Run({"q": _merged(["1|0", "1|1"], [3, 1])}, frozenset(), {})
    findings, explained = [], []
    _control_flow(base, other, findings, explained)
    assert findings == [] and explained == []
    loss = _sensitivities(base, other, 1, findings)
    assert len(findings) == 1 and "L2 change 1.414" in findings[0].message  # (1, 0, 0) vs (0, 0, 1)
    assert loss["rho"] == 2 / (2 * 2)


# ---- a plugin that crashes on a neighbour ------------------------------------------------------

from click.testing import CliRunner  # noqa: E402

from dpspec.cli.main import main  # noqa: E402
from tests.test_verify_replay import _Counts, spec_for  # noqa: E402,F401 (spec_for: a fixture)
from tests.verify_helpers import registered  # noqa: E402


class Exits(_Counts):
    """Calls sys.exit on a neighbour that has a record in county c."""

    name = "replay_exits"

    def run(self, spec, params, data, rng):
        if (data["people"]["county"] == "c").any():
            raise SystemExit(3)
        return super().run(spec, params, data, rng)


class WordySensitivity(_Counts):
    """States its sensitivity as words: nothing the replay can compare it with."""

    name = "replay_wordy"

    def run(self, spec, params, data, rng):
        from dpspec.api import record_measurement

        record_measurement("words", np.zeros(1), "discrete_laplace", 1, sensitivity="one person", norm="l1")
        return super().run(spec, params, data, rng)


@pytest.mark.parametrize("mech, error", [(Exits(), "SystemExit: 3"), (WordySensitivity(), "could not compare")])
def test_a_plugin_crashing_on_a_neighbour_is_a_failed_verification_naming_the_neighbour(spec_for, mech, error):
    with registered(mech):
        out = CliRunner().invoke(main, ["verify", "--replay", spec_for(mech.name)])
    assert out.exit_code == 1, out.output  # a failed verification: the user's to act on, not an internal error
    assert "FINDING [failed]" in out.output and error in out.output, out.output
    assert "Traceback" not in out.output and "internal error" not in out.output


# ---- SafeTab's rows, explained one by one --------------------------------------------------------


def _counts_run(rows, values):
    """A run whose output 'counts' holds `rows` (geocode, group), governed by one measurement
    keyed geocode|group with exact `values`."""
    from dpspec.verify.replay import _outputs  # noqa: F401 (the function under test, below)

    keys = frozenset(rows)
    structure = {
        "counts": {
            "columns": ("geocode", "group", "count"),
            "rows": len(rows),
            "keys": keys,
            "key_columns": ("geocode", "group"),
        }
    }
    merged = _merged([f"{g}|{x}" for g, x in values], list(values.values()), sparse=False)
    governed = {"counts": {r: ("t1/county/level 1/", f"{r[0]}|{r[1]}") for r in rows}}
    return Run({"t1/county/level 1/stage 1": merged}, frozenset(), structure, None, governed)


def test_a_row_appears_explained_only_when_a_measurement_deciding_it_changed():
    from dpspec.verify.replay import _outputs

    base = _counts_run([("a", "1")], {("a", "1"): 5, ("b", "1"): 0})
    moved = _counts_run([("a", "1"), ("b", "1")], {("a", "1"): 5, ("b", "1"): 1})  # b's total changed
    leaked = _counts_run([("a", "1"), ("b", "1")], {("a", "1"): 5, ("b", "1"): 0})  # nothing b's row follows did
    findings, explained = [], []
    _outputs(base, moved, findings, explained)
    assert findings == [] and len(explained) == 1 and "geocode=b, group=1 appears" in explained[0].message
    findings, explained = [], []
    _outputs(base, leaked, findings, explained)
    assert len(findings) == 1 and "no measurement deciding that row changed" in findings[0].message


@pytest.mark.slow  # a SafeTab production replay: about 8 s
def test_safetab_declares_its_counts_row_by_row_and_replays_clean():
    from tests.safetab_helpers import P_SPEC

    with measurements.recording() as rec:
        dpspec.compile(dpspec.load(str(P_SPEC)), seed=2)
    assert "counts" in rec.adaptive_rows and "counts" not in rec.adaptive_outputs
    result = replay(str(P_SPEC), neighbours=2, seed=3, sample=3000)
    assert result.findings == [], result.text()


# ---- a coarser unit: up to K records at once -------------------------------------------------------

UNIT_SPEC = textwrap.dedent("""\
    spec "replay of a coarser unit"
    domain d "test" {
      stage edited
      table households unit household {
        hhid : int 1..1000
      }
      table people unit person in households by hhid at most 3 {
        hhid : int 1..1000
        county : {a, b, c}
        age : int 0..9
      }
    }
    data people from "people.csv"
    unit households : UNITREL
    premetric pure
    mechanism replay_honest { table: people }
    budget epsilon <= 3
    """)
# households 1..4 with 3, 2, 3, 2 people; all in counties a and b
PEOPLE = "hhid,county,age\n" + "".join(
    f"{h},{c},{i % 10}\n" for i, (h, c) in enumerate([(1, "a")] * 3 + [(2, "a")] * 2 + [(3, "b")] * 3 + [(4, "b")] * 2)
)


@pytest.mark.parametrize("relation, change, steps", [("hamming", "changed", 6), ("symdiff", "removed", 3)])
def test_a_unit_holding_up_to_k_records_is_replayed_k_records_at_once(tmp_path, relation, change, steps):
    from tests.test_verify_replay import Honest

    (tmp_path / "people.csv").write_text(PEOPLE)
    path = tmp_path / "unit.dps"
    path.write_text(UNIT_SPEC.replace("UNITREL", relation))
    with registered(Honest()):
        result = replay(str(path), neighbours=4)
    whole = [n for n in result.neighbours if "at once" in n.neighbour["label"]]
    assert whole, result.text()
    (first,) = whole[:1]
    assert first.neighbour["change"] == change and "3 records" in first.neighbour["label"]
    assert first.native_steps == steps  # three records, each one (or two) of the native add/remove steps
    assert result.findings == [], result.text()  # its counts move by 3 at most: within 3 x the sensitivity
    assert any("up to 3 of one 'households' at once" in n for n in result.notes)
