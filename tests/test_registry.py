"""OpenDP Deployments Registry: export -> schema, export -> import -> same IR, the bundled
entries, the registry audit rules, and every kind of bad entry (located, named, nothing written)."""

from __future__ import annotations

import glob
import math
import os
import textwrap

import attrs
import pytest
import yaml
from fractions import Fraction
from click.testing import CliRunner
from jsonschema import Draft7Validator

from dpspec import ir
from dpspec.audit import audit
from dpspec.budget.budget_report import budget_summary
from dpspec.cli.main import main
from dpspec.errors import MechanismError, SpecError
from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse, read_source
from dpspec.registry import prose
from dpspec.registry.entry import parse_entry, read_entry, schema
from dpspec.registry.export import entry_data, entry_yaml
from dpspec.registry.importer import build_spec, import_text
from tests.conftest import SPECS

REGISTRY = os.path.join(SPECS, "registry")
ENTRIES = sorted(glob.glob(os.path.join(REGISTRY, "*.yaml")))
REGISTRY_SPECS = sorted(glob.glob(os.path.join(REGISTRY, "*.dps")))
CARRIED = ("title", "domain", "invariants", "public", "unit", "premetric")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def load(path):
    return parse(read_source(path), path)


def validate_independently(text: str) -> list[str]:
    """Validation as the registry's own check does it: its schema, Draft 7, format checker."""
    data = yaml.load(text, Loader=yaml.Loader)  # the registry's loader: YAML dates would be dates
    validator = Draft7Validator(schema(), format_checker=Draft7Validator.FORMAT_CHECKER)
    return [e.message for e in validator.iter_errors(data)]


# ---- the bundled entries -----------------------------------------------------------------


def test_four_census_entries_are_bundled_with_their_imports():
    names = {os.path.basename(p)[:-5] for p in ENTRIES}
    assert names == {"pl94_persons", "dhc_persons", "dhc_households", "ddhc_a"}
    assert {os.path.basename(p)[:-4] for p in REGISTRY_SPECS} == names


@pytest.mark.parametrize("path", ENTRIES, ids=os.path.basename)
def test_bundled_entry_is_valid_and_its_spec_is_its_import(path):
    with open(path, encoding="utf-8") as fh:
        assert validate_independently(fh.read()) == []
    text = import_text(read_entry(path))
    with open(path[:-5] + ".dps", encoding="utf-8") as fh:
        assert fh.read() == text, "regenerate with dpspec import --registry"


@pytest.mark.parametrize("path", REGISTRY_SPECS, ids=os.path.basename)
def test_imported_spec_checks_budgets_and_audits(path):
    assert run("check", path).exit_code == 0
    budget = run("budget", path)
    assert budget.exit_code == 0, budget.output
    assert run("fmt", "--check", path).exit_code == 0
    result = run("audit", path)
    assert result.exit_code == 0, result.output
    assert "stated-budget" in result.output


PUBLISHED_RHO = {"pl94_persons": 2.56, "dhc_persons": 4.96, "dhc_households": 7.70, "ddhc_a": 19.776}
# What the production design spends where it exceeds the rounded published figure: the sums of the
# per-query rho of the DHC production strategies (DAS_2020_DHC_Production_Code,
# programs/strategies/dhcp_strategies.py DecompTestStrategyDHCP_20220922_exp_iteration_23_1 and
# dhch_strategies.py DecompTestStrategyDHCH_20220922_exp_iteration_23_1, named by
# configs/production/dhc/person_US.ini and unit_US.ini).
PRODUCTION_RHO = {"dhc_persons": Fraction(24811, 5000), "dhc_households": Fraction(15401, 2000)}


@pytest.mark.parametrize("name,rho", sorted(PUBLISHED_RHO.items()))
def test_bundled_budgets_are_the_published_figures(name, rho):
    summary = budget_summary(load(os.path.join(REGISTRY, name + ".dps")))
    stated = PRODUCTION_RHO.get(name, rho)
    assert summary["budget"] == {"premetric": "zcdp", "rho": float(stated)}
    assert round(float(stated), 2) == round(rho, 2)  # the published figure is the production one, rounded
    assert summary["bounds_hold"]


