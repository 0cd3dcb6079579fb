"""An equality target (equal_to) against what the spec alone fixes, decided by `dpspec check`:
the product's columns must state the marginal's groups, and the marginal's groups must nest with
every invariant's (below the root). Whether the product's counts agree with the invariants'
totals needs the data and stays a DataError, now on every total both fix, also when two recodes
of one variable nest group by group (issue 24, "Bad input")."""

import numpy as np
import pytest

from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse
from dpspec_topdown.measurement.histogram import Recode, Schema, crossing_groups
from tests.test_topdown_equality import DECLARED, SPEC as EQUALITY

GOOD = EQUALITY.replace("PUBLIC", DECLARED).replace("TABLE", "pl94")


def _with_invariants(*queries):
    block = "invariants {\n" + "".join(f"  {q}\n" for q in queries) + "}\nunit persons : hamming"
    return GOOD.replace("unit persons : hamming", block)


def _line(text, start):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start))


def test_a_target_crossing_an_invariant_below_the_root_is_refused_at_its_query():
    text = _with_invariants("count persons by state", "count persons by county, sex")
    with pytest.raises(SpecError) as info:
        check(parse(text, "s.dps"))
    (d,) = info.value.diagnostics
    assert (d.line, d.column) == (
        _line(text, 'query: "hhgq"'),
        text.splitlines()[_line(text, 'query: "hhgq"') - 1].index('hhgq"') + 1,
    )
    assert d.message.startswith(
        f"equal_to: 'pl94_block': its groups cross those of the invariant 'count persons by "
        f"county, sex' (line {_line(text, 'count persons by county, sex')}): hhgq=0 of the "
        "target and sex=0 of the invariant share persons and neither holds the other"
    )


@pytest.mark.parametrize(
    "invariants",
    [
        ("count persons by state",),  # the total: every group within it
        ("count persons by block, hhgq",),  # the target's own groups
        ("count persons by sex",),  # at the root: one unit, never split
    ],
)
def test_invariants_that_nest_with_the_target_or_sit_at_the_root_check(invariants):
    check(parse(_with_invariants(*invariants), "s.dps"))


@pytest.mark.parametrize(
    "old, new, says",
    [
        ("    hhgq : {0, 1}\n  }\n}", "    hhgq : {0, 1, 2}\n  }\n}", "it has 2 besides"),
        ("    hhgq : {0, 1}\n  }\n}", "    hhgq : {1}\n  }\n}", "it lacks 0"),
    ],
)
def test_a_product_column_that_cannot_state_the_groups_is_refused_at_the_factor(old, new, says):
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(SpecError) as info:
        check(parse(text, "s.dps"))
    (d,) = info.value.diagnostics
    line = _line(text, 'query: "hhgq"')
    assert (d.line, d.column) == (line, text.splitlines()[line - 1].index('hhgq"') + 1)
    assert "must take exactly the categories of 'hhgq' (0, 1)" in d.message and says in d.message


def test_an_open_category_column_is_left_to_the_run():
    check(parse(GOOD.replace("    hhgq : {0, 1}\n  }\n}", "    hhgq : category\n  }\n}"), "s.dps"))


# --- crossing_groups, against the cells themselves -----------------------------------------------


def _cells_cross(schema, a, b) -> bool:
    """The definition on the histogram's cells: two groups sharing a cell, neither within the other."""
    ga, gb = schema.groups(a), schema.groups(b)
    for x, y in set(zip(ga.tolist(), gb.tolist())):
        in_a, in_b = ga == x, gb == y
        if (in_a & ~in_b).any() and (in_b & ~in_a).any():
            return True
    return False


def _random_recode(rng, name, variable, categories):
    groups = rng.integers(0, rng.integers(1, len(categories) + 1), len(categories))
    labels = sorted(set(groups.tolist()))
    return Recode.build(
        name, variable, categories, {f"g{g}": [c for c, h in zip(categories, groups) if h == g] for g in labels}
    )


