"""Post-processing-only constraints (postprocess_only.py): production's facility bounds left out of
the solves and repaired after each node's rounding by moving records within a child, inside the
groups of every exact marginal (the P.L. 94 equality), never into a structural zero; a row it
cannot repair is reported (a warning and the run's facts), or stops the run at a level listed in
postprocess_require_feasible, as production's constraint check does there."""

import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.measurement.histogram import Recode
from dpspec_topdown.estimation.postprocess import BoundConstraint, GroupConstraint, MeasuredQuery, NodeTask
from dpspec_topdown.estimation.postprocess_only import PostprocessOnly, repair
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, generate_population, pl94_strategy

# ---- one node, by hand: 2 children, cells gq (4 types) x age (3 values), cell = 3 * gq + age ----

GQ_MAJOR = np.repeat([0, 0, 1, 1], 3)  # types 0, 1 in one P.L. 94 group, 2, 3 in the other
INF = np.inf


def _task(upper, lower=None, zero=None, exact=GQ_MAJOR, secondary=None, feasible=False, noisy=None):
    bound = BoundConstraint(
        "hhgq_total_ub",
        np.repeat(np.arange(4), 3),
        4,
        np.zeros((2, 4), np.int64) if lower is None else np.asarray(lower, np.int64),
        np.asarray(upper, dtype=np.float64),
    )
    n_groups = int(exact.max()) + 1
    con = GroupConstraint("equal_to pl94", exact, n_groups, np.arange(2), np.zeros((2, n_groups), np.int64))
    pp = PostprocessOnly((bound,), (("upper", "lower"),), ((3, 4),), zero, secondary, feasible)
    noisy = np.zeros((2, 12), np.int64) if noisy is None else noisy
    return NodeTask(0, 2, 12, None, (noisy,), (con,), postprocess=pp)


DETAILED = [MeasuredQuery("detailed", np.arange(12), 12, 1.0)]


def _hist(child, cell, count):
    h = np.zeros((2, 12), np.int64)
    np.add.at(h, (child, cell), count)
    return h


# child 0: two persons of type 1 aged 1 and one of type 2 aged 0; child 1: one of type 0 aged 2
START = (np.array([0, 0, 1]), np.array([3 * 1 + 1, 3 * 2 + 0, 3 * 0 + 2]), np.array([2, 1, 1]))


def test_a_violated_upper_bound_is_repaired_within_the_equality_group():
    upper = [[INF, 0, INF, INF], [INF, INF, INF, INF]]  # child 0 has no facility of type 1
    child, cell, count, moves, broken = repair(_task(upper), DETAILED, *START)
    h, before = _hist(child, cell, count), _hist(*START)
    assert moves == 2 and broken == ()
    assert h[0, 3:6].sum() == 0 and h[0, 3 * 0 + 1] == 2  # to type 0, same age: the P.L. 94 group's other type
    # every exact marginal (the equality group) and each child's total are unchanged; child 1 untouched
    for c in range(2):
        assert (np.bincount(GQ_MAJOR, h[c], 2) == np.bincount(GQ_MAJOR, before[c], 2)).all()
    assert (h[1] == before[1]).all()


def test_the_move_is_the_one_closest_to_the_noisy_measurements():
    """Types 0, 1 and 2 share a P.L. 94 group: the two records of type 1 go where the child's noisy
    detailed answers put them (production's mse objective), one record at a time."""
    upper = [[INF, 0, INF, INF], [INF] * 4]
    exact = np.repeat([0, 0, 0, 1], 3)
    for where, want in ((3 * 2 + 1, 3 * 2 + 1), (3 * 0 + 1, 3 * 0 + 1)):
        noisy = np.zeros((2, 12), np.int64)
        noisy[0, where] = 2
        child, cell, count, moves, _ = repair(_task(upper, exact=exact, noisy=noisy), DETAILED, *START)
        assert moves == 2 and _hist(child, cell, count)[0, want] == 2
    # one noisy record in each: each move takes the cell whose residual is lowest at the time
    noisy = np.zeros((2, 12), np.int64)
    noisy[0, [3 * 0 + 1, 3 * 2 + 1]] = 1
    child, cell, count, _, _ = repair(_task(upper, exact=exact, noisy=noisy), DETAILED, *START)
    h = _hist(child, cell, count)
    assert h[0, 3 * 0 + 1] == 1 and h[0, 3 * 2 + 1] == 1