def test_dhc_entries_state_the_production_design_not_its_rounding():
    """The strategies sum to slightly more than the rounded published figures: a bound at the
    rounded figure would be exceeded by the production design itself."""
    assert PRODUCTION_RHO["dhc_persons"] > Fraction("4.96") and PRODUCTION_RHO["dhc_households"] > Fraction("7.70")
    for name in PRODUCTION_RHO:
        text = open(os.path.join(REGISTRY, name + ".yaml"), encoding="utf-8").read()
        assert "rounded down" in text and "dhcp_strategies.py" in text


def test_the_census_file_totals_add_up():
    """P.L. 94-171 (persons 2.5562 + units 0.0749) and DHC (4.9622 + 7.7005) make the published 15.29."""
    pl94 = Fraction(542, 339) ** 2 + Fraction(3379, 12343) ** 2
    total = pl94 + PRODUCTION_RHO["dhc_persons"] + PRODUCTION_RHO["dhc_households"]
    assert round(float(total), 2) == 15.29


def test_like_with_like_ddhca_against_dhc_persons():
    """Both are change-one person budgets under zCDP, so they compare directly: 19.776 against 4.96."""
    result = audit(load(os.path.join(REGISTRY, "ddhc_a.dps")), baseline=load(os.path.join(REGISTRY, "dhc_persons.dps")))
    budget_row = next(r for r in result.comparison.rows if r.block == "budget")
    assert budget_row.verdict == "weaker"
    assert "spec rho = 19.78, baseline rho = 4.96" in budget_row.reason  # 4.9622, shown to two decimals


def test_ddhca_entry_is_the_production_safetab_budget_per_changed_person():
    """The registry entry's rho (published, change-one) is what the production SafeTab-P spec
    derives: its configured budgets sum to 4.944 add/remove, times 4 for change-one."""
    entry = budget_summary(load(os.path.join(REGISTRY, "ddhc_a.dps")))
    production = budget_summary(load(os.path.join(SPECS, "safetab_p_production.dps")))
    assert production["native"]["flavor"]["relation"] == "symdiff" and production["native"]["budget"][
        "rho"
    ] == pytest.approx(4.944)
    assert entry["flavor"]["relation"] == production["flavor"]["relation"] == "hamming"
    assert entry["budget"] == production["budget"] == {"premetric": "zcdp", "rho": 19.776}


# ---- export ------------------------------------------------------------------------------


def _with_basic_notes(spec: ir.Spec) -> ir.Spec:
    notes = (
        ir.Note("basic.data_curators", "A statistical agency\nA second curator"),
        ir.Note("basic.description", "Test release"),
        ir.Note("basic.intended_use", "Tests"),
        ir.Note("basic.data_product_type", "Summary statistics"),
        ir.Note("basic.data_product_region", "USA"),
        ir.Note("basic.publication_date", "2024-01-31"),
    )
    return attrs.evolve(spec, notes=notes)


@pytest.mark.parametrize(
    "path",
    REGISTRY_SPECS + [os.path.join(SPECS, "pl94_production_topdown.dps"), os.path.join(SPECS, "acs_ma_vision_rr.dps")],
    ids=os.path.basename,
)
def test_export_is_valid_and_imports_back_to_the_same_spec(path, tmp_path):
    spec = load(path)
    if not spec.notes:
        spec = _with_basic_notes(spec)
    text = entry_yaml(spec)
    assert validate_independently(text) == []
    entry_path = tmp_path / "entry.yaml"
    entry_path.write_text(text, encoding="utf-8")
    # an imported spec reads its (relative) key files from where it is written: here, beside the original
    back = attrs.evolve(build_spec(read_entry(str(entry_path))), path=spec.path)
    for field in CARRIED:
        assert getattr(back, field) == getattr(spec, field), field

    def figures(budget):  # the registry's parameters are numbers: an exact companion does not travel
        return {k: v for k, v in budget.items() if not k.endswith("_exact")}

    achieved = figures(budget_summary(spec)["budget"])
    assert figures(budget_summary(back)["budget"]) == pytest.approx(achieved)
    if spec.mechanism.name == "declared":  # an import exported again is the same spec
        assert back.notes == spec.notes and back.budgets == spec.budgets
        assert format_spec(back).split("\n", 3)[3] == format_spec(spec).split("\n", 3)[3]