def test_crossing_groups_agrees_with_the_cells_on_random_schemas():
    rng = np.random.default_rng(24)
    seen = {True: 0, False: 0}
    for _ in range(300):
        variables = {f"v{i}": list(range(int(rng.integers(2, 5)))) for i in range(int(rng.integers(1, 4)))}
        recodes = [_random_recode(rng, f"r{v}{j}", v, cats) for v, cats in variables.items() for j in range(2)]
        schema = Schema.from_variables(variables).with_recodes(recodes)
        factors = [*variables, *(r.name for r in recodes)]

        def query():
            chosen, used = [], set()
            for f in rng.permutation(factors):
                axis = schema._factor(str(f))[0]
                if axis not in used and rng.random() < 0.5:
                    chosen.append(str(f))
                    used.add(axis)
            return tuple(chosen)

        a, b = query(), query()
        got = crossing_groups(schema, a, b)
        assert (got is not None) == _cells_cross(schema, a, b), (a, b, got)
        seen[got is not None] += 1
    assert min(seen.values()) > 30  # both outcomes drawn often


def test_two_recodes_of_one_variable_that_nest_group_by_group_do_not_cross():
    """The units' h1 (occupied, vacant, gq) and gqhh_vect (housing units, each GQ type)."""
    tenure = ["owned", "rented", "vacant", "gq101", "gq301"]
    schema = Schema.from_variables({"tenvac": tenure}).with_recodes(
        [
            Recode.build(
                "h1",
                "tenvac",
                tenure,
                {"occupied": ["owned", "rented"], "vacant": ["vacant"], "gq": ["gq101", "gq301"]},
            ),
            Recode.build(
                "kind", "tenvac", tenure, {"hu": ["owned", "rented", "vacant"], "gq101": ["gq101"], "gq301": ["gq301"]}
            ),
        ]
    )
    assert crossing_groups(schema, ("h1",), ("kind",)) is None
    assert not _cells_cross(schema, ("h1",), ("kind",))


# --- the data side: every total both fix, also across two recodes of one variable ----------------

UNITS_H1 = """
  equal_to: {
    h1: {
      table: h1
      query: "h1"
    }
  }
"""


def test_a_product_disagreeing_with_an_invariant_across_two_recodes_is_a_data_error(tmp_path):
    """The units hold `count units by block, kind` (housing units, each GQ type) and equal the
    released H1 (occupied, vacant, gq): both fix each block's housing units and GQ units, a total
    that no factor of one is within the other's names."""
    from tests.test_topdown_recode_invariants import SPEC as UNITS, _units

    text = UNITS.replace(
        "      gq501: [gq501]\n    }\n  }\n",
        "      gq501: [gq501]\n    }\n"
        "    h1: {\n      of: tenvac\n      occupied: owned, rented\n      vacant: [vacant]\n"
        "      gq: gq101, gq301, gq501\n    }\n  }\n" + UNITS_H1,
    )
    text = text.replace(
        "    kind   : {housing_unit, gq101, gq301, gq501}\n  }\n}",
        "    kind   : {housing_unit, gq101, gq301, gq501}\n  }\n  table h1 unit housing_unit {\n"
        "    state  : category\n    county : category in state\n    block  : category in county\n"
        "    h1     : {occupied, vacant, gq}\n  }\n}",
    )
    text = text.replace('data units from "units.csv"', 'data units from "units.csv"\ndata h1 from "h1.csv"')
    text = text.replace(
        "unit units : hamming",
        'public {\n  count h1 by block, h1 released "the 2020 H1 table"\n}\nunit units : hamming',
    )
    units = _units()
    h1_of = {"owned": "occupied", "rented": "occupied", "vacant": "vacant"}
    h1 = units[["state", "county", "block"]].assign(h1=units["tenvac"].map(lambda t: h1_of.get(t, "gq")))
    check(parse(text, "u.dps"))  # the groups nest: it checks
    # one released GQ unit reported as vacant: its block's housing units are one more than the data's
    at = h1.index[h1["h1"] == "gq"][0]
    block = h1.loc[at, "block"]
    h1.loc[at, "h1"] = "vacant"
    folder = tmp_path / "in"
    folder.mkdir()
    units.to_csv(folder / "units.csv", index=False)
    h1.to_csv(folder / "h1.csv", index=False)
    path = folder / "u.dps"
    path.write_text(text)
    from dpspec.run.compiler import compile_spec

    with pytest.raises(DataError) as info:
        compile_spec(parse(text, str(path)), seed=1, audit=False)
    assert info.value.message.startswith(
        f"equal_to 'h1': the released product disagrees with the invariant 'kind' at "
        f"block '{block}' (cell kind='housing_unit'): released "
    )
