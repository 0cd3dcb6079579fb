"""The audit: privacy-theatrics rules run over a spec, its budget account and a baseline.

Rules come from every plugin's `dpspec_audit_rules` hook (the built-in ones are a plugin like
any other). A rule that needs a baseline or a budget account is skipped, and listed as
skipped, when there is none: an oversight body should know which checks did not run.
"""

from __future__ import annotations

import attrs

from dpspec import ir
from dpspec.audit import builtin_rules
from dpspec.audit.base import SEVERITIES, SEVERITY_RANK, Finding, Rule, by_severity, jsonable
from dpspec.audit.context import Account, AuditContext, SoftCheck, build_context
from dpspec.budget import budget_from_params
from dpspec.contract import plugins
from dpspec.errors import DpspecError
from dpspec.lazy import LazyModule
from dpspec.verbs import make_callable

# imported on first use: `dpspec --help` loads this module, not them
_program = LazyModule("dpspec.budget.program", "_program", globals())
_plain_words = LazyModule("dpspec.audit.plain_words", "_plain_words", globals())


class RuleConflict(Exception):
    """Two plugins register audit rules with the same id."""


def all_rules() -> list[Rule]:
    """Every registered rule, built-in ones included even when the package is not installed
    (running from a source tree registers no entry points)."""
    pm = plugins.manager()
    if not pm.is_registered(builtin_rules) and pm.get_plugin("audit") is None:
        pm.register(builtin_rules, name="audit")
    rules: dict[str, Rule] = {}
    for r in plugins.audit_rules():
        if r.id in rules and rules[r.id] is not r:
            raise RuleConflict(f"two plugins register an audit rule with id '{r.id}'")
        rules[r.id] = r
    return list(rules.values())


@attrs.frozen
class ProgramAccount:
    """A program as the budget stage composed it, for the reports to lay out (they compute nothing):
    summary: `program_summary` ({"problem": why} when it cannot be composed); words: its budgets
    in words (`dpspec.budget.program.summary_words`), total: the composed budget, both None when
    it cannot be composed; invariants: every member's invariants, None when they do not load."""

    summary: dict
    words: dict | None = None
    total: object = None
    invariants: tuple | None = None


@attrs.frozen
class Audit:
    """The outcome of an audit: findings (most severe first), what ran, what was skipped."""

    findings: tuple[Finding, ...]
    rules_run: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (rule id, why)
    comparison: object | None = None
    check_problems: tuple[str, ...] = ()
    account_problem: str | None = None
    context: AuditContext | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def worst(self) -> str | None:
        return self.findings[0].severity if self.findings else None

    def program_summary(self) -> dict | None:
        """A program's members, composed total and bounds (`dpspec budget` on the program), or
        {"problem": why} when it cannot be composed; None for a single spec."""
        spec = self.context.spec if self.context is not None else None
        if spec is None or spec.program is None:
            return None
        try:
            return _program.program_summary(spec)
        except DpspecError as exc:
            return {"problem": str(exc)}

    def program_account(self) -> "ProgramAccount | None":
        """What the reports lay out of a program (`program_summary`, its budgets in words, the
        composed total as a budget, the composed multiverse); None for a single spec."""
        summary = self.program_summary()
        if summary is None:
            return None

        composed = summary.get("problem") is None
        return ProgramAccount(
            summary,
            _program.summary_words(summary) if composed else None,
            budget_from_params(dict(jsonable(summary["total"]))) if composed else None,
            _program.composed_invariants(self.context.spec),
        )

    def plain_words(self) -> dict:
        """The achieved budget read as what an attacker can learn (see `dpspec.audit.plain_words`)."""
        ctx = self.context
        if ctx is None:  # an outcome rebuilt without its context (never from run_rules)
            return {"available": False, "rows": [], "problem": "the audit kept no context to read the budget from"}
        return _plain_words.plain_words(ctx.spec, ctx.ledger, ctx.result, ctx.account)

    def text(self) -> str:
        """Plain text for a terminal: findings, the comparison table, the rules not run."""
        lines = []
        if self.check_problems:
            lines.append("the spec does not pass the check (audited anyway):")
            lines += [f"  {p}" for p in self.check_problems]
        for f in self.findings:
            lines.append(f"[{f.severity}] {f.rule}: {f.message}")
        if not self.findings:
            lines.append("no findings")
        if self.comparison is not None:
            lines.append("")
            lines.append(f"against the baseline '{self.comparison.baseline_title}':")
            for r in self.comparison.rows:
                lines.append(f"  {r.block:<10} {r.verdict:<12} {r.reason}")
        for rule, why in self.skipped:
            lines.append(f"not run: {rule} ({why})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "findings": [f.to_json() for f in self.findings],
            "rules_run": list(self.rules_run),
            "skipped": [{"rule": r, "reason": why} for r, why in self.skipped],
            "comparison": self.comparison.to_json() if self.comparison is not None else None,
            "check_problems": list(self.check_problems),
            "account_problem": self.account_problem,
        }


def audit(
    spec: ir.Spec | None = None,
    result=None,
    baseline=None,
    *,
    compute_budget: bool = True,
    rules: list[Rule] | None = None,
) -> Audit:
    """Run every rule. `baseline` is a Spec or a compiled Result. Without a `result`, the budget
    account is computed from the data's public facts when the spec checks (`compute_budget`)."""
    ctx = build_context(spec if spec is not None else result.spec, result, baseline, compute_budget)
    return run_rules(ctx, rules)


def run_rules(ctx: AuditContext, rules: list[Rule] | None = None) -> Audit:
    """Run the rules over an assembled context, skipping (and listing) those it cannot serve."""
    findings, ran, skipped = [], [], []
    for r in rules if rules is not None else all_rules():
        if r.needs_baseline and ctx.baseline is None:
            skipped.append((r.id, "needs a baseline spec"))
            continue
        if r.needs_result and not ctx.has_account:
            why = (
                ctx.account.problem
                if ctx.account is not None and ctx.account.problem
                else "needs the budget account (the spec must check and its data must be readable)"
            )
            skipped.append((r.id, why))
            continue
        findings.extend(r.check(ctx))
        ran.append(r.id)
    problems = tuple(d.message for d in ctx.checked.problems) if ctx.checked else ()
    return Audit(
        tuple(by_severity(findings)),
        tuple(ran),
        tuple(skipped),
        ctx.comparison,
        problems,
        ctx.account.problem if ctx.account is not None else None,
        ctx,
    )


class Findings(list):
    """The findings of an audit, most severe first: a list, which also keeps the whole `outcome`
    (a notebook shows its report: dpspec.notebook)."""

    def __init__(self, findings, outcome: Audit | None = None):
        super().__init__(findings)
        self.outcome = outcome


def run_audit(spec, result=None, baseline=None, **kwargs) -> list[Finding]:
    """The findings of `audit(...)`, most severe first (a `Findings` list)."""
    outcome = audit(spec, result, baseline, **kwargs)
    return Findings(outcome.findings, outcome)


make_callable(__name__, "audit")  # dpspec.verbs: `dpspec.audit(...)` after this subpackage is imported

__all__ = [
    "Audit",
    "AuditContext",
    "Account",
    "Finding",
    "Findings",
    "Rule",
    "RuleConflict",
    "SEVERITIES",
    "SEVERITY_RANK",
    "SoftCheck",
    "all_rules",
    "audit",
    "run_rules",
    "by_severity",
    "build_context",
    "jsonable",
    "run_audit",
]