def test_export_command_writes_the_entry(tmp_path):
    out = tmp_path / "pl94.yaml"
    result = run("export", "--registry", os.path.join(REGISTRY, "pl94_persons.dps"), "-o", out)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert data["deployment"]["privacy_loss"]["privacy_parameters"] == {"rho": 2.56}
    assert data["deployment"]["dp_variant"]["variant_name"] == "Zero-concentrated DP"
    assert "count housing_units by block" in data["deployment"]["dp_variant"]["unprotected_quantities"]


def test_export_names_the_missing_basic_fields_and_writes_nothing(tmp_path):
    out = tmp_path / "x.yaml"
    result = run("export", "--registry", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "-o", out)
    assert result.exit_code == 1
    assert "basic.data_curators" in result.output and "basic.publication_date" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_export_of_a_program_is_refused():
    result = run("export", "--registry", os.path.join(SPECS, "acs_program", "program.dps"))
    assert result.exit_code == 1 and "program" in result.output


# ---- import of prose ---------------------------------------------------------------------

PROSE_ENTRY = textwrap.dedent("""\
    url_slug: test-mobility
    status: Draft
    tier: 2
    deployment:
      basic:
        name: Mobility reports
        data_curators:
          - Example Corp
        intended_use: Public health
        data_product_type: Summary statistics
        data_product_region: Global
        description: Visits by place category
        publication_date: '2020-04-01'
      dp_variant:
        variant_name: {variant}
        unprotected_quantities: |
          - The total population count for each state.
          - The number of stores in each region.
      privacy_loss:
        privacy_unit: {unit}
        privacy_unit_details: {details}
        privacy_parameters:
    {params}
    """)


def prose_entry(
    tmp_path,
    variant="Pure DP",
    unit="User-day-level",
    details="Neighbours add or remove one user-day.",
    params="epsilon: 2.64",
    name="entry.yaml",
):
    text = PROSE_ENTRY.format(variant=variant, unit=unit, details=details, params=textwrap.indent(params, " " * 6))
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_prose_entry_is_formalised_where_it_can_be(tmp_path):
    spec = build_spec(read_entry(str(prose_entry(tmp_path))))
    assert spec.unit == ir.Unit("user_days", "symdiff")
    assert spec.premetric == ir.Premetric("pure")
    assert spec.invariants == (ir.CountQuery("persons", ("state",)),)
    assert spec.domain.table("user_days").unit == "user_day"
    unchecked = spec.note("dpspec.unchecked")
    assert "The number of stores in each region." in unchecked
    assert spec.note("privacy_loss.privacy_unit") == "User-day-level"  # the prose is kept


def test_a_unit_finer_than_a_person_is_spelled_out_for_the_person(tmp_path):
    path = prose_entry(tmp_path)
    out = tmp_path / "s.dps"
    assert run("import", "--registry", path, "-o", out).exit_code == 0
    findings = {f.rule: f for f in audit(load(str(out))).findings}
    f = findings["unit-finer-than-person"]
    per_person = f.evidence["per_person"]
    assert per_person["365"].epsilon == pytest.approx(365 * 2.64)  # pure DP: k * epsilon
    assert "365 days: epsilon = 963.6" in f.message
    assert "The number of stores in each region." in findings["stated-budget"].message


def test_finer_unit_under_zcdp_scales_with_k_squared(tmp_path):
    path = prose_entry(
        tmp_path,
        variant="Zero-concentrated DP",
        unit="Event-level",
        details="Change-one, one event is replaced.",
        params="rho: 0.5",
    )
    spec = build_spec(read_entry(str(path)))
    assert spec.unit.relation == "hamming"
    text = format_spec(spec)
    f = next(f for f in audit(parse(text)).findings if f.rule == "unit-finer-than-person")
    assert f.evidence["per_person"]["100"].rho == pytest.approx(0.5 * 100**2)


@pytest.mark.parametrize("unit", ["Person-level", "Household-level", "User-level"])
def test_no_finer_unit_finding_for_a_person_or_coarser(tmp_path, unit):
    spec = build_spec(read_entry(str(prose_entry(tmp_path, unit=unit))))
    assert "unit-finer-than-person" not in {f.rule for f in audit(parse(format_spec(spec))).findings}


