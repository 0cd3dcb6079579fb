"""`dpspec audit`: findings on a spec without running its mechanism, optionally against a
baseline spec, as text, JSON or report files.

The audit also runs on specs that fail their check (an undeclared invariant is exactly what it
must report), so only a file that does not parse is an error here.
"""

from __future__ import annotations

import json
import os

from dpspec.cli.terminal import echo
from dpspec.language.parser import parse, read_source
from dpspec.publish.input_guard import check_output_target, input_paths
from dpspec.publish.report_set import file_entry, spec_entry, write_report_set
from dpspec.report import render_all
from dpspec.audit import audit, all_rules
from dpspec.schemas import versioned, legacy_list
from dpspec.report.sarif import audit_log
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_finding = LazyModule("dpspec.verify.finding", "_finding", globals())


def _load(path):
    return parse(read_source(path), path)


def _check_outdir(outdir: str, spec, others: list) -> None:
    """The audit's report files never land beside an input, nor over a compile's output set."""
    check_output_target(outdir, input_paths(spec) + others)
    _output_set.refuse_release_folder(
        outdir, "audit", itself=False
    )  # never a set inside another set; the folder itself: claimed_target


def _write_set(outdir: str, spec, baseline, verify_file: str | None, outcome) -> None:
    """The reports and a manifest naming the spec, baseline and verification they audit, as one set."""

    fields = {
        "spec": spec_entry(spec),
        "baseline": spec_entry(baseline) if baseline is not None else None,
        "verification": file_entry(verify_file) if verify_file else None,
    }
    write_report_set(outdir, "audit", render_all(spec=spec, baseline=baseline, outcome=outcome), fields)


LIST_DEPRECATED = (
    "warning: DeprecationWarning: --format json-list prints findings format 1.0 (a bare list), "
    "kept for one format version; use --json (findings format 2.0: an object whose `findings` key "
    "holds the list, beside `format_version`). json-list goes with findings format 3.0."
)


def run_audit_command(
    path: str, baseline_path: str | None, outdir: str | None, output_format: str, verify_file: str | None = None
) -> int:
    """Audit and print the findings as `output_format`: "text", "json", "json-list" (deprecated) or "sarif"."""
    spec = _load(path)
    baseline = _load(baseline_path) if baseline_path else None
    if outdir:
        _check_outdir(outdir, spec, [p for p in (baseline_path, verify_file) if p])
    with _output_set.claimed_target(
        outdir, "audit"
    ):  # locked for the whole run; the set is swapped in whole at the end
        outcome = audit(spec, baseline=baseline)
        if verify_file:  # a `dpspec verify --json` result becomes a finding
            outcome = _finding.with_finding(outcome, _finding.load_for(verify_file, spec))
        if outdir:
            _write_set(outdir, spec, baseline, verify_file, outcome)
    if output_format == "json":
        echo(json.dumps(versioned("findings", outcome.to_json()), indent=2))
    elif output_format == "json-list":
        echo(LIST_DEPRECATED, err=True)
        echo(json.dumps(legacy_list("findings", "1.0", [f.to_json() for f in outcome.findings]), indent=2))
    elif output_format == "sarif":
        echo(json.dumps(audit_log(spec, outcome.findings, all_rules()), indent=2))
    else:
        _print_text(spec, outcome, outdir)
    return 1 if any(f.severity == "critical" for f in outcome.findings) else 0


def _print_text(spec, outcome, outdir):
    echo(
        f"audit of {os.path.basename(spec.path or 'spec')}: {spec.title or (spec.program.title if spec.program is not None else None) or '(untitled)'}"
    )
    echo(outcome.text())
    if outdir:
        echo(f"wrote the audit report to {outdir}")
