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
    text, d = _error(
        HOUSEHOLDS, "  cross_constraints: {", "  failsafe: { minimal_schema: [tenvacgq] }\n  cross_constraints: {"
    )
    assert d.line == _line(text, "failsafe:")
    assert d.message.startswith("failsafe: not available with a joint table")


def test_postprocess_only_beside_a_joint_table_says_so_not_that_the_name_is_undeclared():
    text, d = _error(
        HOUSEHOLDS,
        "  cross_constraints: {",
        "  postprocess_only: owned_mortgage\n  postprocess_heuristics: true\n  cross_constraints: {",
    )
    assert d.line == _line(text, "postprocess_only:")
    assert "not available with joint tables" in d.message and "declared" not in d.message


def test_outer_passes_at_a_level_without_budget_are_refused_at_the_level():
    text, d = _error(HOUSEHOLDS, JOINT_OUTER, "  outer_passes: {\n    nation: {")
    assert d.line == _line(text, "nation: {")
    assert d.message.startswith("outer_passes name level 'nation', which has no budget share")


def test_require_feasible_at_a_level_without_budget_is_refused():
    # Puerto Rico's root (nation) has no share: no node is solved there, the flag would do nothing
    text, d = _error(
        PERSONS, "postprocess_require_feasible: state, county", "postprocess_require_feasible: nation, county"
    )
    assert d.line == _line(text, "postprocess_require_feasible:")
    assert "'nation', which has no budget share" in d.message


@pytest.mark.parametrize(
    "which, old, new, start, message",
    [
        (
            "p",
            "postprocess_only: hhgq_total_ub, hhgq_total_lb",
            "postprocess_only: hhgq_total_ub, hhgq_bogus",
            "postprocess_only:",
            "'hhgq_bogus', which is not a declared constraint",
        ),
        ("p", "  postprocess_only: hhgq_total_ub, hhgq_total_lb\n", "", "postprocess_heuristics:", "go together"),
        ("p", "gq997: [41]\n", "", "gqlevels: {", "does not partition 'relgq': categories ['41'] are in no group"),
        (
            "h",
            "          hhtype: [393]\n",
            "          hhtype: [393, 522]\n",
            "hhtype: [393, 522]",
            "hhtype = [522] are not categories of 'hhtype' (0..521)",
        ),
        ("h", "          rented: [2]\n", "", "hhtenshort_2lev: {", "does not partition 'ten'"),
        (
            "h",
            'right: "households: ten = 0"',
            'right: "persons: ten = 0"',
            'right: "persons',
            "table 'persons', which is not solved jointly",
        ),
        (
            "h",
            '        estimation: ["detailed"]\n',
            '        estimation: { pass1: ["detailed"]  pass2: ["detailed"] }\n',
            "state: {",
            "one estimation pass and one rounding pass",
        ),
    ],
)
def test_the_guides_misuses_are_located(which, old, new, start, message):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert message in d.message
    lines = [i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start)]
    assert d.line in lines, (d.line, lines)


def test_a_spine_flag_no_table_has_is_the_spines_error_not_the_joint_tables():
    text, d = _error(HOUSEHOLDS, "    aian: aian\n", "    aian: aianx\n")
    assert d.line == _line(text, "aian: aianx")
    assert d.message == "parameter 'spine.aian': unknown column 'aianx' in table 'units'"


def test_shares_that_do_not_sum_to_one_are_refused_at_their_block_naming_joint_queries_as_written():
    text, d = _error(HOUSEHOLDS, "detailed: 3364/17813", "detailed: 33640/17813")
    assert d.line == _line(text, "queries: {") + 1  # the state's entry of the queries block
    assert d.message.startswith("query shares at level 'state': shares must sum to exactly 1")
    assert "households: hisp * hhtenshort_2lev=202/17813" in d.message and "@" not in d.message
    text, d = _error(PERSONS, "    state: 6571/24811", "    state: 1/2")
    assert d.line == _line(text, "levels: {") and d.message.startswith("level budget shares: shares must sum")


@pytest.mark.parametrize(
    "which, old, new, start",
    [
        ("h", "      detailed: 3364/17813", "      bogus: 3364/17813", "bogus:"),  # was reported at the mechanism line
        (
            "h",
            "          hisp * hhtenshort_2lev: 202/17813",
            "          hisp * hhtenshrt: 202/17813",
            "hisp * hhtenshrt:",
        ),
        (
            "p",
            "      age_18_64_116 * relgq_4_groups: 1009/13142",
            "      age_18_64_116 * bogus: 1009/13142",
            "age_18_64_116 * bogus:",
        ),
    ],
)
def test_an_unknown_query_is_refused_at_its_own_line(which, old, new, start):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert d.line == _line(text, start) and "which are not histogram variables or recodes" in d.message


