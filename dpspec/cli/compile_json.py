"""`dpspec compile --json`: one JSON document (format `compile`) saying what a compile wrote.

Why: a pipeline that runs a mechanism needs the output set's files, the budget the run spent and
what it was warned about without reading the human lines; a failure is the `error` document
every `--json` command prints (`dpspec.cli.errors`), with the same exit code. The budget block
is the one the compile's report.json carries (report.model.budget_block), not a second account.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from dpspec.budget.budget_text import budget_line
from dpspec.report.bidi import neutral
from dpspec.report.model import budget_block

REPORT_KINDS = ("html", "markdown", "json", "internal_html", "internal_markdown")


def files_written(outdir: str, written: dict) -> list[dict]:
    """Every file of the output set as `compile` prints it: releases (name, rows), reports, manifest, certificate."""
    files = [
        {"kind": "release", "name": name, "path": os.path.join(outdir, info["file"]), "rows": info["rows"]}
        for name, info in written["outputs"].items()
    ]
    files += [
        {"kind": f"report_{kind}", "path": os.path.join(outdir, written[kind])}
        for kind in REPORT_KINDS
        if kind in written
    ]
    files.append({"kind": "manifest", "path": os.path.join(outdir, written["manifest"])})
    if "certificate" in written:  # additive (compile 1.1)
        files.append({"kind": "certificate", "path": os.path.join(outdir, written["certificate"])})
    return files


def compile_document(path: str, outdir: str, result, written: dict, notes: list[str], exit_code: int) -> dict:
    """The `compile` document (unversioned: the caller stamps it, `dpspec.schemas.versioned`)."""

    ledger = result.ledger
    return {
        "command": "compile",
        "spec": {"path": path, "title": result.spec.title},
        "mechanism": {"name": result.mechanism.name, "version": result.mechanism.version},
        "output_directory": outdir,
        "files": files_written(outdir, written),
        "budget_line": budget_line(ledger.declared.to_json()) if ledger.declared is not None else None,
        "budget": neutral(budget_block(result.spec, result.audit_outcome)),
        "seed": result.seed,
        "warnings": list(notes),
        "findings": [{"rule": f.rule, "severity": f.severity, "message": f.message} for f in result.findings],
        "allowed_critical": list(result.allowed_critical),  # additive (compile 1.1): passed by --allow-critical
        "exit_code": exit_code,
    }


@contextlib.contextmanager
def shown_warnings(into: list[str]):
    """Record each Python warning shown while the block runs (as `Category: message`), still shown
    on stderr as before: the filters that decide which are shown are untouched."""
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        into.append(f"{category.__name__}: {message}")
        original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield into
    finally:
        warnings.showwarning = original


@contextlib.contextmanager
def native_stdout_to_stderr(active: bool):
    """While active, file descriptor 1 is stderr: what native code writes there during a compile
    (HiGHS's banner, a JVM, a worker process started meanwhile) cannot come before the JSON
    document, which is printed after the block, when stdout is itself again. Python's own
    sys.stdout is left alone (a test harness may have replaced it)."""
    if not active:
        yield
        return
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no file descriptor 1 to keep clean
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)
