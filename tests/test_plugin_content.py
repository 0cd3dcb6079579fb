"""Plugins own their content: the report's core knows no key or word that only one plugin produces;
a mechanism's budget section comes from its plugin's `dpspec_report_budget` hook, rendered by the
core from the plugin's templates without knowing its keys."""

from __future__ import annotations

import json
import os
import re
import types

import pytest

from dpspec.api import BudgetSection, hookimpl
from dpspec.contract import plugins
from dpspec.check.checker import check
from dpspec.language.parser import parse, read_source
from dpspec.report import render_all
from tests.conftest import SMALL_SPEC

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TopDown's breakdown and its words: they live in plugins/dpspec_topdown/release/budget_section.py
TOPDOWN_ONLY = re.compile(r"\b(spine|bypass|aian|geounits?|allocation)\b", re.IGNORECASE)


def _core_report_files():
    for folder in ("dpspec/report", "dpspec/templates"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith((".py", ".j2")):
                yield os.path.join(folder, name)


def test_no_core_report_file_names_a_key_or_word_only_topdown_produces():
    found = []
    for rel in _core_report_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            found += [f"{rel}:{n}: {m.group()}" for n, line in enumerate(fh, 1) for m in TOPDOWN_ONLY.finditer(line)]
    assert found == []


# TopDown's further semantics row (a move across the AIAN line): its key and its words are the
# plugin's (plugins/dpspec_topdown/semantics.py); the core renders any further row as data
ACROSS_THE_SPLIT = re.compile(r"across_split|describe_across|\bAIAN\b|non-AIAN", re.IGNORECASE)
# the DAS importer translates the Census Bureau's own configuration into a TopDown spec: its
# words are the configuration's (`target_das_aian_areas`), not a report's
IMPORTERS = os.path.join("dpspec", "importers")


def _core_files():
    for folder, _, names in os.walk(os.path.join(ROOT, "dpspec")):
        rel = os.path.relpath(folder, ROOT)
        if rel == IMPORTERS or rel.startswith(IMPORTERS + os.sep):
            continue
        yield from (os.path.join(rel, n) for n in sorted(names) if n.endswith((".py", ".j2")))


def _scan(rel, pattern):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
        return [f"{rel}:{n}: {m.group()}" for n, line in enumerate(fh, 1) for m in pattern.finditer(line)]


def test_no_core_file_holds_topdowns_across_the_split_row_or_its_aian_words():
    assert [hit for rel in _core_files() for hit in _scan(rel, ACROSS_THE_SPLIT)] == []


def test_the_across_the_split_scan_finds_the_row_where_topdown_writes_it():
    """The control: the pattern finds TopDown's key and words in its own semantics module, and
    the walk does read the core's budget and template files."""
    rel = os.path.join("plugins", "dpspec_topdown", "semantics.py")
    assert {m.split(": ")[-1].lower() for m in _scan(rel, ACROSS_THE_SPLIT)} >= {"across_split", "aian", "non-aian"}
    walked = set(_core_files())
    assert os.path.join("dpspec", "budget", "semantics.py") in walked
    assert os.path.join("dpspec", "templates", "report.md.j2") in walked


def test_a_further_semantics_row_is_rendered_from_the_words_its_mechanism_gives():
    """The core renders a mechanism's further row by its data alone (here TopDown's, on the AIAN
    spine of the bundled DHC persons spec): the description in both reports is the hook's."""
    path = os.path.join(ROOT, "specs", "dhc_persons_production_topdown.dps")
    spec = parse(read_source(path), path)
    checked = check(spec)
    row = checked.mechanism.semantics(spec, checked.params).further["across_split"]
    out = render_all(spec=spec)
    assert f"| {row.description} |" in out["markdown"][1]
    assert f"<td>{row.description}</td>" in out["html"][1].replace("&#39;", "'")
    assert json.loads(out["json"][1])["budget"]["semantics"]["across_split"]["description"] == row.description


def test_the_scan_finds_a_topdown_key_where_one_is_written():
    """The control: the same pattern finds the words in TopDown's own section."""
    with open(os.path.join(ROOT, "plugins", "dpspec_topdown", "release", "budget_section.py"), encoding="utf-8") as fh:
        text = fh.read()
    assert {m.group().lower() for m in TOPDOWN_ONLY.finditer(text)} >= {"spine", "bypass", "aian", "allocation"}


class _Budgeted:
    """A plugin that says how randomized response spends its budget, with a value that needs escaping."""

    @hookimpl
    def dpspec_report_budget(self, spec, mechanism, params):
        if mechanism.name != "randomized_response":
            return None
        return BudgetSection(
            data={"who": "<every *unit*>", "p": params["p"]},
            markdown="### How it is spent\n\n{{ d.who }} answers with p = {{ d.p }}.\n\n",
            html="<h3>How it is spent</h3>\n<p>{{ d.who }} answers with p = {{ d.p }}.</p>\n",
        )


@pytest.fixture
def budgeted():
    plugin = _Budgeted()
    pm = plugins.manager()
    pm.register(plugin, name="test-budget-section")
    try:
        yield
    finally:
        pm.unregister(plugin)


def _reports():
    out = render_all(spec=parse(SMALL_SPEC, "small.dps"))
    return out["markdown"][1], out["html"][1], json.loads(out["json"][1])


def test_a_plugins_budget_section_is_rendered_inside_the_budget_section_and_its_data_is_budget_spending(budgeted):
    md, html, data = _reports()
    assert data["budget"]["spending"] == {"who": "<every *unit*>", "p": 0.75}  # JSON-ready, as a Section's data
    assert "_templates" not in data  # the templates are the renderers', not report.json's
    assert "### How it is spent\n\n&lt;every \\*unit\\*&gt; answers with p = 0.75.\n\n### Ledger" in md
    assert '<p>&lt;every *unit*&gt; answers with p = 0.75.</p>\n<h3 id="ledger">' in html
    assert md.index("### How it is spent") > md.index("## Budget")


def test_without_a_budget_section_the_report_has_none():
    md, html, data = _reports()
    assert data["budget"]["spending"] is None and "How it is spent" not in md


def test_a_budget_section_that_would_run_a_script_is_withheld():
    scripted = types.SimpleNamespace(
        dpspec_report_budget=hookimpl(
            lambda spec, mechanism, params: BudgetSection(
                data={}, markdown="<script>alert(1)</script>\n\n", html="<script>alert(1)</script>\n"
            )
        )
    )
    pm = plugins.manager()
    pm.register(scripted, name="test-scripted-budget")
    try:
        md, html, _ = _reports()
    finally:
        pm.unregister(scripted)
    assert "<script>alert" not in html and "<script>alert" not in md
    assert "budget section was withheld" in html and "budget section was withheld" in md


def test_a_failing_budget_hook_gives_a_section_saying_so_not_a_lost_report():
    broken = types.SimpleNamespace(dpspec_report_budget=hookimpl(lambda spec, mechanism, params: 1 / 0))
    pm = plugins.manager()
    pm.register(broken, name="test-broken-budget")
    try:
        md, _, data = _reports()
    finally:
        pm.unregister(broken)
    assert "ZeroDivisionError" in data["budget"]["spending"]["error"] and "ZeroDivisionError" in md


def test_the_report_model_renders_what_the_budget_and_audit_stages_computed():
    """No program is loaded and no budget converted in the report model: the audit's
    `program_account` hands it the composition, its budgets in words and the composed multiverse."""
    import ast

    with open(os.path.join(ROOT, "dpspec", "report", "model.py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    names = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    assert not names & {"load_program", "program_summary", "budget_from_params", "convert", "program_ledger"}