@pytest.mark.parametrize(
    "which, old, new, start",
    [
        (
            "h",
            'rounding: ["households: detailed"]',
            'rounding: ["households: bogus"]',
            'rounding: ["households: bogus"]',
        ),
        (
            "p",
            'pass1: ["age_18_64_116 * relgq_4_groups", ',
            'pass1: ["age_18_64_116 * bogus", ',
            'pass1: ["age_18_64_116 * bogus"',
        ),
    ],
)
def test_an_unknown_query_in_a_pass_is_refused_at_the_pass_that_writes_it(which, old, new, start):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert d.line == _line(text, start) and "which are not histogram variables or recodes" in d.message


@pytest.mark.parametrize("setting", ["failsafe: 3", "joint: 3", "cross_constraints: 3"])
def test_a_malformed_setting_is_refused_at_its_line_not_the_mechanisms(setting):
    text, d = _error(
        PERSONS.replace("  failsafe: {\n    minimal_schema: [relgq]\n  }\n", ""),
        "  pass_tolerance: 0.1\n",
        f"  pass_tolerance: 0.1\n  {setting}\n",
    )
    name = setting.split(":")[0]  # a typed setting is refused in the core's words ("parameter 'failsafe': expected")
    assert d.line == _line(text, setting) and d.message.startswith(
        (f"{name}: expected", f"parameter '{name}': expected")
    )


def _at(text, line_start, fragment):
    """(line, column) of `fragment` on the first line starting with `line_start` (1-based)."""
    line = _line(text, line_start)
    return line, text.splitlines()[line - 1].index(fragment) + 1


@pytest.mark.parametrize(
    "old, new, line_start, fragment, message",
    [
        # a joint table's unknown variable: at the name in its variables list (was the joint entry's line)
        (
            "variables: sex, hhage, hisp",
            "variables: sex, hhagex, hisp",
            "variables: sex, hhagex",
            "hhagex",
            "'hhagex' must be a column of 'households'",
        ),
        (
            "      table: households\n",
            "      table: housholds\n",
            "table: housholds",
            "housholds",
            "names table 'housholds', which must be a further table",
        ),
        # the sides of a cross constraint: at the table, the query or the label inside the side's string
        (
            'right: "households: ten = 0"',
            'right: "persons: ten = 0"',
            'right: "persons',
            "persons",
            "right side names table 'persons', which is not solved jointly",
        ),
        (
            'left: "units: hhtenshort_3lev = mortgage"',
            'left: "units: hhtenshort_3levx = mortgage"',
            'left: "units',
            "hhtenshort_3levx",
            "query 'hhtenshort_3levx' names ['hhtenshort_3levx'], which are not",
        ),
        (
            'right: "households: ten = 0"',
            'right: "households: ten = 7"',
            'right: "households',
            "7",
            "'7' is not a group of 'ten'",
        ),
        (
            'left: "units: hhtenshort_3lev = mortgage"',
            'left: "units: hhtenshort_3lev = owned_twice"',
            'left: "units',
            "owned_twice",
            "'owned_twice' is not a group of 'hhtenshort_3lev'",
        ),
        (
            'right: "households: ten = 0"',
            'right: "households: ten * hhtype = 0"',
            'right: "households',
            "ten * hhtype",
            "'= LABEL' picks a group of a query of one variable or recode, not of 'ten * hhtype'",
        ),
        (
            'right: "households: ten = 0"',
            'right: "households ten = 0"',
            'right: "households',
            "right",
            "right side 'households ten = 0' must read",
        ),
        # a table tied to itself: at the right side's table; sides of different sizes: at the right side's query
        (
            'right: "households: ten = 0"',
            'right: "units: hhtenshort_3lev = owned"',
            'right: "units',
            "units",
            "ties table 'units' to itself",
        ),
        (
            'right: "households: ten = 0"',
            'right: "households: ten"',
            'right: "households: ten"',
            "ten",
            "the left side has 1 groups and the right side 3",
        ),
    ],
)
def test_a_joint_tables_and_a_cross_constraints_errors_are_at_their_exact_line_and_column(
    old, new, line_start, fragment, message
):
    text, d = _error(HOUSEHOLDS, old, new)
    assert message in d.message
    assert (d.line, d.column) == _at(text, line_start, fragment)


