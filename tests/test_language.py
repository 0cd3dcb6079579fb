"""The .dps language: every construct parses into the IR, and malformed specs give exact errors."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from dpspec import ir
from dpspec.check.checker import check
from dpspec.errors import SpecError
from dpspec.language.parser import parse
from tests.conftest import SMALL_SPEC

EVERYTHING = """
spec "every construct"  # a comment
// another comment
domain d "described" {
  stage edited
  geography g { state > county }
  table households unit household {
    hhid   : category
    state  : category
    county : category in state
    size   : int 1..20
    tenure : {owned, rented, "N/A", 3}
    flag   : bool nullable
  }
  table persons unit person in households by hhid {
    hhid : category
    age  : int -1..120
  }
}
data households from "h.parquet"
data persons from "p.csv"
invariants {
  count households by state, size, tenure
  count households by size at county
}
public {
  count persons by hhid released "an earlier release"
}
unit households : hamming holds at most 20 persons
premetric approximate delta 1e-10 on events "county totals"
mechanism m {
  rate: 0.05
  rho: (542/339)^2
  shares: { nation: 104/4099  state: 1440/4099 }
  queries: { total: 1/2  votingage * hispanic: 1/2 }
  cols: state, size
  one: [state]
  text: "hello"
  neg: -2.5e3
}
budget epsilon <= 16 with delta = 1e-10 under symdiff by bs16
budget rho < 2.63
release {
  microdata households
  count households by county, tenure
  output noisy
}
tuned on confidential "rate picked after looking at the data"
"""


def test_every_construct_parses():
    spec = parse(EVERYTHING, "every.dps")
    assert spec.title == "every construct"
    d = spec.domain
    assert (d.name, d.description, d.stage) == ("d", "described", "edited")
    assert d.geography.levels == ("state", "county")
    h, p = d.tables
    assert h.column("county").type == ir.ColumnType("category", parent="state")
    assert h.column("size").type == ir.ColumnType("int", low=1, high=20)
    assert h.column("tenure").type.values == ("owned", "rented", "N/A", "3")
    assert h.column("flag").nullable and h.column("flag").type.kind == "bool"
    assert (p.parent, p.link) == ("households", "hhid")
    assert p.column("age").type.low == -1
    assert [s.format for s in spec.data] == ["parquet", "csv"]
    assert spec.invariants[1].columns == ("county", "size")
    assert spec.public[0].source == "an earlier release"
    assert spec.unit == ir.Unit("households", "hamming", ir.UnitBound(20, "persons"))
    assert spec.premetric.option("delta") == Fraction(1, 10**10)
    assert spec.premetric.events == "county totals"
    params = spec.mechanism.params
    assert params.get("rate").value == Fraction(1, 20)
    assert params.get("rho").value == Fraction(542, 339) ** 2
    assert params.get("shares").value.get("state").value == Fraction(1440, 4099)
    assert params.get("queries").value.get("votingage*hispanic").value == Fraction(1, 2)
    assert params.get("cols").value == (ir.Name("state"), ir.Name("size"))
    assert params.get("one").value == (ir.Name("state"),)
    assert params.get("text").value == "hello"
    assert params.get("neg").value == Fraction(-2500)
    b1, b2 = spec.budgets
    assert (b1.quantity, b1.op, b1.value, b1.relation, b1.method) == ("epsilon", "<=", 16, "symdiff", "bs16")
    assert b1.with_ == (("delta", Fraction(1, 10**10)),)
    assert (b2.quantity, b2.op) == ("rho", "<")
    assert [r.kind for r in spec.releases] == ["microdata", "count", "output"]
    assert spec.tuning.source == "confidential"


def test_program_parses():
    spec = parse(
        'program "p" { include "a.dps" parallel "states" { include "b.dps" include "c.dps" } }\nbudget rho <= 3'
    )
    assert spec.program.parts[0] == ir.ProgramPart(("a.dps",))
    assert spec.program.parts[1] == ir.ProgramPart(("b.dps", "c.dps"), parallel=True, label="states")


def test_ir_serializes_to_json():
    data = ir.to_jsonable(parse(EVERYTHING))
    text = json.dumps(data)
    assert json.loads(text)["mechanism"]["params"]["shares"]["nation"] == "104/4099"
    assert data["premetric"]["options"] == [["delta", 1e-10]]
    assert data["data"][0]["path"] == "h.parquet"


def test_one_json_converter_whose_options_are_where_its_callers_differ():
    import numpy as np

    from dpspec.audit.base import jsonable

    values = {
        "third": Fraction(1, 3),
        "half": Fraction(1, 2),
        "two": Fraction(2),
        "inf": float("inf"),
        "nan": float("nan"),
        "set": {"b", "a"},
        "n": np.int64(3),
        "name": ir.Name("x"),
    }
    ir_form = ir.to_jsonable(values)  # IR data: anything not IR passes through as it is
    assert (ir_form["third"], ir_form["half"], ir_form["two"], ir_form["inf"], ir_form["set"]) == (
        "1/3",
        0.5,
        2,
        float("inf"),
        {"a", "b"},
    )
    assert type(ir_form["n"]) is np.int64 and ir_form["name"] == "x"
    evidence = jsonable(values)  # audit evidence: any value coerced, NaN as null
    assert evidence == {
        "third": "1/3",
        "half": 0.5,
        "two": 2,
        "inf": "inf",
        "nan": None,
        "set": ["a", "b"],
        "n": 3,
        "name": "x",
    }
    budget = ir.to_jsonable(values, fractions="float", coerce=True)  # a statement's facts: nearest floats, NaN kept
    assert (budget["third"], budget["inf"], budget["n"]) == (1 / 3, "inf", 3) and budget["nan"] != budget["nan"]
    assert jsonable(Fraction(-3, 4)) == -0.75 and jsonable(float("-inf")) == "-inf"


def test_keywords_can_be_column_names():
    spec = parse("domain d { table t unit u { count : int 0..9  unit : category  stage : bool } }")
    assert spec.domain.tables[0].column_names == ("count", "unit", "stage")


def _error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        check(parse(text, "bad.dps"))
    return str(info.value)


def _replace(old: str, new: str) -> str:
    assert old in SMALL_SPEC, old
    return SMALL_SPEC.replace(old, new, 1)


# Each case: a malformed spec and the exact first line of its message.
MALFORMED = [
    (
        "syntax: missing brace",
        _replace("premetric pure", "premetric pure {"),
        "bad.dps:18:16: error: unexpected '{'; expected 'budget', 'data', 'domain', 'invariants', 'mechanism', 'notes', 'on'",
    ),
    (
        "syntax: bad relation",
        _replace("people : hamming", "people : hammming"),
        "bad.dps:17:15: error: unexpected 'hammming'; expected a neighbor relation (hamming or symdiff)",
    ),
    (
        "syntax: bad character",
        _replace("premetric pure", "premetric pure $"),
        "bad.dps:18:16: error: unexpected character '$'",
    ),
    (
        "unknown table in unit",
        _replace("unit people", "unit peple"),
        "bad.dps:17:6: error: unknown table 'peple'; did you mean 'people'?",
    ),
    (
        "unknown column in invariant",
        _replace("count people\n", "count people by regoin\n"),
        "bad.dps:15:3: error: unknown column 'regoin' in table 'people'; did you mean 'region'?",
    ),
    (
        "unknown mechanism",
        _replace("mechanism randomized_response", "mechanism randomised_response"),
        "bad.dps:19:1: error: unknown mechanism 'randomised_response'; did you mean 'randomized_response'?",
    ),
    (
        "bad parameter value",
        _replace("p: 3/4", "p: 5/4"),
        "bad.dps:19:64: error: parameter 'p': 1.25 is outside the allowed range [0, 1]",
    ),
    (
        "unknown parameter",
        _replace("p: 3/4", "p: 3/4  prob: 1"),
        "bad.dps:19:72: error: unknown parameter 'prob' in mechanism 'randomized_response' (known: column, p, positive, table)",
    ),
    (
        "parameter type",
        _replace("p: 3/4", 'p: "high"'),
        "bad.dps:19:64: error: parameter 'p': expected a number, got a string",
    ),
    (
        "empty range",
        _replace("int 0..120", "int 120..0"),
        "bad.dps:8:5: error: column 'age': the range 120..0 is empty",
    ),
    (
        "missing delta",
        _replace("premetric pure", "premetric approximate"),
        "bad.dps:18:1: error: premetric approximate needs a delta (premetric approximate delta 1e-10)",
    ),
    (
        "delta out of range",
        _replace("premetric pure", "premetric approximate delta 2"),
        "bad.dps:18:1: error: delta must be between 0 and 1 exclusive, got 2",
    ),
    (
        "non-binary column",
        _replace("column: smoker", "column: age"),
        "bad.dps:19:1: error: column 'age' must be binary (bool, or a set of exactly two values) for randomized response",
    ),
    (
        "undeclared invariant",
        _replace("  count people\n", ""),
        "bad.dps:18:1: error: mechanism 'randomized_response' keeps 'count people' exact, but the invariants do not declare it",
    ),
    (
        "unknown geography level",
        _replace("count people\n", "count people at county\n"),
        "bad.dps:15:3: error: unknown geography level 'county' (known: district, region)",
    ),
    ("division by zero", _replace("p: 3/4", "p: 3/0"), "bad.dps:19:67: error: division by zero"),
    (
        "duplicate section",
        SMALL_SPEC + "unit people : symdiff\n",
        "bad.dps:25:1: error: a second unit section; a spec has exactly one",
    ),
    (
        "unknown output",
        _replace("output estimate", "output estimates"),
        "bad.dps:23:3: error: unknown output 'estimates' in mechanism 'randomized_response'; did you mean 'estimate'?",
    ),
]


@pytest.mark.parametrize("name,text,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_error_messages(name, text, expected):
    message = _error(text)
    assert message.splitlines()[0].startswith(expected), message


def test_error_has_caret_excerpt():
    message = _error(_replace("unit people", "unit peple"))
    lines = message.splitlines()
    assert lines[1] == "    unit peple : hamming"
    assert lines[2] == "         ^"


def test_all_errors_in_one_run():
    text = (
        _replace("unit people", "unit peple")
        .replace("count people\n", "count people by regoin\n")
        .replace("p: 3/4", "p: 7")
    )
    message = _error(text)
    assert message.count("error:") == 3, message


def test_valid_spec_checks():
    checked = check(parse(SMALL_SPEC))
    assert checked.mechanism.name == "randomized_response"
    assert checked.params["p"] == Fraction(3, 4)
    assert [q.describe() for q in checked.induced] == ["count people"]


def test_syntax_errors_in_several_sections_are_all_reported():
    text = 'spec "x"\ndomain d { table t unit u { a : int 0..x } }\nunit t : hammming\npremetric pure $\nmechanism m { a: 1 }\nbudget epsilon <=\n'
    with pytest.raises(SpecError) as info:
        parse(text, "bad.dps")
    heads = [line for line in str(info.value).splitlines() if ": error: " in line]
    assert [h.split(": error: ")[0] for h in heads] == ["bad.dps:2:40", "bad.dps:3:10", "bad.dps:4:16", "bad.dps:6:16"]
