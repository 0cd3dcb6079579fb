"""Reports for oversight bodies: one model, three forms (HTML, Markdown, JSON), two audiences.

`render_all(result)` returns every file to write. The public forms always exist; the internal
forms exist only when the result carries utility figures (computed against the confidential
data), which never enter the public ones. Plugins add sections by returning `Section` objects
from the `dpspec_report_sections` hook.
"""

from __future__ import annotations

from dpspec.audit import audit
from dpspec.contract import Section  # noqa: F401 - re-exported: the contract owns it
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_model = LazyModule("dpspec.report.model", "_model", globals())

# imported on first use: at import they would load jinja2, markupsafe with this module
_render = LazyModule("dpspec.report.render", "_render", globals())

FILENAMES = {
    "html": "report.html",
    "markdown": "report.md",
    "json": "report.json",
    "internal_html": "internal-report.html",
    "internal_markdown": "internal-report.md",
}


def render_all(result=None, *, spec=None, baseline=None, outcome=None) -> dict[str, tuple[str, str]]:
    """{kind: (filename, text)} for a compiled `result` (or a `spec` alone, for an audit report).

    kinds: html, markdown, json, and internal_html / internal_markdown when `result.utility` is
    non-empty. `baseline` (a Spec or a Result) adds the comparison table."""
    spec = spec if spec is not None else result.spec
    if outcome is None:
        outcome = audit(spec, result, baseline)
    public = _model.build_model(result, spec=spec, audience="public", outcome=outcome)
    out = {
        "html": (FILENAMES["html"], _render.render_html(public)),
        "markdown": (FILENAMES["markdown"], _render.render_markdown(public)),
        "json": (FILENAMES["json"], _render.render_json(public)),
    }
    if result is not None and result.utility:
        internal = _model.build_model(result, spec=spec, audience="internal", outcome=outcome)
        out["internal_html"] = (FILENAMES["internal_html"], _render.render_html(internal))
        out["internal_markdown"] = (FILENAMES["internal_markdown"], _render.render_markdown(internal))
    return out


__all__ = ["FILENAMES", "Section", "render_all"]