def test_a_structural_zero_blocks_the_move_and_the_row_is_reported_not_fixed():
    upper = [[INF, 0, INF, INF], [INF] * 4]
    zero = np.zeros(12, bool)
    zero[3 * 0 + 1] = True  # no person of type 0 aged 1
    child, cell, count, moves, broken = repair(_task(upper, zero=zero), DETAILED, *START)
    assert moves == 0 and broken == ((0, "hhgq_total_ub", 1, 2, 0, 0.0),)
    assert (_hist(child, cell, count) == _hist(*START)).all()  # left as it is, as production does
    # where production requires the row repaired, the record may also change its age, within its
    # exact group (ages {0} and {1, 2} apart here, as votingage in the P.L. 94 group)
    exact = GQ_MAJOR * 2 + (np.tile(np.arange(3), 4) > 0)
    child, cell, count, moves, broken = repair(
        _task(upper, zero=zero, exact=exact, secondary=(1, 3), feasible=True), DETAILED, *START
    )
    h = _hist(child, cell, count)
    assert moves == 2 and broken == () and h[0, 3 * 0 + 2] == 2 and h[0, 3:6].sum() == 0


def test_a_violated_lower_bound_takes_a_record_from_a_row_that_does_not_bind():
    upper = [[INF] * 4, [INF] * 4]
    lower = [[0, 0, 0, 0], [0, 1, 0, 0]]  # child 1 has an occupied facility of type 1 and no one there
    child, cell, count, moves, broken = repair(_task(upper, lower), DETAILED, *START)
    h = _hist(child, cell, count)
    assert moves == 1 and broken == () and h[1, 3 * 1 + 2] == 1 and h[1, 3 * 0 + 2] == 0
    # type 0 binding too (its own lower bound of 1 met exactly): no donor, reported
    lower = [[0, 0, 0, 0], [1, 1, 0, 0]]
    _, _, _, moves, broken = repair(_task(upper, lower), DETAILED, *START)
    assert moves == 0 and broken == ((1, "hhgq_total_ub", 1, 0, 1, INF),)


# ---- a whole run: the solve breaks the bounds, the heuristic repairs them ---------------------

MAJOR = {0: "hh", 1: "inst", 2: "inst", 3: "inst", 4: "inst", 5: "noninst", 6: "noninst", 7: "noninst"}
SHARES = dict(PRODUCTION_LEVEL_SHARES)
LEVELS_ALL = ["nation"] + LEVELS


