"""Nested, typed, located parameters: the core checks blocks, maps, lists and query expressions
against a mechanism's schema, resolves them to plain values, and puts every problem (its own, and
a plugin's given as a path into the mechanism block) at the line and column of the value."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from fractions import Fraction
from pathlib import Path

import pytest

from dpspec import ir
from dpspec.api import Diagnostic, Mechanism, ParameterSchema, ParamSpec, SpecError, check, hookimpl, located
from dpspec.contract.params import label, resolve_params
from dpspec.language.parser import parse

SPEC = textwrap.dedent("""\
    spec "nested"
    domain d "toy" {
      stage edited
      table people unit person {
        county : {a, b}
        tract : {t1, t2, t3}
        sex : {f, m}
        age : int 0..9
      }
      geography g { county > tract }
    }
    unit people : symdiff
    premetric zcdp
    mechanism nested_toy {
      table: people
      levels: {
        county: {
          rho: 1/2
          queries: ["total", "sex", "sex * age"]
        }
        tract: {
          rho: 1/4
          queries: [total]
        }
      }
      names: [county, tract]
      weights: {
        sex: 2
      }
    }
    """)


class Toy(Mechanism):
    name = "nested_toy"
    version = "1"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table", required=True),
            ParamSpec(
                "levels",
                "map",
                "per level",
                required=True,
                keys="levels",
                values=ParamSpec(
                    "",
                    "block",
                    "one level",
                    fields=(
                        ParamSpec("rho", "number", "its budget", required=True, low=Fraction(0)),
                        ParamSpec(
                            "queries", "list", "what it measures", items=ParamSpec("", "query", "", table_param="table")
                        ),
                        ParamSpec("note", "string", "a remark", default="none"),
                    ),
                ),
            ),
            ParamSpec("names", "list", "levels named", items="level"),
            ParamSpec("weights", "map", "per column", keys="columns", table_param="table", values="int"),
            ParamSpec("free", "block", "free-form: checked by the plugin"),
        )
    )

    def check(self, spec, params):
        # a plugin's own semantic problem, given as a path: the core finds its line
        if params["levels"]["county"]["rho"] > 1:
            return [Diagnostic("rho above 1", path=("levels", "county", "rho"))]
        if len(params["levels"]["county"]["queries"]) > 2 and params["weights"].get("sex") == 3:
            return [Diagnostic("the third query is refused", path=("levels", "county", "queries", 2))]
        return []

    def flavor(self, spec, params):
        from dpspec.api import NativeFlavor

        return NativeFlavor("people", "symdiff", "zcdp")


def _resolve(text):
    spec = parse(text, "toy.dps")
    return resolve_params(Toy(), spec.mechanism, spec)


def _line_col(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """(line, column) of the nth occurrence of needle in text, 1-based ('a: |b': where b is)."""
    before, _, after = needle.rpartition("|")
    at = -1
    for _ in range(nth):
        at = text.index(before + after, at + 1)
    at += len(before)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


@pytest.fixture
def toy_plugin():
    from dpspec.contract import plugins

    module = types.ModuleType("dpspec_test_nested_toy")
    module.dpspec_mechanisms = hookimpl(lambda: [Toy()])
    sys.modules[module.__name__] = module
    pm = plugins.manager()
    pm.register(module, name="test_nested_toy")
    plugins.mechanisms.cache_clear()
    yield
    pm.unregister(name="test_nested_toy")
    plugins.mechanisms.cache_clear()
    del sys.modules[module.__name__]


# ---- resolution -----------------------------------------------------------------------------


def test_nested_values_resolve_to_plain_python_values():
    params, problems = _resolve(SPEC)
    assert problems == []
    assert params["levels"] == {
        "county": {"rho": Fraction(1, 2), "queries": ((), ("sex",), ("sex", "age")), "note": "none"},
        "tract": {"rho": Fraction(1, 4), "queries": ((),), "note": "none"},
    }
    assert params["names"] == ("county", "tract")
    assert params["weights"] == {"sex": 2}
    assert params["free"] is None


def test_a_free_form_block_is_still_handed_over_as_written():
    params, problems = _resolve(SPEC.replace("  names:", "  free: {\n    anything: [1, 2]\n  }\n  names:"))
    assert problems == [] and isinstance(params["free"], ir.ParamBlock)
    assert params["free"].get("anything").value == (Fraction(1), Fraction(2))


@pytest.mark.parametrize(
    "old, new, at, message",
    [
        # a wrong type inside a nested block: at the setting
        (
            "rho: 1/4",
            "rho: quarter",
            "rho: quarter",
            "parameter 'levels.tract.rho': expected a number, got the name 'quarter'",
        ),
        # out of the declared range, nested
        ("rho: 1/2", "rho: -1", "rho: -1", "parameter 'levels.county.rho': -1 is outside the allowed range [0, inf]"),
        # an unknown key of a nested block, with a did-you-mean
        ("rho: 1/4", "rho: 1/4\n      qeuries: [total]", "qeuries:", "unknown setting 'qeuries' in 'levels.tract'"),
        # a map key that is not a geography level
        ("  tract: {\n", "  tracts: {\n", "tracts:", "parameter 'levels': 'tracts' is not a geography level"),
        # a map key that is not a column of the table the schema names
        ("sex: 2", "height: 2", "height: 2", "parameter 'weights': 'height' is not a column of table 'people'"),
        # a list item: at the item itself
        (
            '"sex * age"]',
            '"sex * agee"]',
            '"sex * agee"',
            "parameter 'levels.county.queries[2]': unknown column 'agee'",
        ),
        (
            "names: [county, tract]",
            "names: [county, block]",
            "block]",
            "parameter 'names[1]': 'block' is not a geography level",
        ),
        (
            "names: [county, tract]",
            "names: 3",
            "names: |3",
            "parameter 'names[0]': expected a geography level, got a number",
        ),
        # a required nested setting missing: at the block that lacks it
        ("      rho: 1/4\n", "", "tract: {", "'levels.tract' needs the setting 'rho' (its budget)"),
        # a block where a value belongs, and a value where a block belongs
        ("sex: 2", "sex: { x: 1 }", "sex: {", "parameter 'weights.sex': expected a number, got a block"),
        (
            "  weights: {\n    sex: 2\n  }",
            "  weights: 2",
            "weights: 2",
            "parameter 'weights': expected a block of columns: value",
        ),
    ],
)
def test_a_nested_problem_is_located_at_the_offending_value(old, new, at, message):
    text = SPEC.replace(old, new, 1)
    assert text != SPEC
    _, problems = _resolve(text)
    assert len(problems) == 1, problems
    (d,) = problems
    assert message in d.message, d.message
    assert (d.line, d.column) == _line_col(text, at), (d, at)


def test_a_misspelled_nested_key_gets_a_did_you_mean():
    _, (d,) = _resolve(SPEC.replace("rho: 1/4", "rho: 1/4\n      qeuries: [total]"))
    assert d.hint == "did you mean 'queries'?" and d.path == ("levels", "tract", "qeuries")


# ---- paths and locations --------------------------------------------------------------------


def test_a_path_names_a_block_entry_a_map_key_or_a_list_item():
    spec = parse(SPEC, "toy.dps")
    block, call = spec.mechanism.params, spec.mechanism.loc
    assert ir.locate(block, ("levels", "tract"), call) == ir.Loc(*_line_col(SPEC, "tract: {"))
    assert ir.locate(block, ("levels", "county", "rho"), call) == ir.Loc(*_line_col(SPEC, "rho: 1/2"))
    assert ir.locate(block, ("levels", "county", "queries", 1), call) == ir.Loc(*_line_col(SPEC, '"sex"'))
    assert ir.locate(block, ("names", 1), call) == ir.Loc(*_line_col(SPEC, "tract]"))
    # a path that runs past what is written stops at the deepest written part
    assert ir.locate(block, ("levels", "county", "nothing", 3), call) == ir.Loc(*_line_col(SPEC, "county: {"))
    assert ir.locate(block, ("absent",), call) == call and ir.locate(block, ("absent",)) == block.loc
    assert ir.line_column(None, ir.locate(block, (), call)) == (call.line, call.column)
    assert label(("levels", "county", "queries", 2)) == "levels.county.queries[2]"


def test_a_plugin_diagnostic_with_a_path_is_located_by_the_core():
    spec = parse(SPEC, "toy.dps")
    d, plain, fixed = located(
        spec,
        [
            Diagnostic("x", path=("levels", "county", "queries", 2)),
            Diagnostic("y"),
            Diagnostic("z", 3, 4, path=("table",)),
        ],
    )
    assert (d.line, d.column) == _line_col(SPEC, '"sex * age"')
    assert (plain.line, plain.column) == (spec.mechanism.loc.line, spec.mechanism.loc.column)
    assert (fixed.line, fixed.column) == (3, 4)  # a plugin's own line is kept


def test_check_locates_what_a_plugin_reports_by_path(toy_plugin):
    text = SPEC.replace("rho: 1/2", "rho: 2")
    with pytest.raises(SpecError) as info:
        check(parse(text, "toy.dps"))
    (d,) = info.value.diagnostics
    assert d.message == "rho above 1" and (d.line, d.column) == _line_col(text, "rho: 2")
    text = SPEC.replace("sex: 2", "sex: 3")
    with pytest.raises(SpecError) as info:
        check(parse(text, "toy.dps"))
    (d,) = info.value.diagnostics
    assert (d.line, d.column) == _line_col(text, '"sex * age"')
    assert check(parse(SPEC, "toy.dps")).params["levels"]["tract"]["queries"] == ((),)


def test_positions_leave_spec_equality_and_json_unchanged():
    moved = SPEC.replace('queries: ["total", "sex", "sex * age"]', 'queries: [\n  "total",\n     "sex", "sex * age"]')
    a, b = parse(SPEC, "a.dps"), parse(moved, "b.dps")
    assert a == b and hash(a.mechanism) == hash(b.mechanism)
    assert ir.to_jsonable(a) == ir.to_jsonable(b)
    assert "positions" not in str(ir.to_jsonable(a.mechanism))
    qa = a.mechanism.params.get("levels").value.get("county").value.get("queries")
    qb = b.mechanism.params.get("levels").value.get("county").value.get("queries")
    assert qa.value_loc(2) != qb.value_loc(2)


# ---- what readers see: plugins --json, hover -----------------------------------------------


def test_nested_settings_are_in_the_schema_json():
    (levels,) = [p for p in Toy.parameters.to_json() if p["name"] == "levels"]
    assert levels["keys"] == "levels" and levels["values"]["type"] == "block"
    assert [f["name"] for f in levels["values"]["fields"]] == ["rho", "queries", "note"]
    assert levels["values"]["fields"][1]["items"] == {
        "name": "",
        "type": "query",
        "doc": "",
        "required": False,
        "table_param": "table",
    }
    assert Toy.parameters.at(("levels", "county", "queries", 0)).type == "query"
    assert Toy.parameters.at(("free", "x")) is None


def test_hover_and_completion_walk_nested_settings(toy_plugin):
    from dpspec.lsp.complete import complete
    from dpspec.lsp.hover import hover

    line, col = _line_col(SPEC, "rho: 1/4")
    doc = hover(SPEC, parse(SPEC, "toy.dps"), line - 1, col)
    assert "**rho** (number; required; range [0, inf]), a setting of mechanism `nested_toy`" in doc
    line, _ = _line_col(SPEC, "rho: 1/4")
    labels = {i.label for i in complete(SPEC.replace("rho: 1/4", "    "), None, line - 1, 4)}
    assert {"rho", "queries", "note"} <= labels


# ---- either: a value read by the option its writing chooses (TopDown's passes) -------------

PASSES = ParamSpec(
    "",
    "either",
    "passes",
    options=(
        ParamSpec("", "list", "one pass", items="string"),
        ParamSpec("", "map", "named passes in order", keys="names", values=ParamSpec("", "list", "", items="string")),
    ),
)


class Passes(Toy):
    name = "nested_passes"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table", required=True),
            ParamSpec("estimation", "map", "passes per level", keys="levels", values=PASSES),
        )
    )

    def check(self, spec, params):
        return []


def _passes(body):
    text = SPEC.split("mechanism nested_toy")[0] + "mechanism nested_passes {\n  table: people\n" + body + "}\n"
    spec = parse(text, "toy.dps")
    return text, *resolve_params(Passes(), spec.mechanism, spec)


def test_either_reads_a_list_or_a_block_of_named_lists():
    _, params, problems = _passes(
        '  estimation: {\n    county: ["total"]\n    tract: { pass1: [total]  pass2: ["sex"] }\n  }\n'
    )
    assert problems == []
    assert params["estimation"] == {"county": ("total",), "tract": {"pass1": ("total",), "pass2": ("sex",)}}
    assert Passes.parameters.at(("estimation", "tract", "pass1", 0)).type == "string"
    assert Passes.parameters.at(("estimation", "county", 0)).type == "string"
    assert PASSES.describe_type() == "list of string or map of names to list of string"
    assert [o["type"] for o in PASSES.to_json()["options"]] == ["list", "map"]


def test_either_locates_a_problem_inside_the_option_chosen():
    text, _, problems = _passes("  estimation: {\n    county: { pass1: [total]  pass2: 3 }\n    tracts: [total]\n  }\n")
    assert [(d.line, d.column) for d in problems] == [_line_col(text, "pass2: |3"), _line_col(text, "|tracts")]
    assert "parameter 'estimation.county.pass2[0]': expected a string" in problems[0].message
    assert "'tracts' is not a geography level" in problems[1].message
    text, _, problems = _passes("  estimation: {\n    county: { pass1: { a: 1 } }\n  }\n")
    assert problems and "estimation.county.pass1" in problems[0].message


# ---- a map with settings of its own, and an either read by the kind of value written --------

CATEGORY = ParamSpec("", "either", "a category", options=("number", "string"))
GROUPS = ParamSpec(
    "groups",
    "map",
    "per name: a grouping of one column's values",
    keys="names",
    values=ParamSpec(
        "",
        "map",
        "one grouping: the column it groups, and LABEL: [values]",
        keys="names",
        fields=(ParamSpec("of", "column", "the column grouped", required=True, table_param="table"),),
        values=ParamSpec("", "list", "the group's values", items=CATEGORY),
    ),
)


class Grouped(Toy):
    name = "nested_grouped"
    parameters = ParameterSchema((ParamSpec("table", "table", "the table", required=True), GROUPS))

    def check(self, spec, params):
        return []


def _grouped(body):
    text = SPEC.split("mechanism nested_toy")[0] + "mechanism nested_grouped {\n  table: people\n" + body + "}\n"
    spec = parse(text, "toy.dps")
    return text, *resolve_params(Grouped(), spec.mechanism, spec)


def test_a_map_reads_its_own_settings_beside_its_keys_and_an_either_reads_numbers_and_names_apart():
    _, params, problems = _grouped(
        "  groups: {\n    ages: { of: age  young: [0, 1]  old: 2 }\n    s: { f: f  of: sex }\n  }\n"
    )
    assert problems == []
    assert params["groups"] == {
        "ages": {"of": "age", "young": (Fraction(0), Fraction(1)), "old": (Fraction(2),)},
        "s": {"f": ("f",), "of": "sex"},
    }
    assert Grouped.parameters.at(("groups", "ages", "of")).type == "column"
    assert Grouped.parameters.at(("groups", "ages", "young", 0)).type == "either"
    assert CATEGORY.option_for(Fraction(1)).type == "number" and CATEGORY.option_for(ir.Name("f")).type == "string"
    assert GROUPS.values.describe_type() == "map of names to list of number or string, with the setting of"
    assert [f["name"] for f in GROUPS.to_json()["values"]["fields"]] == ["of"]


def test_a_maps_own_setting_is_checked_and_located_as_a_blocks():
    text, _, problems = _grouped("  groups: {\n    ages: { young: [0, 1] }\n    s: { of: height  f: [f] }\n  }\n")
    assert [(d.message, (d.line, d.column)) for d in problems] == [
        ("'groups.ages' needs the setting 'of' (the column grouped)", _line_col(text, "|ages")),
        (
            "parameter 'groups.s.of': unknown column 'height' in table 'people' (known: age, county, sex, tract)",
            _line_col(text, "    s: { |of"),
        ),
    ]
    text, _, problems = _grouped("  groups: {\n    ages: { of: age  young: [0, { x: 1 }] }\n  }\n")
    assert problems and problems[0].message.startswith("parameter 'groups.ages.young[1]': expected")
    assert (problems[0].line, problems[0].column) == _line_col(text, "young: [0, |{")


def test_hover_and_completion_know_a_maps_own_settings_and_an_eithers_block(toy_plugin, monkeypatch):
    from dpspec.contract import plugins
    from dpspec.lsp.complete import complete
    from dpspec.lsp.hover import hover

    monkeypatch.setattr(plugins, "mechanisms", lambda: {"nested_grouped": Grouped(), "nested_passes": Passes()})
    text, _, _ = _grouped("  groups: {\n    ages: {\n      of: age\n      young: [0, 1]\n    }\n  }\n")
    line, col = _line_col(text, "|of: age")
    assert "**of** (column; required), a setting of mechanism `nested_grouped`" in hover(text, None, line - 1, col)
    labels = {i.label for i in complete(text.replace("      of: age\n", "      \n"), None, line - 1, 6)}
    assert "of" in labels
    text = _passes("  estimation: {\n    county: {\n      pass1: [total]\n    }\n  }\n")[0]
    line, col = _line_col(text, "|pass1")
    assert "**pass1** (list of string)" in hover(text, None, line - 1, col)


# ---- TopDown reads the core's plain values, never the mechanism block ------------------------

TOPDOWN = Path(__file__).resolve().parent.parent / "plugins" / "dpspec_topdown"
REREADS = re.compile(r"mechanism\.params|ParamBlock")  # the block as written, re-parsed


def _rereads(root) -> list[str]:
    return [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if REREADS.search(line)
    ]


def test_no_topdown_module_reads_the_mechanism_block_or_tests_for_a_param_block():
    assert _rereads(TOPDOWN) == []  # every setting is declared in the schema: a path locates its errors


def test_the_reread_scan_finds_one_where_it_is_written(tmp_path):
    (tmp_path / "m.py").write_text(
        "p = spec.mechanism.params.get(name)\nok = 1\nif isinstance(v, ir.ParamBlock):\n    pass\n"
    )
    assert _rereads(tmp_path) == [
        "m.py:1: p = spec.mechanism.params.get(name)",
        "m.py:3: if isinstance(v, ir.ParamBlock):",
    ]
