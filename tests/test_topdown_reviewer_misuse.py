"""A census reviewer's misuses of the bundled DHC production specs (Puerto Rico): each is a
SpecError at the line of the setting, with a message naming what is wrong, found by `dpspec
check` rather than when the run starts."""
from pathlib import Path

import pytest

from dpspec.check.checker import check
from dpspec.errors import SpecError
from dpspec.language.parser import parse

SPECS = Path(__file__).resolve().parent.parent / "specs"
PERSONS = (SPECS / "dhc_persons_production_topdown_pr.dps").read_text()
HOUSEHOLDS = (SPECS / "dhc_households_production_topdown_pr.dps").read_text()
JOINT_OUTER = "  outer_passes: {  # dhch_strategies.py:1741-1765, the same at every level (1763-1764)\n    state: {"


def _error(text, old, new):
    assert old in text, old
    text = text.replace(old, new, 1)
    with pytest.raises(SpecError) as info:
        check(parse(text, "r.dps"))
    return text, info.value.diagnostics[0]


def _line(text, start):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start))


def test_a_failsafe_beside_a_joint_table_is_refused_at_its_line():
    text, d = _error(HOUSEHOLDS, "  cross_constraints: {", "  failsafe: { minimal_schema: [tenvacgq] }\n  cross_constraints: {")
    assert d.line == _line(text, "failsafe:")
    assert d.message.startswith("failsafe: not available with a joint table")


def test_postprocess_only_beside_a_joint_table_says_so_not_that_the_name_is_undeclared():
    text, d = _error(HOUSEHOLDS, "  cross_constraints: {",
                     "  postprocess_only: owned_mortgage\n  postprocess_heuristics: true\n  cross_constraints: {")
    assert d.line == _line(text, "postprocess_only:")
    assert "not available with joint tables" in d.message and "declared" not in d.message


def test_outer_passes_at_a_level_without_budget_are_refused_at_the_level():
    text, d = _error(HOUSEHOLDS, JOINT_OUTER, "  outer_passes: {\n    nation: {")
    assert d.line == _line(text, "nation: {")
    assert d.message.startswith("outer_passes name level 'nation', which has no budget share")


def test_require_feasible_at_a_level_without_budget_is_refused():
    # Puerto Rico's root (nation) has no share: no node is solved there, the flag would do nothing
    text, d = _error(PERSONS, "postprocess_require_feasible: state, county", "postprocess_require_feasible: nation, county")
    assert d.line == _line(text, "postprocess_require_feasible:")
    assert "'nation', which has no budget share" in d.message


@pytest.mark.parametrize("which, old, new, start, message", [
    ("p", "postprocess_only: hhgq_total_ub, hhgq_total_lb", "postprocess_only: hhgq_total_ub, hhgq_bogus",
     "postprocess_only:", "'hhgq_bogus', which is not a declared constraint"),
    ("p", "  postprocess_only: hhgq_total_ub, hhgq_total_lb\n", "", "postprocess_heuristics:", "go together"),
    ("p", "gq997: [41]\n", "", "gqlevels: {", "does not partition 'relgq': categories ['41'] are in no group"),
    ("h", "          couple: [1, 2]\n", "          couple: [1, 9]\n", "couple: [1, 9]", "couple = [9] are not categories"),
    ("h", "          rented: [2]\n", "", "hhtenshort_2lev: {", "does not partition 'ten'"),
    ("h", 'right: "households: ten = 0"', 'right: "persons: ten = 0"', 'right: "persons',
     "table 'persons', which is not solved jointly"),
    ("h", '        estimation: ["detailed"]\n', '        estimation: { pass1: ["detailed"]  pass2: ["detailed"] }\n',
     "state: {", "one estimation pass and one rounding pass"),
])
def test_the_guides_misuses_are_located(which, old, new, start, message):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert message in d.message
    lines = [i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start)]
    assert d.line in lines, (d.line, lines)


def test_a_spine_flag_no_table_has_is_the_spines_error_not_the_joint_tables():
    text, d = _error(HOUSEHOLDS, "    aian: aian\n", "    aian: aianx\n")
    assert d.line == _line(text, "aian: aianx")
    assert d.message == "spine: aian names 'aianx', which is not a column of table 'units'"


