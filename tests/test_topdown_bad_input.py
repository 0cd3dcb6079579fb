"""Issue 24's bad input that only the data reveal, each a DataError naming the exact geounit and
cell: data in a structural zero, a released product (equal_to) that disagrees with an invariant
or puts persons where every cell is a structural zero, and a node the failsafe cannot save,
which stops the run naming its level and parent geounit. (The spec-side cases, each a
SpecError at its exact line, are in test_topdown_reviewer_misuse.py.)"""

import re

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import DataError
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, generate_population, pl94_strategy

ALL_LEVELS = ["nation"] + LEVELS
SHARES = dict(PRODUCTION_LEVEL_SHARES)
NURSE_NVA_0 = {"nurse_nva_0": {"hhgq": [3], "votingage": [0]}}
BY = ["block", "hhgq", "votingage"]


@pytest.fixture(scope="module")
def persons():
    frame = generate_population(600, 24, seed=11)
    return frame[~((frame["hhgq"] == 3) & (frame["votingage"] == 0))].reset_index(drop=True)  # keeps nurse_nva_0


def _run(persons, invariants=(("state", ()),), equalities=(), **kw):
    return run_topdown(
        Records(persons, equalities=equalities),
        Design(ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), 1, SHARES, "hamming", list(invariants), **kw),
        RunContext(np.random.default_rng(0), workers=1),
    )


def _product(persons):
    """The released product as the data's own block x hhgq x votingage counts (consistent)."""
    return persons.groupby(BY, observed=True).size().rename("count").reset_index()


def test_data_in_a_structural_zero_name_the_block_and_cell(persons):
    broken = persons.copy()
    broken.loc[5, ["hhgq", "votingage"]] = [3, 0]
    block = broken.loc[5, "block"]
    with pytest.raises(
        DataError,
        match=re.escape(
            f"break the structural zero 'nurse_nva_0': 1 record, e.g. in block {block} (cell hhgq=3, votingage=0"
        ),
    ):
        _run(broken, structural_zeros=NURSE_NVA_0)


def test_a_product_disagreeing_with_an_invariant_names_the_geounit_and_cell(persons):
    """One released person moved between two hhgq cells of a block: the block total holds, the
    block x hhgq invariant does not."""
    counts = _product(persons)
    block = str(counts["block"].iloc[0])
    row = counts.index[(counts["block"].astype(str) == block)][0]
    moved = counts.copy()
    hhgq = int(moved.loc[row, "hhgq"])
    moved.loc[row, "count"] -= 1
    other = moved.iloc[[row]].assign(hhgq=(hhgq + 1) % 8, count=1)
    moved = pd.concat([moved, other], ignore_index=True).groupby(BY, observed=True)["count"].sum().reset_index()
    with pytest.raises(
        DataError,
        match=re.escape(
            f"equal_to 'pl94': the released product disagrees with the invariant "
            f"'hhgq' at block '{block}' (cell hhgq={min(hhgq, (hhgq + 1) % 8)})"
        ),
    ):
        _run(
            persons,
            invariants=[("state", ()), ("block", ("hhgq",))],
            equalities=[("pl94", ("hhgq", "votingage"), moved)],
        )


def test_a_product_with_persons_in_a_structural_zero_names_the_block_and_cell(persons):
    counts = _product(persons)
    block = str(counts["block"].iloc[0])
    # one released person of the block moved into hhgq 3 under voting age (a nursing facility child)
    row = counts.index[(counts["block"].astype(str) == block)][0]
    moved = counts.copy()
    moved.loc[row, "count"] -= 1
    moved = pd.concat([moved, moved.iloc[[row]].assign(hhgq=3, votingage=0, count=1)], ignore_index=True)
    moved = moved[moved["count"] > 0]
    with pytest.raises(
        DataError,
        match=re.escape(
            f"equal_to 'pl94': the released product has 1 person in block "
            f"'{block}', cell hhgq=3, votingage=0 of 'hhgq * votingage', where "
            "every cell is a structural zero"
        ),
    ):
        _run(persons, structural_zeros=NURSE_NVA_0, equalities=[("pl94", ("hhgq", "votingage"), moved)])


def test_a_node_the_failsafe_cannot_save_names_its_level_and_parent_geounit(monkeypatch):
    from dpspec_topdown.estimation import node_solve
    from tests.test_topdown_dhc_solver import _run_forcing_one_node

    started = []  # the stream key (children's level, parent code) of each node, as it starts
    real = node_solve.solve_node

    def tracking(task, *args, **kw):
        started.append(task.noise.key)
        return real(task, *args, **kw)

    monkeypatch.setattr(node_solve, "solve_node", tracking)
    with pytest.raises(DataError) as info:
        _run_forcing_one_node(monkeypatch, fail_relaxed=True)
    level, parent = started[-1]  # one worker: the node that failed is the last one started
    above = ALL_LEVELS[ALL_LEVELS.index(level) - 1]
    assert str(info.value).startswith(f"TopDown cannot split the {above} {parent} into its {level} units: ")
    assert "no solution even with the children sums relaxed" in str(info.value)
