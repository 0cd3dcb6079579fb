"""TopDown's invariants must nest (each query's variables within the next one's): `dpspec check`
decides it from the spec and reports it at the offending invariant's line, and the engine keeps
the same rule as a backstop for callers that skip the check (issue 24, "Bad input")."""

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpspec.check.checker import check
from dpspec.errors import SpecError
from tests.topdown_geography import parse
from dpspec.language.parser import parse as parse_bundled
from dpspec_topdown.estimation.invariant_chain import unnested
from tests.test_topdown_located_data_errors import SPEC as LOCATED

ROOT = Path(__file__).resolve().parents[1]
# the located-errors spec without its equality target, whose own rule (equality_check.py) would
# also refuse a target crossing an invariant
SPEC = LOCATED.replace(
    """  equal_to: {
    pl94_block: {
      table: pl94
      query: "hhgq"
    }
  }
""",
    "",
)


def _with(*invariants) -> str:
    body = "".join(f"  {q}\n" for q in invariants)
    text = SPEC.replace("  count persons by state\n  count persons by block, hhgq\n", body)
    assert text != SPEC or invariants == ("count persons by state", "count persons by block, hhgq")
    return text


def _line(text, start) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == start)


def _refused(text) -> list:
    with pytest.raises(SpecError) as info:
        check(parse(text, "s.dps"))
    return [d for d in info.value.diagnostics if "does not nest" in d.message]


def test_invariants_that_do_not_nest_are_refused_at_the_later_ones_line():
    text = _with("count persons by state", "count persons by block, hhgq", "count persons by county, votingage")
    (d,) = _refused(text)
    assert (d.line, d.column) == (_line(text, "count persons by county, votingage"), 3)
    assert d.message == (
        "invariants: 'count persons by county, votingage' does not nest with 'count persons by block, hhgq' "
        f"(line {_line(text, 'count persons by block, hhgq')}): TopDown needs the invariant queries to form a "
        "chain (each one's variables within the next one's), or a parent's histogram may admit no split among "
        "its children; declare their join ('hhgq * votingage') instead"
    )


def test_the_error_is_a_located_diagnostic_of_the_check_command(tmp_path):
    from click.testing import CliRunner

    from dpspec.cli.main import main

    text = _with("count persons by block, votingage", "count persons by block, hhgq")
    path = tmp_path / "s.dps"
    path.write_text(text)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    line = _line(text, "count persons by block, hhgq")
    assert f"s.dps:{line}:3: error: invariants: 'count persons by block, hhgq' does not nest" in result.output


@pytest.mark.parametrize(
    "invariants",
    [
        ("count persons by state", "count persons by block, hhgq"),  # the total, then a query: a chain
        ("count persons by block, hhgq", "count persons by county, hhgq"),  # one query at two levels
        ("count persons by state, hhgq", "count persons by block, hhgq, votingage", "count persons by state"),
    ],
)
def test_invariants_that_form_a_chain_check(invariants):
    check(parse(_with(*invariants), "s.dps"))


def test_a_joint_tables_invariants_must_nest_too():
    from tests.conftest import edited_spec
    from tests.test_topdown_dhc_solver import JOINT_SPEC

    invariants = (
        "invariants {\n  count households by state\n  count units by block, vacs\n  count units by county, kind\n}\n\n"
    )
    spec = edited_spec(
        JOINT_SPEC,
        "joint.dps",
        {
            "    vacs   : {0, 1, 2}\n": "    vacs   : {0, 1, 2}\n    kind   : {0, 1}\n",
            "      variables: vacs\n": "      variables: vacs, kind\n",
            "unit households : hamming": invariants + "unit households : hamming",
        },
    )
    with pytest.raises(SpecError) as info:
        check(spec)
    (d,) = [d for d in info.value.diagnostics if "does not nest" in d.message]
    assert d.message.startswith(
        "invariants: 'count units by county, kind' does not nest with 'count units by block, vacs'"
    )
    assert d.line == _line(spec.text, "count units by county, kind")


def test_the_engine_keeps_the_rule_as_a_backstop_naming_the_same_pair():
    import pandas as pd

    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import RunContext

    persons = pd.DataFrame(
        {
            "state": "01",
            "county": ["a", "a", "b"],
            "block": ["a1", "a2", "b1"],
            "hhgq": [0, 1, 0],
            "votingage": [1, 0, 1],
        }
    )
    strategy = {lv: [((), 1)] for lv in ("state", "county", "block")}
    with pytest.raises(SpecError, match="invariants 'hhgq' and 'votingage' are not nested") as info:
        run_topdown(
            persons,
            Design(
                ["state", "county", "block"],
                {"hhgq": [0, 1], "votingage": [0, 1]},
                strategy,
                1,
                {lv: Fraction(1, 3) for lv in ("state", "county", "block")},
                "symdiff",
                [("state", ()), ("block", ("hhgq",)), ("county", ("votingage",))],
            ),
            RunContext(np.random.default_rng(0)),
        )
    assert info.value.diagnostics[0].line is None  # unlocated: the spec is not at hand there


def test_unnested_agrees_with_the_chain_rule_on_every_small_family():
    factors = ("a", "b", "c")
    subsets = [tuple(s) for r in range(4) for s in itertools.combinations(factors, r)]
    for n in (1, 2, 3):
        for family in itertools.permutations(subsets, n):
            chain = all(set(x) <= set(y) or set(y) <= set(x) for x, y in itertools.combinations(family, 2))
            pair = unnested(family)
            assert (pair is None) == chain
            if pair is not None:
                i, j = pair
                x, y = set(family[i]), set(family[j])
                assert i < j and not (x <= y or y <= x)
                # the first such query in order: every query before j nests with all before it
                assert unnested(family[:j]) is None


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (ROOT / "specs").glob("*.dps") if "topdown" in p.name or p.name.startswith("sdhc"))
)
def test_the_bundled_topdown_specs_check_clean(name):
    path = ROOT / "specs" / name
    check(parse_bundled(path.read_text(), str(path)))  # bundled specs declare their geography: parsed as written
