"""Notebooks (issue 27 item 4): results, audits, budgets and inference results show as their HTML
reports (sandboxed, escaped, nothing fetched), and the bundled quick-start notebook runs."""

from __future__ import annotations

import os
import re
import sys

import pytest

import dpspec

pytestmark = pytest.mark.slow  # starts a notebook kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "docs", "notebooks", "quickstart.ipynb")


def frame_document(markup: str) -> str:
    """The report inside a frame, unescaped (as the browser reads `srcdoc`)."""
    import html

    m = re.fullmatch(
        r'<iframe sandbox="" referrerpolicy="no-referrer" title="[^"]*" style="[^"]*" srcdoc="([^"]*)"></iframe>',
        markup,
    )
    assert m, markup[:300]
    return html.unescape(m.group(1))


def assert_self_contained(document: str) -> None:
    from markupsafe import escape

    from dpspec.report.render import CSP

    assert f'http-equiv="Content-Security-Policy" content="{escape(CSP)}"' in document  # the files' own CSP
    assert "<script" not in document.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", document, re.I)  # nothing fetched
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", document, re.I)


def hostile(small_spec):
    """The small spec with markup in its title: shown as text, never as markup."""
    small_spec.write_text(small_spec.read_text().replace('spec "small"', 'spec "<img src=x onerror=alert(1)> & co"'))
    return dpspec.load(str(small_spec))


def test_a_compiled_result_shows_its_public_report(small_spec):
    from dpspec.report import render_all

    result = dpspec.compile(hostile(small_spec), seed=1)
    document = frame_document(result._repr_html_())
    assert document == render_all(result, outcome=result.audit_outcome)["html"][1]  # the report itself
    assert_self_contained(document)
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; co" in document and "<img src=x" not in document


def test_an_audit_shows_its_report_with_the_comparison(small_spec):
    spec = hostile(small_spec)
    baseline = dpspec.load(
        small_spec.read_text().replace("  count people\n", "  count people\n  count people by region\n")
    )
    findings = dpspec.audit(baseline, baseline=spec)
    assert isinstance(findings, list) and any(f.rule == "added-invariants" for f in findings)
    document = frame_document(findings._repr_html_())
    assert_self_contained(document)
    assert "added-invariants" in document and "baseline" in document.lower()
    from dpspec.audit import audit

    assert frame_document(audit(spec)._repr_html_()) == frame_document(dpspec.audit(spec)._repr_html_())


def test_a_budget_is_the_json_dict_and_shows_the_report(small_spec):
    import json

    from click.testing import CliRunner

    from dpspec.cli.main import main

    spec = hostile(small_spec)
    summary = dpspec.budget(spec)
    printed = json.loads(CliRunner().invoke(main, ["budget", "--json", str(small_spec)]).stdout)
    assert {"format_version": printed.pop("format_version"), **summary} == {"format_version": "1.1", **printed}
    document = frame_document(summary._repr_html_())
    assert_self_contained(document)
    assert "epsilon" in document and "&lt;img src=x" in document


def test_an_inference_result_shows_its_report(small_spec, tmp_path):
    from dpspec.publish.output import write_result

    spec = hostile(small_spec)
    release = tmp_path / "release"
    write_result(dpspec.compile(spec, seed=2), str(release))
    posterior = dpspec.infer(spec, str(release), "count people by smoker", draws=100, seed=1)
    document = frame_document(posterior._repr_html_())
    assert_self_contained(document)
    assert "count people by smoker" in document and "&lt;img src=x" in document


@pytest.mark.slow
def test_the_quickstart_notebook_runs_and_shows_the_reports(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import NATIVE_KERNEL_NAME

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")  # shipped clean
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name=NATIVE_KERNEL_NAME,
        resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}},
    )
    monkeypatch.setenv(
        "PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )  # this environment's kernel
    client.execute()
    shown = [
        o["data"]["text/html"]
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "execute_result" and "text/html" in o.get("data", {})
    ]
    assert len(shown) == 4  # budget, result, audit, inference
    for markup in shown:
        assert_self_contained(frame_document(markup))
    text = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "1940 Massachusetts" in text and "added-invariants" in text