def test_no_stated_budget_finding_for_a_derived_budget():
    rules = {
        f.rule for f in audit(load(os.path.join(SPECS, "pl94_production_topdown.dps")), compute_budget=False).findings
    }
    assert "stated-budget" not in rules


def test_unstated_relation_is_read_as_add_remove_and_reported(tmp_path):
    spec = build_spec(read_entry(str(prose_entry(tmp_path, details="One user's data for one day."))))
    assert spec.unit.relation == "symdiff"
    assert "neighbour relation is not stated" in spec.note("dpspec.unchecked")


def test_approximate_and_string_delta(tmp_path):
    spec = build_spec(
        read_entry(str(prose_entry(tmp_path, variant="Approximate DP", params="epsilon: 4.8\ndelta: '10^-10'")))
    )
    assert spec.premetric.option("delta") == ir.Fraction(1, 10**10)
    assert [p.value for p in spec.mechanism.params.params if p.name == "epsilon"] == [ir.Fraction(48, 10)]


def test_declared_mechanism_cannot_run(tmp_path):
    from dpspec.contract.plugins import mechanisms

    with pytest.raises(MechanismError):
        mechanisms()["declared"].run(None, {}, {}, None)


# ---- bad input ---------------------------------------------------------------------------


def _bad(tmp_path, text, *expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out.dps"
    result = run("import", "--registry", path, "-o", out)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert not out.exists()
    for e in expected:
        assert e in result.output, result.output
    return result.output


def _good_text(tmp_path):
    return prose_entry(tmp_path).read_text()


def test_unknown_field_is_located_and_named(tmp_path):
    text = _good_text(tmp_path).replace(
        "    privacy_unit: User-day-level", "    privacy_unit: User-day-level\n    surprise: 1"
    )
    _bad(tmp_path, text, "bad.yaml:21:5: error: deployment.privacy_loss.surprise: unknown field 'surprise'")


def test_unknown_top_level_field(tmp_path):
    _bad(tmp_path, _good_text(tmp_path) + "extra: yes\n", "error: extra: unknown field 'extra'")


def test_missing_block_is_named(tmp_path):
    text = _good_text(tmp_path)
    text = text[: text.index("  privacy_loss:")]
    _bad(tmp_path, text, "deployment.privacy_loss: missing")


def test_missing_required_schema_field(tmp_path):
    _bad(tmp_path, _good_text(tmp_path).replace("status: Draft\n", ""), "'status' is required here")


@pytest.mark.parametrize(
    "variant,params,expected",
    [
        ("Pure DP", "rho: 1.0", "the variant is Pure DP, which needs epsilon; the entry gives rho"),
        ("Pure DP", "epsilon: 1.0\ndelta: 1.0e-9", "Pure DP but the entry also gives a delta above 0"),
        ("Approximate DP", "epsilon: 1.0", "needs epsilon and delta"),
        ("Zero-concentrated DP", "epsilon: 1.0", "needs rho"),
        ("Renyi DP", "epsilon: 1.0", "order alpha"),
        ("Custom", "epsilon: 1.0", "names no premetric"),
        ("Approximate DP", "epsilon: 1.0\ndelta: tiny", "privacy_parameters.delta: cannot read 'tiny' as a number"),
        ("Pure DP", "epsilon: -1", "privacy_parameters.epsilon: -1 is negative"),
    ],
)
def test_budgets_that_cannot_be_converted(tmp_path, variant, params, expected):
    text = prose_entry(tmp_path, variant=variant, params=params).read_text()
    _bad(tmp_path, text, expected, "bad.yaml:")


def test_schema_type_errors_are_located(tmp_path):
    text = _good_text(tmp_path).replace("epsilon: 2.64", "epsilon: lots")
    _bad(tmp_path, text, "deployment.privacy_loss.privacy_parameters.epsilon: 'lots' is not of type 'number'")


def test_bad_date_and_bad_enum(tmp_path):
    _bad(tmp_path, _good_text(tmp_path).replace("'2020-04-01'", "'1/4/2020'"), "publication_date", "is not a 'date'")
    _bad(tmp_path, _good_text(tmp_path).replace("tier: 2", "tier: 0"), "tier: 0 is not one of")


def test_yaml_syntax_error_and_non_mapping(tmp_path):
    _bad(tmp_path, "deployment: [unclosed\n", "bad.yaml:2:1: error: not valid YAML")
    _bad(tmp_path, "- a list\n", "a registry entry is a YAML mapping")


def test_unknown_unit_and_bad_fenced_block(tmp_path):
    _bad(tmp_path, prose_entry(tmp_path, unit="'?'").read_text(), "privacy_unit: cannot tell the unit")
    text = _good_text(tmp_path).replace(
        "privacy_unit_details: Neighbours add or remove one user-day.",
        "privacy_unit_details: |\n      x\n\n      ```dpspec\n      unit : hamming\n      ```",
    )
    _bad(tmp_path, text, "deployment.privacy_loss.privacy_unit_details: its dpspec block does not parse")


def test_unreadable_entry(tmp_path):
    result = run("import", "--registry", tmp_path / "missing.yaml", "-o", tmp_path / "o.dps")
    assert result.exit_code == 1 and "cannot read the registry entry" in result.output


# ---- the pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,relation",
    [
        ("adjacent datasets differ by the modification of a single person's record", "hamming"),
        ("bounded neighbors: change-one distance", "hamming"),
        ("add or remove one user's data", "symdiff"),
        ("unbounded neighbours (addition or removal of one record)", "symdiff"),
        ("one user's data", None),
        ("change-one or add/remove, depending on the table", None),
    ],
)
def test_relation_from_prose(text, relation):
    assert prose.relation_from_prose(text) == relation


