"""Reports in Jupyter: the `_repr_html_` of results, audits, budgets and inference results.

Each shows the very HTML report dpspec writes to disk (same templates, same escaping, same
Content-Security-Policy), inside a sandboxed `<iframe srcdoc>`: the report's stylesheet cannot
restyle the notebook, nothing in it can run (the sandbox allows no scripts), and it loads
nothing from the network (its CSP allows only inline styles and data: images). Display only:
no stage of the pipeline calls this module; importing it (the top-level verbs do) attaches the
methods to the classes below, which know nothing of reports.
"""

from __future__ import annotations

from markupsafe import escape
from dpspec.report import render_all
from dpspec.audit import audit, Audit, Findings
from dpspec.budget.budget_report import BudgetSummary
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow, jinja2 with this module
_report = LazyModule("dpspec.inference.report", "_report", globals())
_inference = LazyModule("dpspec.inference", "_inference", globals())
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())

HEIGHT = 640  # px: a report scrolls inside its frame rather than lengthening the notebook


def framed(report_html: str, title: str) -> str:
    """A whole HTML document as a sandboxed frame (the document escaped into `srcdoc`)."""
    return (
        f'<iframe sandbox="" referrerpolicy="no-referrer" title="{escape(title)}" '
        f'style="width: 100%; height: {HEIGHT}px; border: 1px solid #ccc" srcdoc="{escape(report_html)}"></iframe>'
    )


def result_html(result) -> str:
    """A compiled result's public report (`report.html` of `dpspec compile`)."""

    html = render_all(result, outcome=result.audit_outcome)["html"][1]
    return framed(html, f"dpspec report: {result.spec.title or 'spec'}")


def audit_html(outcome) -> str:
    """An audit's report (`report.html` of `dpspec audit -o`), with its baseline comparison."""

    ctx = outcome.context
    if ctx is None:  # an outcome assembled by hand: no spec to report on
        return f"<pre>{escape(repr(outcome))}</pre>"
    baseline = ctx.baseline_result if ctx.baseline_result is not None else ctx.baseline
    html = render_all(ctx.result, spec=ctx.spec, baseline=baseline, outcome=outcome)["html"][1]
    return framed(html, f"dpspec audit: {ctx.spec.title or 'spec'}")


def spec_html(spec) -> str:
    """A spec's report without running its mechanism: its budget, in every currency, with the
    audit (what `dpspec audit -o` writes)."""

    return audit_html(audit(spec))


def infer_html(result) -> str:
    """An inference result's report (`report.html` of `dpspec infer -o`)."""
    html = _report.report_files(result, with_draws=False)["html"][1]
    return framed(html, f"dpspec inference: {result.target}")


def install() -> None:
    """Attach the `_repr_html_` methods (importing this module does; the top-level verbs call it)."""
    _compiler.Result._repr_html_ = result_html
    Audit._repr_html_ = audit_html
    Findings._repr_html_ = lambda findings: (
        audit_html(findings.outcome) if findings.outcome is not None else (f"<pre>{escape(repr(list(findings)))}</pre>")
    )
    BudgetSummary._repr_html_ = lambda summary: spec_html(summary.spec)
    _inference.InferResult._repr_html_ = infer_html


install()