@pytest.fixture(scope="module")
def population():
    """2,000 persons; in 30 blocks half the persons live in one group-quarters type (none a minor
    in type 1, a structural zero below)."""
    persons = generate_population(2000, 80, seed=46)
    h = persons["hhgq"].to_numpy().copy()
    blocks = persons["block"].to_numpy()
    for i, b in enumerate(pd.unique(blocks)[:30]):
        idx = np.flatnonzero(blocks == b)
        h[idx[: max(1, idx.size // 2)]] = 1 + i % 7
    persons = persons.assign(hhgq=h)
    persons.loc[persons["hhgq"] == 1, "votingage"] = 1
    return persons


def _product(persons):
    return (
        persons.assign(major=persons["hhgq"].map(MAJOR))
        .groupby(["block", "major", "votingage"], observed=True)
        .size()
        .rename("count")
        .reset_index()
    )


def _bounds(persons):
    present = persons.groupby(["block", "hhgq"], observed=True).size().unstack(fill_value=0)
    present = present.reindex(columns=range(8), fill_value=0)
    lower = (present > 0).astype(np.int64)
    lower[0] = 0  # at least one person per occupied facility; households are not bounded below
    return [("hhgq_total", ("hhgq",), lower, present.where(present == 0, np.inf).astype(np.float64))]


def _run(persons, product, seed=3, **kw):
    major = Recode.build("major", "hhgq", range(8), {"hh": [0], "inst": [1, 2, 3, 4], "noninst": [5, 6, 7]})
    return run_topdown(
        Records(persons, bounds=_bounds(persons), equalities=[("pl94", ("major", "votingage"), product)]),
        Design(
            LEVELS_ALL,
            PL94_VARIABLES,
            pl94_strategy(tuple(SHARES)),
            Fraction(1, 20),
            SHARES,
            "hamming",
            [("state", ())],
            recodes=[major],
            postprocess_only=["hhgq_total"],
            **kw,
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )


def test_a_run_repairs_the_bounds_and_keeps_equality_invariants_and_sums(population):
    product = _product(population)
    result = _run(population, product)
    report = result.timings["postprocess"]
    assert report["moves"]["block"] > 0 and report["unrepaired"] == [] and report["violations"] == []
    micro = result.microdata
    assert len(micro) == len(population)  # the state total
    got = _product(
        micro.assign(
            hhgq=micro["hhgq"].astype(int), votingage=micro["votingage"].astype(int), block=micro["block"].astype(str)
        )
    )
    want = product.assign(block=product["block"].astype(str))
    key = ["block", "major", "votingage"]
    assert got.set_index(key)["count"].sort_index().equals(want.set_index(key)["count"].sort_index())
    ((_, _, lower, upper),) = _bounds(population)
    per_block = micro.groupby([micro["block"].astype(str), micro["hhgq"].astype(int)]).size().unstack(fill_value=0)
    per_block = per_block.reindex(index=upper.index.astype(str), columns=range(8), fill_value=0)
    assert (per_block.to_numpy() <= upper.to_numpy()).all() and (per_block.to_numpy() >= lower.to_numpy()).all()
    # every level is the sum of its children (the levels above a repaired node are re-added)
    hier, protected = result.hierarchy, result.histograms
    for k in range(1, len(hier.levels)):
        h = protected[hier.names[k]].toarray()
        summed = np.zeros((hier.levels[k - 1].n_units, h.shape[1]), np.int64)
        np.add.at(summed, hier.levels[k].parent, h)
        assert (summed == protected[hier.names[k - 1]].toarray()).all()


def test_an_unrepairable_row_is_reported_not_fatal_except_where_required(population):
    """The product puts a minor in a group-quarters institution of a block whose only institution
    is of type 1 (no minors there): the solve must place them in a type the block lacks, and no
    move can fix it (type 1 is a structural zero for minors, the age group is held)."""
    zeros = {"no_minors_in_type_1": {"hhgq": [1], "votingage": [0]}}
    block = population.loc[population["hhgq"] == 1, "block"].iloc[0]
    product = _product(population)
    row = product.index[(product["block"] == block) & (product["major"] == "inst")][0]
    product.loc[row, "count"] -= 1
    extra = pd.DataFrame({"block": [block], "major": ["inst"], "votingage": [0], "count": [1]})
    product = pd.concat([product, extra], ignore_index=True)
    with pytest.warns(RuntimeWarning, match=f"could not repair hhgq_total at block {block}"):
        result = _run(population, product, structural_zeros=zeros)
    report = result.timings["postprocess"]
    assert {(e["level"], e["geounit"], e["constraint"]) for e in report["unrepaired"]} == {
        ("block", str(block), "hhgq_total")
    }
    assert [
        (e["level"], e["geounit"], e["lower"], e["upper"]) for e in report["violations"] if e["level"] == "block"
    ] == [("block", str(block), 0, 0)]
    with pytest.raises(DataError, match=f"could not repair hhgq_total at block {block}.*postprocess_require_feasible"):
        _run(population, product, structural_zeros=zeros, postprocess_feasible=["block"])


# ---- the language ----------------------------------------------------------------------------

SPEC = """spec "post-processing only"
domain d "d" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category
    county : category in state
    block : category in county
    hhgq : {0, 1, 2}
    sex : {0, 1}
  }
  table facilities unit facility {
    state : category
    county : category in state
    block : category in county
    gqtype : {0, 1, 2}
  }
}
invariants {
  count facilities by block, gqtype
}
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: hhgq, sex
  rho: 1
  levels: { state: 1/2  county: 1/4  block: 1/4 }
  queries: { total: 1/2  detailed: 1/2 }
  constraints: {
    hhgq_total_ub: { of: hhgq  table: facilities  type: gqtype  sense: upper }
    hhgq_total_lb: { of: hhgq  table: facilities  type: gqtype  occupied: [1, 2]  sense: lower }
  }
  EXTRA
}
"""
GOOD = "postprocess_only: [hhgq_total_ub, hhgq_total_lb]\n  postprocess_heuristics: true"
REPAIRED = SPEC.replace("EXTRA", GOOD).replace("rho: 1\n", "rho: 1/200\n")  # noise low enough to see the moves


def _line(text, start):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start))


def test_the_settings_check_and_misuse_is_a_located_spec_error():
    check(parse(SPEC.replace("EXTRA", GOOD + "\n  postprocess_require_feasible: [state, county]"), "s.dps"))
    check(parse(SPEC.replace("EXTRA", ""), "s.dps"))
    check(parse(SPEC.replace("EXTRA", "postprocess_heuristics: false"), "s.dps"))  # production's default
    text = SPEC.replace("EXTRA", "postprocess_only: [hhgq_total_ub, hhgq_total]\n  postprocess_heuristics: true")
    with pytest.raises(
        SpecError, match=f"s.dps:{_line(text, 'postprocess_only')}:.*'hhgq_total', which is not a declared constraint"
    ):
        check(parse(text, "s.dps"))
    text = SPEC.replace("EXTRA", "postprocess_only: [hhgq_total_ub]")
    with pytest.raises(SpecError, match=f"s.dps:{_line(text, 'postprocess_only')}:.*go together"):
        check(parse(text, "s.dps"))
    text = SPEC.replace("EXTRA", "postprocess_only: [hhgq_total_ub]\n  postprocess_heuristics: false")
    with pytest.raises(SpecError, match=f"s.dps:{_line(text, 'postprocess_heuristics')}:.*go together"):
        check(parse(text, "s.dps"))
    text = SPEC.replace("EXTRA", "postprocess_heuristics: true")
    with pytest.raises(SpecError, match=f"s.dps:{_line(text, 'postprocess_heuristics')}:.*go together"):
        check(parse(text, "s.dps"))
    text = SPEC.replace("EXTRA", GOOD + "\n  postprocess_require_feasible: [tract]")
    with pytest.raises(
        SpecError, match=f"s.dps:{_line(text, 'postprocess_require_feasible')}:.*'tract' is not a geography"
    ):
        check(parse(text, "s.dps"))
    text = SPEC.replace("EXTRA", "").replace("sense: upper", "sense: above")
    with pytest.raises(SpecError, match=f"s.dps:{_line(text, 'hhgq_total_ub')}:.*sense': unknown value 'above'"):
        check(parse(text, "s.dps"))


def _facility_data() -> dict:
    """12 blocks of 40 persons; persons of group-quarters type 1 or 2 in the first six blocks,
    where a facility of that type lies (10 housing units in every block)."""
    rng = np.random.default_rng(0)
    rows, facilities = [], []
    for b in range(12):
        county, block = f"c{b // 4}", f"c{b // 4}b{b % 4}"
        gq = 1 if b < 4 else 2 if b < 6 else 0
        hhgq = np.where(np.arange(40) < (20 if gq else 0), gq, 0)
        rows.append(
            pd.DataFrame({"state": "s", "county": county, "block": block, "hhgq": hhgq, "sex": rng.integers(0, 2, 40)})
        )
        facilities += [("s", county, block, 0)] * 10 + ([("s", county, block, gq)] if gq else [])
    return {
        "persons": pd.concat(rows, ignore_index=True),
        "facilities": pd.DataFrame(facilities, columns=["state", "county", "block", "gqtype"]),
    }


def test_a_compiled_spec_reports_the_heuristic_in_its_facts_and_notes():
    """Through the plugin: the bounds are left out of the solves and repaired; the run's facts
    count the moves per level and list what the release still breaks (nothing here)."""
    import dpspec

    data = _facility_data()
    text = REPAIRED
    result = dpspec.compile(parse(text, "s.dps", data=data), data=data, seed=2)
    report = result.release.facts["postprocess_only"]
    assert sum(report["moves"].values()) > 0 and report["violations"] == []
    assert any("records moved; every row holds" in note for note in result.release.notes)
    micro = result.published["persons"]
    micro = micro.to_pandas() if hasattr(micro, "to_pandas") else micro
    got = micro.groupby([micro["block"].astype(str), micro["hhgq"].astype(int)]).size().unstack(fill_value=0)
    assert (got.loc[[f"c{b // 4}b{b % 4}" for b in range(4)], 2] == 0).all()  # no type-2 persons where none live
    assert (got.loc[[f"c{b // 4}b{b % 4}" for b in range(6, 12)], [1, 2]].to_numpy() == 0).all()


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_the_repair_releases_the_same_bytes_on_spark(tmp_path, spark_session, monkeypatch):
    """Persons and facilities read from Parquet, so Spark holds both and counts the facilities
    for the bounds: the records the heuristic moves, and so the release, are the local engine's."""
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes, spark_parquet_reads
    from tests.topdown_geography import write_declared

    folder = tmp_path / "in"
    folder.mkdir()
    for name, frame in _facility_data().items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    text = REPAIRED
    text = text.replace(
        "invariants {",
        'data persons from "persons.parquet"\ndata facilities from "facilities.parquet"\n\ninvariants {',
    )
    text += "release {\n  microdata persons\n}\n"
    spec = folder / "s.dps"
    write_declared(spec, text)
    result = compile_on(str(spec), "local")
    assert sum(result.release.facts["postprocess_only"]["moves"].values()) > 0  # the repair ran
    local = release_bytes(result, tmp_path / "local")
    read = spark_parquet_reads(monkeypatch)
    assert release_bytes(compile_on(str(spec), SparkEngine(session=spark_session)), tmp_path / "spark") == local
    assert sorted(os.path.basename(p) for p in read) == ["facilities.parquet", "persons.parquet"]
