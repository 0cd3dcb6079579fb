"""Programs that compose releases of different tables of one census domain under a stated
composed unit (issue 25, item 3): each member converted by its unit relation, a ledger line per
member and step, and clear errors for another domain or a member without a unit relation."""

import json
import os
from fractions import Fraction

import pytest
from click.testing import CliRunner

from dpspec.budget.program import program_summary
from dpspec.cli.main import main
from dpspec.errors import SpecError
from dpspec.language.parser import parse, read_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PL94_PROGRAM = os.path.join(ROOT, "specs", "pl94_program", "program.dps")

DOMAIN = """domain census "one census: households, their persons, housing units" {
  stage edited
  table households unit household {
    hhid : int 1..1000
    size : int 1..20
  }
  table persons unit person in households by hhid at most 20 {
    hhid : int 1..1000
    age  : int 0..115
  }
  table units unit housing_unit {
    block  : category
    tenure : {own, rent}
  }
}
"""


def _member(tmp_path, name, table, relation, rho, domain=DOMAIN):
    text = (
        f'spec "{name}"\n\n{domain}\nunit {table} : {relation}\npremetric zcdp\n\n'
        f'mechanism declared {{\n  table: {table}\n  relation: {relation}\n  rho: {rho}\n  source: "test"\n}}\n'
    )
    (tmp_path / f"{name}.dps").write_text(text)
    return f"{name}.dps"


def _program(tmp_path, members, unit, budget="budget rho <= 1000"):
    includes = "\n".join(f'  include "{m}"' for m in members)
    text = f'program "p" {{\n{includes}\n}}\n{unit}\n{budget}\n'
    path = tmp_path / "program.dps"
    path.write_text(text)
    return parse(text, str(path))


def test_person_unit_composes_households_persons_and_units(tmp_path):
    members = [
        _member(tmp_path, "persons", "persons", "hamming", "1"),
        _member(tmp_path, "households", "households", "hamming", "2"),
        _member(tmp_path, "units", "units", "hamming", "1/2"),
    ]
    s = program_summary(_program(tmp_path, members, "unit persons : hamming holds at most 1 units"))
    by = {r["spec"]: r for r in s["releases"]}
    # a household-level product: a change of one person changes one household record, as is
    assert by["households.dps"]["budget"]["rho"] == 2
    assert "is a change to one households" in by["households.dps"]["unit_steps"][0]["method"]
    # the housing unit: the composed unit holds one record of it
    assert by["units.dps"]["budget"]["rho"] == 0.5
    assert by["persons.dps"]["unit_steps"][0]["method"] == "the program's unit itself: as is"
    assert s["total"]["rho"] == pytest.approx(3.5)
    assert s["unit"]["description"].startswith("one person (change one)")
    assert all(r["unit_steps"] for r in s["releases"])  # a ledger line for every member


def test_household_unit_uses_group_privacy_with_the_declared_bound(tmp_path):
    """A person-level product under a household unit: at most 20 persons, zCDP rho x 20^2."""
    members = [
        _member(tmp_path, "persons", "persons", "hamming", "1/100"),
        _member(tmp_path, "households", "households", "hamming", "1"),
    ]
    s = program_summary(_program(tmp_path, members, "unit households : hamming"))
    persons = next(r for r in s["releases"] if r["spec"] == "persons.dps")
    assert persons["budget"]["rho"] == pytest.approx(float(Fraction(1, 100) * 400))
    assert persons["unit_steps"][0]["method"] == "group-20"
    assert s["total"]["rho"] == pytest.approx(5.0)
    # the program's own `holds` bound overrides the table's when tighter
    s = program_summary(_program(tmp_path, members, "unit households : hamming holds at most 4 persons"))
    assert s["total"]["rho"] == pytest.approx(1 + 16 / 100)


def test_relation_step_is_a_ledger_line(tmp_path):
    members = [_member(tmp_path, "persons", "persons", "symdiff", "1")]
    s = program_summary(_program(tmp_path, members, "unit persons : hamming"))
    [r] = s["releases"]
    assert [st["what"] for st in r["unit_steps"]] == ["relation"]
    assert r["budget"]["rho"] == pytest.approx(4.0)  # change one = two add/remove steps


def test_member_without_a_unit_relation_is_an_error_naming_it(tmp_path):
    members = [
        _member(tmp_path, "persons", "persons", "hamming", "1"),
        _member(tmp_path, "units", "units", "hamming", "1"),
    ]
    with pytest.raises(SpecError) as err:
        program_summary(_program(tmp_path, members, "unit persons : hamming"))
    text = str(err.value)
    assert "'units.dps' protects units records, which have no unit relation to the program's unit 'persons'" in text
    assert "holds at most K units" in text


def test_another_domain_is_refused_naming_the_member(tmp_path):
    other = DOMAIN.replace('domain census "one census', 'domain survey "a survey')
    members = [
        _member(tmp_path, "persons", "persons", "hamming", "1"),
        _member(tmp_path, "survey", "persons", "hamming", "1", domain=other),
    ]
    with pytest.raises(SpecError, match="'survey.dps' protects domain 'survey'.*not the program's 'census'"):
        program_summary(_program(tmp_path, members, "unit persons : hamming"))
    # without a composed unit the refusal is as before
    with pytest.raises(SpecError, match="different domains \\(census, survey\\): .*'survey.dps' protects 'survey'"):
        program_summary(_program(tmp_path, members, ""))


def test_unknown_program_unit_table(tmp_path):
    members = [_member(tmp_path, "persons", "persons", "hamming", "1")]
    with pytest.raises(SpecError, match="the program's unit 'people' is not a table of domain 'census'"):
        program_summary(_program(tmp_path, members, "unit people : hamming"))


def test_pl94_program_keeps_its_published_figure_with_the_composed_unit():
    s = program_summary(parse(read_source(PL94_PROGRAM), PL94_PROGRAM))
    exact = Fraction(542, 339) ** 2 + Fraction(3379, 12343) ** 2
    assert exact == Fraction(46066969010197, 17508174012729)
    assert s["total"]["rho"] == pytest.approx(float(exact))
    assert round(s["total"]["rho"], 2) == 2.63 and s["bounds_hold"]
    assert s["unit"]["table"] == "persons" and s["unit"]["holds"] == {"k": 1, "table": "units"}
    r = CliRunner().invoke(main, ["budget", PL94_PROGRAM])
    assert r.exit_code == 0, r.output
    assert "unit: one person (change one), with at most 1 housing_unit record(s) of table units" in r.output
    assert "for the program's unit: zcdp: rho = 0.0749" in r.output
    data = json.loads(CliRunner().invoke(main, ["budget", "--json", PL94_PROGRAM]).output)
    assert {"spec", "budget", "unit_steps", "own_budget"} <= set(data["releases"][0])
