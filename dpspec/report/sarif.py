"""Findings as SARIF 2.1.0, the format code-scanning tools read (`check`/`audit --format sarif`).

A reviewer sees a spec's problems where they see code findings: each result names its rule, a
level (critical -> error, warning -> warning, info -> note) and the line of the spec it is about.
A check diagnostic carries its own line; an audit finding is placed on the section of the spec
its rule judges (`SECTION`), or the file's first line when the rule is a plugin's unknown here.
"""

from __future__ import annotations

import os
import urllib.parse

from dpspec._version import __version__
from dpspec.audit.base import jsonable

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "note", "note": "note"}
# audit rule -> the IR fields it judges, first present wins
SECTION = {
    "narrower-domain": ("domain",),
    "added-invariants": ("invariants", "mechanism"),
    "fine-invariants": ("invariants",),
    "undeclared-invariants": ("invariants", "mechanism"),
    "public-information": ("public",),
    "finer-unit": ("unit",),
    "weaker-premetric": ("premetric",),
    "coarse-events": ("premetric",),
    "redenomination": ("budgets", "premetric"),
    "data-dependent-design": ("tuning", "mechanism"),
    "uncomposed-releases": ("program", "releases", "budgets"),
    "infinite-budget": ("mechanism",),
    "per-universe-budget": ("mechanism", "budgets"),
    "bound-not-met": ("budgets",),
    "known-seed": ("mechanism",),
    "empirical-verification": ("mechanism",),
}
# the rules of `dpspec check`: where a file failed
CHECK_RULES = {
    "parse-error": "The file cannot be read or parsed as a .dps spec",
    "check-error": "The spec breaks a rule of the language: names, types, ranges, parameters, invariants",
    "bound-exceeded": "A declared budget bound does not hold for the spec's mechanism (check --bounds)",
}


def artifact(path: str) -> dict:
    """A file as SARIF names it: relative to the working directory (%SRCROOT%), forward slashes."""
    rel = os.path.relpath(os.path.abspath(path)) if path else "spec"
    if rel.startswith(".."):  # outside the working tree: an absolute file URI
        return {"uri": "file://" + urllib.parse.quote(os.path.abspath(path).replace(os.sep, "/"))}
    return {"uri": urllib.parse.quote(rel.replace(os.sep, "/")), "uriBaseId": "%SRCROOT%"}


def location(path: str, line: int | None, column: int | None = None) -> dict:
    region = {"startLine": max(1, int(line or 1))}
    if column:
        region["startColumn"] = max(1, int(column))
    return {"physicalLocation": {"artifactLocation": artifact(path), "region": region}}


def section_line(spec, rule: str) -> tuple[int, int] | tuple[None, None]:
    """(line, column) of the spec section an audit rule judges."""
    for field in SECTION.get(rule, ()) + ("mechanism",):
        value = getattr(spec, field, None)
        node = value[0] if isinstance(value, tuple) and value else value
        loc = getattr(node, "loc", None)
        if loc is not None:
            return loc.line, loc.column
    return None, None


def result(rule_ids: list, rule: str, level: str, message: str, loc: dict, properties: dict | None = None) -> dict:
    out = {
        "ruleId": rule,
        "ruleIndex": rule_ids.index(rule),
        "level": level,
        "message": {"text": message},
        "locations": [loc],
    }
    if properties:
        out["properties"] = properties
    return out


def document(rules: list[dict], results: list[dict], success: bool = True) -> dict:
    """The SARIF log: one run of dpspec with its rules and results."""
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dpspec",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": "https://pypi.org/project/dpspec/",
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {
                    "%SRCROOT%": {"uri": "file://" + urllib.parse.quote(os.getcwd().replace(os.sep, "/")) + "/"}
                },
                "columnKind": "unicodeCodePoints",
                "invocations": [{"executionSuccessful": success}],
                "results": results,
            }
        ],
    }


def _rule(rule_id: str, title: str, severity: str, doc: str | None = None) -> dict:
    out = {
        "id": rule_id,
        "name": "".join(w.capitalize() for w in rule_id.replace("_", "-").split("-")),
        "shortDescription": {"text": title},
        "defaultConfiguration": {"level": LEVEL.get(severity, "warning")},
        "properties": {"severity": severity},
    }
    if doc:
        out["fullDescription"] = {"text": doc}
    return out


def check_log(failures: list[tuple[str, str, object]]) -> dict:
    """`dpspec check --format sarif`: (path, rule id in CHECK_RULES, SpecError or message) per failure."""
    ids = list(CHECK_RULES)
    rules = [_rule(i, t, "critical") for i, t in CHECK_RULES.items()]
    results = []
    for path, rule, error in failures:
        diagnostics = getattr(error, "diagnostics", None) or [None]
        for d in diagnostics:
            text = d.message + (f" ({d.hint})" if getattr(d, "hint", None) else "") if d is not None else str(error)
            level = LEVEL.get(getattr(d, "severity", "error"), "error")
            results.append(
                result(ids, rule, level, text, location(path, getattr(d, "line", None), getattr(d, "column", None)))
            )
    return document(rules, results)


def audit_log(spec, findings, rules) -> dict:
    """`dpspec audit --format sarif`: every finding on the line of the section its rule judges."""
    known = {r.id: r for r in rules}
    ids = list(dict.fromkeys([*known, *(f.rule for f in findings)]))
    sarif_rules = [
        _rule(i, known[i].title, known[i].severity, known[i].description) if i in known else _rule(i, i, "warning")
        for i in ids
    ]

    results = []
    for f in findings:
        line, column = section_line(spec, f.rule)
        results.append(
            result(
                ids,
                f.rule,
                LEVEL[f.severity],
                f.message,
                location(spec.path, line, column),
                {"severity": f.severity, "evidence": jsonable(f.evidence)},
            )
        )
    return document(sarif_rules, results)


def error_log(message: str, diagnostics=None, path: str | None = None) -> dict:
    """A command that failed before it had findings: its error as a result of the run, which is
    marked unsuccessful (the exit status says the same)."""
    log = (
        check_log([(path or "", "parse-error" if diagnostics else "check-error", _Failed(message, diagnostics))])
        if path
        else document([], [], success=False)
    )
    run = log["runs"][0]
    run["invocations"] = [
        {"executionSuccessful": False, "toolExecutionNotifications": [{"level": "error", "message": {"text": message}}]}
    ]
    return log


class _Failed:
    def __init__(self, message, diagnostics):
        self.message, self.diagnostics = message, diagnostics

    def __str__(self):
        return self.message