def test_shares_that_do_not_sum_to_one_are_refused_at_their_block_naming_joint_queries_as_written():
    text, d = _error(HOUSEHOLDS, "detailed: 3364/17813", "detailed: 33640/17813")
    assert d.line == _line(text, "queries: {") + 1  # the state's entry of the queries block
    assert d.message.startswith("query shares at level 'state': shares must sum to exactly 1")
    assert "households: hisp * hhtenshort_2lev=202/17813" in d.message and "@" not in d.message
    text, d = _error(PERSONS, "    state: 6571/24811", "    state: 1/2")
    assert d.line == _line(text, "levels: {") and d.message.startswith("level budget shares: shares must sum")


@pytest.mark.parametrize("which, old, new, start", [
    ("h", "      detailed: 3364/17813", "      bogus: 3364/17813", "bogus:"),  # was reported at the mechanism line
    ("h", "          hisp * hhtenshort_2lev: 202/17813", "          hisp * hhtenshrt: 202/17813", "hisp * hhtenshrt:"),
    ("p", "      age_18_64_116 * relgq_4_groups: 1009/13142", "      age_18_64_116 * bogus: 1009/13142", "age_18_64_116 * bogus:"),
])
def test_an_unknown_query_is_refused_at_its_own_line(which, old, new, start):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert d.line == _line(text, start) and "which are not histogram variables or recodes" in d.message


@pytest.mark.parametrize("which, old, new, start", [
    ("h", 'rounding: ["households: detailed"]', 'rounding: ["households: bogus"]', 'rounding: ["households: bogus"]'),
    ("p", 'pass1: ["age_18_64_116 * relgq_4_groups", ', 'pass1: ["age_18_64_116 * bogus", ', 'pass1: ["age_18_64_116 * bogus"'),
])
def test_an_unknown_query_in_a_pass_is_refused_at_the_pass_that_writes_it(which, old, new, start):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert d.line == _line(text, start) and "which are not histogram variables or recodes" in d.message


@pytest.mark.parametrize("setting", ["failsafe: 3", "joint: 3", "cross_constraints: 3"])
def test_a_malformed_setting_is_refused_at_its_line_not_the_mechanisms(setting):
    text, d = _error(PERSONS.replace("  failsafe: {\n    minimal_schema: [relgq]\n  }\n", ""),
                     "  pass_tolerance: 0.1\n", f"  pass_tolerance: 0.1\n  {setting}\n")
    assert d.line == _line(text, setting) and d.message.startswith(setting.split(":")[0] + ": expected")


def _at(text, line_start, fragment):
    """(line, column) of `fragment` on the first line starting with `line_start` (1-based)."""
    line = _line(text, line_start)
    return line, text.splitlines()[line - 1].index(fragment) + 1


@pytest.mark.parametrize("old, new, line_start, fragment, message", [
    # a joint table's unknown variable: at the name in its variables list (was the joint entry's line)
    ("variables: sex, hhage, hisp", "variables: sex, hhagex, hisp", "variables: sex, hhagex", "hhagex",
     "'hhagex' must be a column of 'households'"),
    ("      table: households\n", "      table: housholds\n", "table: housholds", "housholds",
     "names table 'housholds', which must be a further table"),
    # the sides of a cross constraint: at the table, the query or the label inside the side's string
    ('right: "households: ten = 0"', 'right: "persons: ten = 0"', 'right: "persons', "persons",
     "right side names table 'persons', which is not solved jointly"),
    ('left: "units: hhtenshort_3lev = mortgage"', 'left: "units: hhtenshort_3levx = mortgage"', 'left: "units',
     "hhtenshort_3levx", "query 'hhtenshort_3levx' names ['hhtenshort_3levx'], which are not"),
    ('right: "households: ten = 0"', 'right: "households: ten = 7"', 'right: "households', "7",
     "'7' is not a group of 'ten'"),
    ('left: "units: hhtenshort_3lev = mortgage"', 'left: "units: hhtenshort_3lev = owned_twice"', 'left: "units',
     "owned_twice", "'owned_twice' is not a group of 'hhtenshort_3lev'"),
    ('right: "households: ten = 0"', 'right: "households: ten * size = 0"', 'right: "households', "ten * size",
     "'= LABEL' picks a group of a query of one variable or recode, not of 'ten * size'"),
    ('right: "households: ten = 0"', 'right: "households ten = 0"', 'right: "households', "right",
     "right side 'households ten = 0' must read"),
])
def test_a_joint_tables_and_a_cross_constraints_errors_are_at_their_exact_line_and_column(
        old, new, line_start, fragment, message):
    text, d = _error(HOUSEHOLDS, old, new)
    assert message in d.message
    assert (d.line, d.column) == _at(text, line_start, fragment)