# A reviewer's misuses of every DHC construct: each a SpecError at the exact line, and at the
# item it names when it names one (column of `fragment` on the line starting with `line_start`).
@pytest.mark.parametrize(
    "which, old, new, line_start, fragment, message",
    [
        # postprocess_only, postprocess_heuristics, postprocess_require_feasible
        (
            "p",
            "postprocess_only: hhgq_total_ub, hhgq_total_lb",
            "postprocess_only: hhgq_total_ub, hhgq_total_ub",
            "postprocess_only:",
            "hhgq_total_ub\n",
            "names the constraint 'hhgq_total_ub' twice",
        ),
        (
            "p",
            "postprocess_require_feasible: state, county",
            "postprocess_require_feasible: state, countx",
            "postprocess_require_feasible:",
            "countx",
            "'countx' is not a geography level",
        ),
        (
            "p",
            "postprocess_require_feasible: state, county, prim, tsg, tsubset",
            "postprocess_require_feasible: 3",
            "postprocess_require_feasible:",
            "3",
            "expected a geography level, got a number",
        ),  # at the value itself
        (
            "p",
            "postprocess_heuristics: true",
            "postprocess_heuristics: false",
            "postprocess_heuristics:",
            "postprocess_heuristics",
            "postprocess_only and postprocess_heuristics: true go together",
        ),
        # sense (and occupied, which only a lower bound reads)
        (
            "p",
            "      sense: upper\n",
            "      sense: above\n",
            "sense: above",
            "sense",
            "unknown value 'above' (known: both, lower, upper)",
        ),
        (
            "p",
            "      sense: lower\n",
            "      sense: upper\n",
            "occupied: gq101",
            "occupied",
            "occupied sets the lower bounds, which sense: upper leaves out",
        ),
        (
            "p",
            "      sense: upper\n",
            "      sense: lower  # was upper\n",
            "sense: lower  # was",
            "sense",
            "'hhgq_total_ub': sense: lower keeps only the lower bounds",
        ),
        (
            "p",
            "      sense: upper\n",
            "      sense: upper\n      sense: lower  # again\n",
            "sense: lower  # again",
            "sense",
            "'sense' is given twice in one block (first at line",
        ),
        (
            "p",
            "      occupied: gq101, gq102",
            "      occupied: gq101, gq1022",
            "occupied: gq101, gq1022",
            "gq1022",
            "occupied ['gq1022'] are not categories of 'gqlevels'",
        ),
        (
            "p",
            "      of: gqlevels\n      table: facilities\n      type: gqtype\n      sense: upper",
            "      of: gqlevelz\n      table: facilities\n      type: gqtype\n      sense: upper",
            "of: gqlevelz",
            "of",
            "bounds 'gqlevelz', which is not a histogram variable or recode",
        ),
        (
            "p",
            "      sense: lower\n      occupied:",
            "      sense: lower\n      occupies:",
            "occupies:",
            "occupies",
            "unknown setting 'occupies' in 'constraints.hhgq_total_lb'",
        ),
        # equal_to
        (
            "p",
            'query: "hhgq8lev * votingage * hispanic * cenrace"',
            'query: "hhgq8lev * votingage * hispanic * cenracex"',
            "query:",
            "cenracex",
            "names ['cenracex'], which are not histogram variables or recodes",
        ),
        (
            "p",
            'query: "hhgq8lev * votingage * hispanic * cenrace"',
            'query: "hhgq8lev * votingage * hispanic * cenrace * sex"',
            "query:",
            "sex",
            "('pl94' has no column sex)",
        ),
        (
            "p",
            "      table: pl94\n",
            "      table: pl95\n",
            "table: pl95",
            "pl95",
            "reads 'pl95', which must be a second table",
        ),
        (
            "p",
            '      query: "hhgq8lev * votingage * hispanic * cenrace"\n',
            "",
            "pl94: {",
            "pl94",
            "'equal_to.pl94' needs the setting 'query'",
        ),
        # equal_to against what the spec alone fixes: the product's columns, and the invariants' groups
        (
            "p",
            "military, othernoninst}",
            "military, noninst}",
            'query: "hhgq8lev',
            "hhgq8lev",
            "column 'hhgq8lev' of 'pl94' (declared at line 126) must take exactly the group labels of 'hhgq8lev' (household, "
            "correctional, juvenile, nursing, otherinst, college, military, othernoninst), the groups the release's marginal "
            "has; it lacks othernoninst; it has noninst besides",
        ),
        (
            "p",
            "    cenrace    : int 0..62\n  }\n}",
            "    cenrace    : int 0..63\n  }\n}",
            'query: "hhgq8lev',
            "cenrace",
            "column 'cenrace' of 'pl94' (declared at line 129) must take exactly the categories of 'cenrace' (0, 1, 2, ..., "
            "62: 63 in all), the groups the release's marginal has; it has 63 besides",
        ),
        (
            "p",
            "  count persons by state\n",
            "  count persons by state\n  count persons by block, sex\n",
            'query: "hhgq8lev',
            "hhgq8lev",
            "equal_to: 'pl94': its groups cross those of the invariant 'count persons by block, sex' (line 139): "
            "hhgq8lev=household of the target and sex=0 of the invariant share persons and neither holds the other",
        ),
        # outer_passes (and their constrain_to)
        (
            "p",
            "    state: {\n      outer1: {\n        estimation: {",
            "    state: {\n      outer1: {\n        estimate: 1\n        estimation: {",
            "estimate: 1",
            "estimate",
            "unknown setting 'estimate' in 'outer_passes.state.outer1'",
        ),
        (
            "p",
            "  outer_passes: {\n    state: {",
            "  outer_passes: {\n    statex: {",
            "statex: {",
            "statex",
            "parameter 'outer_passes': 'statex' is not a geography level",
        ),
        (
            "p",
            "  outer_passes: {\n    state: {\n      outer1: {",
            '  outer_passes: {\n    state: {\n      outer1: {\n        constrain_to: { pass1: ["total"] }',
            "constrain_to:",
            "constrain_to",
            "constrain_to at level 'state'",
        ),
        (
            "h",
            '        rounding: ["households: detailed"]\n      }\n    }\n    tsg:',
            '        rounding: ["housholds: detailed"]\n      }\n    }\n    tsg:',
            'rounding: ["housholds',
            "rounding",
            "names table 'housholds', which is not a joint table",
        ),
        # structural zeros in the joint table
        (
            "h",
            "          hhtype: [393]\n",
            "          hhtypes: [393]\n",
            "hhtypes: [393]",
            "hhtypes",
            "names 'hhtypes', which is not a histogram variable or recode",
        ),
        (
            "h",
            "          hhtype: [393]\n",
            "          hhtype: [393, 522]\n",
            "hhtype: [393, 522]",
            "hhtype",
            "hhtype = [522] are not categories of 'hhtype' (0..521)",
        ),
        (
            "h",
            "          partner_type_detailed_own_child_status: none_own_under6, none_own_both,",
            "          partner_type_detailed_own_child_status: none_own_under5, none_own_both,",
            "partner_type_detailed_own_child_status: none_own_under5",
            "partner_type_detailed_own_child_status",
            "partner_type_detailed_own_child_status = ['none_own_under5'] are not groups",
        ),
        # the spine
        (
            "p",
            "    bypass: county, prim, tsg, tsubset, blockgroup\n",
            "    bypass: county, prim, tsg, tsubset, blockgroup, county\n",
            "bypass:",
            "county\n",
            "spine: bypass lists 'county' twice",
        ),
        (
            "p",
            "    bypass: county, prim, tsg, tsubset, blockgroup\n",
            "    bypass: county, prim, tsg, tsubset, blockgroup, block\n",
            "bypass:",
            "block\n",
            "'block', the finest level",
        ),
        (
            "p",
            "    bypass: county, prim",
            "    bypass: nation, county, prim",
            "bypass:",
            "nation",
            "spine: bypass names 'nation', which has no budget share: its single-child units would take their child's "
            "budget and measure nothing, leaving those geounits without budget",
        ),
        (
            "p",
            "    aian: aian\n",
            "    aian: aian\n    aian_areas: 1\n",
            "aian_areas:",
            "aian_areas",
            "unknown setting 'aian_areas' in 'spine'",
        ),
        # failsafe, variables, levels, recodes, duplicates
        (
            "p",
            "    minimal_schema: [relgq]\n",
            "    minimal_schema: [relgq, gq]\n",
            "minimal_schema:",
            "gq]",
            "minimal_schema names gq; it needs histogram variables",
        ),
        (
            "p",
            "    minimal_schema: [relgq]\n",
            "    minimal_schema: [relgq]\n    schema: 1\n",
            "schema: 1",
            "schema",
            "unknown setting 'schema' in 'failsafe'",
        ),
        (
            "p",
            "  variables: relgq, sex, age, hispanic, cenrace\n",
            "  variables: relgq, sex, age, hispanic, cenrace, sex\n",
            "variables:",
            "sex\n",
            "variables: 'sex' is listed twice",
        ),
        (
            "h",
            "      variables: sex, hhage",
            "      variables: sex, hhage, hhage",
            "variables: sex, hhage, hhage",
            "hhage, hisp",
            "joint: 'households': variables: 'hhage' is listed twice",
        ),
        (
            "p",
            "    state: 6571/24811",
            "    statex: 6571/24811",
            "statex:",
            "statex",
            "levels: 'statex' is not a geography level",
        ),
        (
            "p",
            "    state: 6571/24811",
            "    state: 6571/24811  # once\n    state: 6571/24811",
            "state: 6571/24811  # dhcp",
            "state",
            "levels: 'state' is given twice in one block (first at line",
        ),
        (
            "p",
            "  pass_tolerance: 0.1\n",
            "  pass_tolerance: 0.1\n  pass_tolerance: 0.2\n",
            "pass_tolerance: 0.2",
            "pass_tolerance",
            "'pass_tolerance' is given twice in one block",
        ),
        ("p", "      a1: [1]\n", "      a1: [0]\n", "a1: [0]", "0]", "0 is in both 'a0' and 'a1'"),
        ("p", "      a1: [1]\n", "      a1: [1, 200]\n", "a1: [1, 200]", "200", "group 'a1' lists 200"),
        ("p", "      a1: [1]\n", "      a1: []\n", "a1: []", "a1", "group 'a1' is empty"),
        (
            "p",
            "    age_38_groups: {\n      of: age\n",
            "    age_38_groups: {\n      of: ages\n",
            "of: ages",
            "of",
            "recodes 'ages', which is not a histogram variable",
        ),
        (
            "p",
            "    age_38_groups: {\n",
            "    sex: {\n",
            "sex: {",
            "sex",
            "recodes: 'sex': the name is already a variable",
        ),
        # the cross constraints' fields
        (
            "h",
            '      right: "households: ten = 0"\n',
            '      right: "households: ten = 0"\n      middle: "x"\n',
            "middle:",
            "middle",
            "unknown setting 'middle' in 'cross_constraints.owned_mortgage'",
        ),
    ],
)
def test_a_reviewers_misuse_of_a_dhc_construct_is_at_its_exact_line_and_item(
    which, old, new, line_start, fragment, message
):
    text, d = _error(PERSONS if which == "p" else HOUSEHOLDS, old, new)
    assert message in d.message, d.message
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines, 1) if (line.strip() + "\n").startswith(line_start)]
    assert len(starts) == 1, (line_start, starts)  # the case names one line
    line = lines[starts[0] - 1] + "\n"
    assert (d.line, d.column) == (starts[0], line.index(fragment, line.index(line_start.strip())) + 1), d


def test_shares_that_do_not_sum_to_one_are_listed_as_the_spec_writes_the_queries():
    """The list once came in canonical form ('relgq_4_groups * age_18_64_116' for the spec's
    'age_18_64_116 * relgq_4_groups', 'detailed' spelled out as its five variables), so a reviewer
    could not find the entries in the spec; a joint table's queries keep their written order too."""
    old = "      gq_constr_groups * age_10_groups: 4045/13142\n"
    text, d = _error(PERSONS, old, "      gq_constr_groups * age_10_groups: 4046/13142\n")
    assert "age_18_64_116 * relgq_4_groups=1009/13142" in d.message and "detailed=1011/13142" in d.message
    assert "relgq * age_40_groups * hispanic * cenrace * sex=1011/13142" in d.message
    nation = [line for line in HOUSEHOLDS.splitlines() if line.strip().startswith("multig * hisp * hhtenshort_2lev:")]
    assert nation
    first = nation[0]
    text, d = _error(HOUSEHOLDS, first + "\n", first.replace(first.split(":")[-1].strip(), "1/2") + "\n")
    assert "multig * hisp * hhtenshort_2lev=1/2" in d.message
