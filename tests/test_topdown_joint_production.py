"""Structural zeros on a joint table (production's DHCH household zeros, Constraints_DHCH.py):
stated in the joint block, checked at the spec line, held by the solver at every level, and data
in a zero cell are a DataError naming the table, the zero, the block and the cell."""

import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError

from tests.conftest import edited_spec
from tests.topdown_geography import parse
from tests.test_topdown_dhc_solver import JOINT_SPEC  # noqa: E402

SPEC = (
    JOINT_SPEC.replace("solved jointly", "solved jointly, with zeros")
    .replace("    vacs   : {0, 1, 2}\n", "    vacs   : {0, 1, 2, 3}\n")
    .replace(
        "      recodes: { occupancy: { of: vacs  occupied: [0]  vacant: [1, 2] } }\n",
        "      recodes: { occupancy: { of: vacs  occupied: [0]  vacant: [1, 2, 3] } }\n"
        "      structural_zeros: {\n        no_seasonal: {\n          vacs: [2, 3]\n        }\n      }\n",
    )
)


def _spec(replace=None):
    return edited_spec(SPEC, "zeros.dps", replace, parse=parse)


def test_joint_zeros_check_and_name_their_cells():
    from dpspec_topdown.params.tables import _joint

    spec = _spec()
    (j,) = _joint(spec, check(spec).params)
    assert j["structural_zeros"] == {"no_seasonal": {"vacs": ["2", "3"]}}  # the enum's categories


def test_a_zero_on_a_recode_stands_for_the_categories_of_its_groups_and_intersects():
    from dpspec_topdown.params.tables import _joint

    spec = _spec({"vacs: [2, 3]": "occupancy: [vacant]\n          vacs: [0, 3]"})
    (j,) = _joint(spec, check(spec).params)
    assert j["structural_zeros"] == {"no_seasonal": {"vacs": ["3"]}}  # vacant (1, 2, 3) and (0, 3)


@pytest.mark.parametrize(
    "replace, message",
    [
        ("rooms: [2, 3]", "names 'rooms', which is not a histogram variable or recode (known: vacs, occupancy)"),
        ("vacs: [2, 7]", "vacs = [7] are not categories of 'vacs' (0, 1, 2, 3)"),
        ("occupancy: [empty]", "occupancy = ['empty'] are not groups of 'occupancy' (occupied, vacant)"),
    ],
)
def test_joint_zero_misuse_is_a_spec_error_at_its_line(replace, message):
    spec = _spec({"vacs: [2, 3]": replace})
    line = next(i for i, text in enumerate(SPEC.splitlines(), 1) if "vacs: [2, 3]" in text)
    with pytest.raises(SpecError) as info:
        check(spec)
    found = [d for d in info.value.diagnostics if message in d.message]
    assert found and found[0].message.startswith("joint: 'units': structural_zeros: 'no_seasonal'"), info.value
    assert found[0].line == line