def test_unit_names_and_tables():
    assert prose.unit_names("Person-level; housing-unit-level") == ["person", "housing_unit"]
    assert prose.unit_names("User-day-level") == ["user_day"]
    assert [prose.table_for(n) for n in ("person", "household", "facility", "day")] == [
        "persons",
        "households",
        "facilities",
        "days",
    ]
    assert prose.unit_of_table("gq_facilities") == "gq_facility"


def test_invariants_from_prose_keeps_sub_items_with_their_parent():
    text = (
        "- The total population count for each state, the District of Columbia, and Puerto Rico.\n"
        "- The total count of housing units in each census block.\n"
        "- The count and type of occupied group quarters facilities in each census block:\n"
        "  - Correctional facilities for adults\n"
        "  - Military quarters\n"
        "- Median income of each tract.\n"
    )
    found, unknown = prose.invariants_from_prose(text)
    assert found == [("persons", ("state",)), ("housing_units", ("block",)), ("gq_facilities", ("block", "gq_type"))]
    assert unknown == ["Median income of each tract."]
    assert prose.invariants_from_prose("None.") == ([], [])


def test_notes_round_trip_through_the_formatter():
    text = 'spec "t"\nnotes {\n  a.b: "line one" "line \\"two\\""\n  c: "x"\n}\n'
    spec = parse(text)
    assert spec.notes == (ir.Note("a.b", 'line one\nline "two"'), ir.Note("c", "x"))
    assert parse(format_spec(spec)).notes == spec.notes
    assert format_spec(parse(format_spec(spec))) == format_spec(spec)
    assert ir.to_jsonable(spec)["notes"][0] == {"key": "a.b", "text": 'line one\nline "two"'}


def test_declared_needs_exactly_one_budget_shape(tmp_path):
    text = read_source(os.path.join(REGISTRY, "pl94_persons.dps")).replace("  rho: 2.56\n", "")
    with pytest.raises(SpecError, match="state one budget"):
        from dpspec.check.checker import check

        check(parse(text))


def test_export_then_import_is_exact_for_fractions(tmp_path):
    """A stated rho written as a decimal comes back as the same exact number."""
    spec = load(os.path.join(REGISTRY, "ddhc_a.dps"))
    data = entry_data(spec)
    assert data["deployment"]["privacy_loss"]["privacy_parameters"]["rho"] == 19.776
    entry = parse_entry(entry_yaml(spec), "x.yaml")
    back = build_spec(entry)
    rho = next(p.value for p in back.mechanism.params.params if p.name == "rho")
    assert rho == ir.Fraction(19776, 1000) and not math.isnan(float(rho))


