"""What an audit rule is and what it reports: `Rule`, `Finding`, and the JSON form of evidence.

Rules come from plugins (the built-in ones included) through the `dpspec_audit_rules` hook, so
a rule is plain data plus a `check(ctx)` function; it never raises on a spec it dislikes, it
reports a finding.
"""

from __future__ import annotations

from typing import Callable

import attrs

from dpspec import ir

SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def _severity(_instance, attribute, value):
    if value not in SEVERITIES:
        raise ValueError(f"{attribute.name} must be one of {', '.join(SEVERITIES)}, got {value!r}")


def jsonable(value):
    """Plain JSON data for evidence: `ir.to_jsonable` coercing any value, a NaN as null."""
    return ir.to_jsonable(value, coerce=True, nan="null")


@attrs.frozen
class Finding:
    """One instance of privacy theatrics (or a note about the guarantee), with its evidence."""

    rule: str
    severity: str = attrs.field(validator=_severity)
    message: str
    evidence: dict = attrs.field(factory=dict, eq=False, hash=False)

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "evidence": jsonable(self.evidence),
        }


@attrs.frozen
class Rule:
    """An audit rule.

    severity: the most severe finding the rule reports (a rule may report milder ones).
    needs_baseline: only meaningful against a `--baseline` spec. needs_result: reads the
    budget account (ledger, statement, facts), which exists only when the spec checks and its
    data can be read.
    """

    id: str
    severity: str = attrs.field(validator=_severity)
    title: str
    check: Callable = attrs.field(eq=False, repr=False)
    needs_baseline: bool = False
    needs_result: bool = False
    description: str = ""

    def finding(self, message: str, evidence: dict | None = None, severity: str | None = None) -> Finding:
        return Finding(self.id, severity or self.severity, message, dict(evidence or {}))

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "needs_baseline": self.needs_baseline,
            "needs_result": self.needs_result,
            "description": self.description,
        }


def by_severity(findings) -> list[Finding]:
    """Most severe first; within a severity, by rule id, then message (stable across runs)."""
    return sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], f.rule, f.message))