def _data(seed=4, n_blocks=24):
    """Units with vacs in {0, 1} only (no seasonal units) and one household per occupied unit."""
    rng = np.random.default_rng(seed)
    blocks = np.array([f"{c:02d}{b:03d}" for c in range(3) for b in range(n_blocks // 3)], dtype=object)
    unit_block = np.repeat(blocks, rng.integers(1, 8, size=blocks.size))
    vacs = (rng.random(unit_block.size) < 0.3).astype(np.int64)
    occupied = unit_block[vacs == 0]
    units = pd.DataFrame({"state": "01", "county": [b[:2] for b in unit_block], "block": unit_block, "vacs": vacs})
    households = pd.DataFrame(
        {
            "state": "01",
            "county": [b[:2] for b in occupied],
            "block": occupied,
            "hhsize": rng.integers(1, 4, size=occupied.size),
            "tenure": rng.integers(0, 2, size=occupied.size),
        }
    )
    return households, units


def _run(households, units, zeros, seed=0):
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import JointTable, Records, RunContext
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.measurement.histogram import Recode

    shares = {"state": Fraction(1, 4), "county": Fraction(1, 4), "block": Fraction(1, 2)}
    occupancy = Recode.build("occupancy", "vacs", [0, 1, 2, 3], {"occupied": [0], "vacant": [1, 2, 3]})
    table = JointTable(
        "units",
        units,
        {"vacs": [0, 1, 2, 3]},
        {lv: [(("occupancy",), Fraction(1, 4)), (("vacs",), Fraction(1, 4))] for lv in shares},
        recodes=[occupancy],
        invariants=[("block", ())],
        cross=[("h1", (), None, ("occupancy",), 0, 1)],
        structural_zeros=zeros,
    )
    strategy = {lv: [((), Fraction(1, 4)), (("hhsize", "tenure"), Fraction(1, 4))] for lv in shares}
    # a small rho: noisy answers spread over every cell, so a cell left free is filled somewhere
    return run_topdown(
        Records(households, joint=table),
        Design(
            ["nation", "state", "county", "block"],
            {"hhsize": [1, 2, 3], "tenure": [0, 1]},
            strategy,
            Fraction(1, 20),
            shares,
            "hamming",
            [("state", ())],
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )


def test_the_release_keeps_the_joint_zeros_at_every_level():
    households, units = _data()
    zeros = {"no_seasonal": {"vacs": [2, 3]}}
    held = _run(households, units, zeros).joint["units"]
    # without the zeros the noise puts units in the empty cells (in about 3 runs of 4: the state's
    # noisy answers of both cells must not be negative); with them no level has any
    free = [_run(households, units, {}, seed).joint["units"] for seed in (0, 1, 2)]
    assert any(h[:, 2:].sum() > 0 for run in free for h in run.histograms.values())
    for name, h in held.histograms.items():
        assert h[:, 2:].sum() == 0, name
    assert held.microdata["vacs"].isin([0, 1]).all()
    out = held.microdata
    assert out.groupby("block").size().sort_index().equals(units.groupby("block").size().sort_index())


def test_data_in_a_joint_zero_cell_are_a_data_error_naming_table_block_and_cell():
    households, units = _data()
    units.loc[units.index[5], "vacs"] = 3
    block = units["block"].iloc[5]
    with pytest.raises(
        DataError,
        match=rf"the data of table 'units' break the structural zero 'no_seasonal': 1 record, "
        rf"e.g. in block {block} \(cell vacs=3\)",
    ):
        _run(households, units, {"no_seasonal": {"vacs": [2, 3]}})


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_a_joint_spec_with_zeros_releases_the_same_bytes_on_spark(tmp_path, spark_session, monkeypatch):
    """Households and units read from Parquet, so Spark holds both tables (the engine path the
    bundled DHC households specs take): the bytes of the local engine."""
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes, spark_parquet_reads

    read = spark_parquet_reads(monkeypatch)

    households, units = _data(seed=9)
    (tmp_path / "in").mkdir()
    # Parquet, so both tables are held by the engine (a CSV source is read by pandas on either)
    households.to_parquet(tmp_path / "in" / "households.parquet", index=False)
    units.to_parquet(tmp_path / "in" / "units.parquet", index=False)
    text = SPEC.replace(
        "unit households : hamming",
        'data households from "households.parquet"\n'
        'data units from "units.parquet"\n\ninvariants {\n  count households by state\n'
        "  count units by block\n}\n\nunit households : hamming",
    )
    text = text.replace(
        "release {\n  microdata households\n}", "release {\n  microdata households\n  microdata units\n}"
    )
    text = text.replace("  cross_constraints: {", PASSES)  # interleaved outer passes at the blocks, on both engines
    spec = tmp_path / "in" / "zeros.dps"
    from tests.topdown_geography import write_declared

    write_declared(spec, text)  # the geography declared from the data beside it
    local = release_bytes(compile_on(str(spec), "local"), tmp_path / "local")
    on_spark = release_bytes(compile_on(str(spec), SparkEngine(session=spark_session)), tmp_path / "spark")
    assert set(local) == {"households.csv", "units.csv"}
    assert on_spark == local
    assert sorted(os.path.basename(p) for p in read) == ["households.parquet", "units.parquet"]
    released = pd.read_csv(tmp_path / "local" / "units.csv", dtype=str)
    assert set(released["vacs"]) <= {"0", "1"}


# --- interleaved outer passes over both tables (joint_passes.py) ----------------------------------

OUTER = [
    {"estimation": [[("@units", "occupancy"), ("@units", "vacs")]], "rounding": [[("@units", "vacs")]]},
    {"estimation": [[()]], "rounding": [[()]]},
    {"estimation": [[("hhsize", "tenure")]], "rounding": [[("hhsize", "tenure")]]},
]


def _run_passes(households, units, outer=OUTER, seed=0):
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import JointTable, Records, RunContext
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.measurement.histogram import Recode

    shares = {"state": Fraction(1, 4), "county": Fraction(1, 4), "block": Fraction(1, 2)}
    occupancy = Recode.build("occupancy", "vacs", [0, 1, 2, 3], {"occupied": [0], "vacant": [1, 2, 3]})
    table = JointTable(
        "units",
        units,
        {"vacs": [0, 1, 2, 3]},
        {lv: [(("occupancy",), Fraction(1, 4)), (("vacs",), Fraction(1, 4))] for lv in shares},
        recodes=[occupancy],
        invariants=[("block", ())],
        cross=[("h1", (), None, ("occupancy",), 0, 1)],
        structural_zeros={"z": {"vacs": [2, 3]}},
    )
    strategy = {lv: [((), Fraction(1, 4)), (("hhsize", "tenure"), Fraction(1, 4))] for lv in shares}
    passes = {lv: {"outer": outer, "tolerance": Fraction(1, 10)} for lv in shares} if outer else None
    return run_topdown(
        Records(households, joint=table),
        Design(
            ["nation", "state", "county", "block"],
            {"hhsize": [1, 2, 3], "tenure": [0, 1]},
            strategy,
            Fraction(1, 20),
            shares,
            "hamming",
            [("state", ())],
            passes=passes,
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )


def test_outer_passes_fix_each_pass_rounded_answers_and_keep_the_tie():
    """The units are fitted and rounded first and then fixed: the households' later passes cannot
    move them, so the units' release equals a run whose outer passes stop after the first (same
    noise), while the one-pass joint solve, where the households' measurements pull on the shared
    occupied totals, releases other units."""
    from dpspec_topdown.estimation.joint_problem import side_sums

    households, units = _data()
    full = _run_passes(households, units)
    first = _run_passes(
        households,
        units,
        OUTER[:1] + [{"estimation": [[(), ("hhsize", "tenure")]], "rounding": [[("hhsize", "tenure")]]}],
    )
    one = _run_passes(households, units, outer=None)
    for name in full.hierarchy.names:
        assert (full.joint["units"].histograms[name] != first.joint["units"].histograms[name]).nnz == 0, name
        left = np.asarray(full.histograms[name].sum(axis=1)).ravel()
        right = side_sums(full.joint["units"].histograms[name], np.array([0, -1, -1, -1]), 1).ravel()
        assert np.array_equal(left, right), name
    assert any(
        (full.joint["units"].histograms[n] != one.joint["units"].histograms[n]).nnz for n in full.hierarchy.names
    )
    assert full.timings["levels"]["block"]["outer_passes"] == 3
    assert full.joint["units"].microdata["vacs"].isin([0, 1]).all()  # the zeros hold in passes too


@pytest.mark.parametrize(
    "outer, message",
    [
        (OUTER[:2], "leave measured queries unfitted: hhsize \\* tenure"),
        (
            [{"estimation": [[()], [("hhsize", "tenure")]], "rounding": [[()]]}] + OUTER[:1],
            "one estimation pass and one rounding pass",
        ),
        ([{"estimation": [[("@rooms", "kind")]], "rounding": [[()]]}] + OUTER, "names table 'rooms'"),
    ],
)
def test_bad_joint_outer_passes_are_spec_errors(outer, message):
    households, units = _data(n_blocks=6)
    with pytest.raises(SpecError, match=message):
        _run_passes(households, units, outer)


PASSES = (
    '  outer_passes: {\n    block: {\n      outer1: {\n        estimation: ["units: occupancy", "units: detailed"]\n'
    '        rounding: ["units: detailed"]\n      }\n      outer2: {\n        estimation: ["total", "detailed"]\n'
    '        rounding: ["detailed"]\n      }\n    }\n  }\n  cross_constraints: {'
)


def test_joint_outer_passes_in_a_spec_check_and_name_either_table():
    passes = PASSES
    check(_spec({"  cross_constraints: {": passes}))
    with pytest.raises(SpecError, match="names table 'rooms', which is not a joint table"):
        check(_spec({"  cross_constraints: {": passes.replace('"units: occupancy"', '"rooms: occupancy"')}))
    with pytest.raises(SpecError, match="leave measured queries unfitted: units: occupancy") as info:
        check(_spec({"  cross_constraints: {": passes.replace('"units: occupancy", ', "")}))
    text = SPEC.replace("  cross_constraints: {", passes)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip() == "block: {")  # outer_passes' block
    assert [d.line for d in info.value.diagnostics if "unfitted" in d.message] == [line]


# --- both tables rounded in one problem (joint_round.py) ----------------------------------------


def test_both_tables_are_rounded_in_one_problem_with_the_cross_constraint():
    """A unit fit of 0.6 on the tie and two household cells of 0.3 each: rounded first, the units
    go up (0.4 away) and force the households to 1 (1.0 away, 1.4 in all); rounded together,
    as production rounds its stacked histograms, both go down (0.6 + 0.6 = 1.2)."""
    from dpspec_topdown.estimation import postprocess, rounding
    from dpspec_topdown.estimation.joint_problem import CrossConstraint
    from dpspec_topdown.estimation.joint_round import round_jointly

    def task(n_cells):
        return postprocess.NodeTask(key=0, n_children=1, n_cells=n_cells, parent=None, measurements=(), constraints=())

    var_a = (np.array([0]), np.array([0]), np.array([0]), np.array([0]))
    var_b = (np.array([0, 1]), np.array([0, 0]), np.array([0, 1]), np.array([0, 1]))
    xa, xb = np.array([0.6]), np.array([0.3, 0.3])
    cross = [CrossConstraint("tie", np.array([0]), np.array([0, 0]), 1)]
    cells, vc, va, vcell = var_a
    alone, _, _ = rounding._round(task(1), xa, va, vc, vcell, cells)
    assert alone.tolist() == [1]  # the first table alone rounds up
    a, b, _, _ = round_jointly(task(1), xa, var_a, task(2), xb, var_b, cross)
    assert a.tolist() == [0] and b.tolist() == [0, 0]
    assert np.abs(a - xa).sum() + np.abs(b - xb).sum() == pytest.approx(1.2)


def test_a_joint_rounding_that_cannot_keep_the_tie_is_a_mechanism_error():
    from dpspec.errors import MechanismError
    from dpspec_topdown.estimation import postprocess
    from dpspec_topdown.estimation.joint_problem import CrossConstraint
    from dpspec_topdown.estimation.joint_round import round_jointly

    one = (np.array([0]), np.array([0]), np.array([0]), np.array([0]))
    units = postprocess.NodeTask(key=7, n_children=1, n_cells=1, parent=np.array([2]), measurements=(), constraints=())
    households = postprocess.NodeTask(
        key=7, n_children=1, n_cells=1, parent=np.array([1]), measurements=(), constraints=()
    )
    cross = [CrossConstraint("tie", np.array([0]), np.array([0]), 1)]
    with pytest.raises(MechanismError, match=r"joint node 7: no integer split of both tables .*\(tie\)"):
        round_jointly(units, np.array([2.0]), one, households, np.array([1.0]), one, cross)


def test_a_rounding_margin_key_without_bounds_is_no_row_of_the_linear_program(monkeypatch):
    """A stacked table's spare key (joint_round._stacked) bounds nothing: it is left out of the
    problem HiGHS gets (at the Puerto Rico root it held 1.5 million columns a second time), and
    the rounding is the one the bounded rows give."""
    from dpspec_topdown.estimation import highs, postprocess, rounding

    task = postprocess.NodeTask(key=0, n_children=1, n_cells=4, parent=None, measurements=(), constraints=())
    cells = np.arange(4)
    vc = np.zeros(4, dtype=np.int64)
    x = np.array([0.6, 0.4, 0.7, 0.2])
    margin = (np.array([0, 0, 1, 1]), 2, np.array([1.0, -np.inf]), np.array([1.0, np.inf]))  # key 1: the spare
    seen = []
    real = highs._highs

    def watched(cost, lower, upper, a, row_lo, row_hi, **kw):
        seen.append((a.shape[0], np.asarray(row_lo).copy(), np.asarray(row_hi).copy()))
        return real(cost, lower, upper, a, row_lo, row_hi, **kw)

    monkeypatch.setattr(highs, "_highs", watched)
    monkeypatch.setenv(rounding.SOLVER_ENV, "highs")  # the LP handed to HiGHS, not the min-cost flow
    counts, _, milp = rounding._round(task, x, cells, vc, cells, cells, margins=(margin,))
    assert counts.tolist() == [1, 0, 1, 0] and not milp
    ((m, lo, hi),) = seen
    assert m == 2 and np.all(np.isfinite(lo) | np.isfinite(hi))  # the child's total and key 0