def test_published_conversion_is_a_bound_only_when_rho_implies_it(tmp_path):
    """rho 0.5 implies epsilon 5.22 at delta 1e-6 (CKS20): a quoted 6.0 becomes a checked bound,
    a quoted 3.0 (not implied by rho alone) stays a claim listed as unchecked."""
    implied = build_spec(
        read_entry(
            str(prose_entry(tmp_path, variant="Zero-concentrated DP", params="rho: 0.5\nepsilon: 6.0\ndelta: 1.0e-6"))
        )
    )
    assert [b.quantity for b in implied.budgets] == ["rho", "epsilon"]
    assert implied.note("dpspec.unchecked") is None or "not implied" not in implied.note("dpspec.unchecked")
    claim = build_spec(
        read_entry(
            str(
                prose_entry(
                    tmp_path,
                    variant="Zero-concentrated DP",
                    params="rho: 0.5\nepsilon: 3.0\ndelta: 1.0e-6",
                    name="b.yaml",
                )
            )
        )
    )
    assert [b.quantity for b in claim.budgets] == ["rho"]
    assert "is not implied by rho = 0.5 alone" in claim.note("dpspec.unchecked")
    assert budget_summary(parse(format_spec(claim)))["bounds_hold"]


def test_a_unit_linked_to_its_person_is_left_to_finer_unit(tmp_path):
    """When the domain links the user-days to their persons, finer-unit speaks (with the link's
    bound); unit-finer-than-person stays silent instead of saying it twice."""
    spec = build_spec(read_entry(str(prose_entry(tmp_path))))
    pid = ir.Column("pid", ir.ColumnType("category"))
    days = attrs.evolve(spec.domain.table("user_days"), columns=(pid,), parent="persons_of_days", link="pid")
    people = ir.Table("persons_of_days", "person", (pid,))
    others = tuple(t for t in spec.domain.tables if t.name != "user_days")
    linked = attrs.evolve(spec, domain=attrs.evolve(spec.domain, tables=(days, people) + others))
    rules = {f.rule for f in audit(parse(format_spec(linked))).findings}
    assert "unit-finer-than-person" not in rules and "finer-unit" in rules


# ---- issue 30: the bundled production specs carry their curator notes ------------------------

# each compilable production spec and the bundled entry of the same product
PRODUCTS = [("pl94_production_topdown.dps", "pl94_persons.yaml"), ("safetab_p_production.dps", "ddhc_a.yaml")]


def _fields(node, prefix=()):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from _fields(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _prose(text):
    """A field's curator prose, without the formal ```dpspec block an export appends."""
    return text.split("```dpspec", 1)[0].strip() if isinstance(text, str) else text


@pytest.mark.parametrize("spec_name, entry_name", PRODUCTS)
def test_a_production_spec_exports_its_products_registry_entry(spec_name, entry_name, tmp_path):
    out = tmp_path / "entry.yaml"
    result = run("export", "--registry", os.path.join(SPECS, spec_name), "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert validate_independently(text) == []
    exported = dict(_fields(yaml.safe_load(text)))
    bundled = dict(_fields(yaml.safe_load(open(os.path.join(REGISTRY, entry_name), encoding="utf-8"))))
    assert set(exported) == set(bundled)
    name = ("deployment", "basic", "name")  # the spec's own title: it runs on a synthetic state
    assert load(os.path.join(SPECS, spec_name)).title == exported[name]
    rho = ("deployment", "privacy_loss", "privacy_parameters", "rho")
    # the exact achieved rho, against the entry's published figure (to the digits it is published with)
    digits = len(str(bundled[rho]).split(".")[1])
    assert round(exported[rho], digits) == bundled[rho]
    for path in set(bundled) - {name, rho}:
        assert _prose(exported[path]) == _prose(bundled[path]), path
    # the formal flavor is the entry's too (its import, bundled beside it)
    spec, entry = load(os.path.join(SPECS, spec_name)), load(os.path.join(REGISTRY, entry_name[:-5] + ".dps"))
    assert (spec.unit, spec.premetric) == (entry.unit, entry.premetric)
