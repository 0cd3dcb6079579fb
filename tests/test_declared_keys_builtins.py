"""Each built-in mechanism outside TopDown and SafeTab says what its outputs are keyed by, so the
compiler's key check holds it to declared values: records are records, one-row outputs have no key."""

from __future__ import annotations

import dpspec
from dpspec.api import OutputKeys, check
from dpspec.language.parser import parse

ONE_SMOKER = """spec "one unit"
domain d {
  table people unit person {
    smoker : bool
  }
}
data people from "people.csv"
invariants {
  count people
}
unit people : hamming
premetric pure
mechanism randomized_response { table: people  column: smoker  p: 3/4 }
release {
  output responses
  output estimate
}
"""


def test_randomized_response_compiles_when_every_unit_reports_the_same_value(tmp_path):
    """One unit reports one value: the other is in no response, and that is no missing cell (the
    responses are records; before, the compiler read them as cells by smoker and stopped the run)."""
    (tmp_path / "people.csv").write_text("smoker\ntrue\n")
    (tmp_path / "s.dps").write_text(ONE_SMOKER)
    result = dpspec.compile(str(tmp_path / "s.dps"), seed=1)
    assert len(result.outputs["responses"]) == 1 and len(result.outputs["estimate"]) == 1


def test_randomized_response_declares_records_and_a_keyless_estimate():
    checked = check(parse(ONE_SMOKER, "s.dps"))
    keys = checked.mechanism.output_keys(checked.spec, checked.params)
    assert keys == {"responses": OutputKeys("people", records=True), "estimate": OutputKeys("people")}


def test_swap_declares_every_microdata_table_it_releases_as_records():
    from tests.test_swap_plugin import HOUSEHOLDS, INVARIANTS, PERSONS_INVARIANT, PERSONS_TABLE

    text = HOUSEHOLDS.format(
        persons_table=PERSONS_TABLE,
        persons_data='data persons from "persons.csv"',
        invariants="\n".join(INVARIANTS + [PERSONS_INVARIANT]),
        match="state, size",
        swap="county",
        rate="0.5",
    )
    checked = check(parse(text, "h.dps"))
    keys = checked.mechanism.output_keys(checked.spec, checked.params)
    assert keys == {
        "households": OutputKeys("households", records=True),
        "persons": OutputKeys("persons", records=True),
    }
