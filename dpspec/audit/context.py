"""What the rules read: the spec, a non-raising check of it, the budget account, the baseline.

`dpspec audit` must report on specs that fail the checker too (an undeclared invariant is the
checker's error and the audit's critical finding), so the check here never raises: it keeps
what it could resolve (mechanism, parameters, induced invariants) and the problems it found.
The budget account (facts, statement, ledger) comes from a compiled result when there is one;
otherwise it is computed without running the mechanism: the facts a budget depends on are
public functions of the invariants, so reading the data for them releases nothing.
"""

from __future__ import annotations

import attrs

from dpspec import ir
from dpspec.contract import plugins
from dpspec.errors import Diagnostic, DpspecError, SpecError
from dpspec.check.checker import check
from dpspec.contract.params import resolve_params
from dpspec.audit.compare import compare
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_spec_account = LazyModule("dpspec.budget.spec_account", "_spec_account", globals())


@attrs.frozen
class SoftCheck:
    """The checker's view of a spec, kept even when the spec fails the check."""

    spec: ir.Spec
    mechanism: object | None = None
    params: dict = attrs.field(factory=dict, eq=False)
    induced: tuple[ir.CountQuery, ...] = ()
    problems: tuple[Diagnostic, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.problems


@attrs.frozen
class Account:
    """The budget account the budget rules read: public facts, native statement, ledger."""

    facts: dict = attrs.field(factory=dict, eq=False)
    statement: object | None = None
    ledger: object | None = None
    problem: str | None = None  # why there is no account (data missing, no conversion...)


# Plugin code runs on specs that failed the check; these are the ways it may object.
_PLUGIN_FAILURES = (DpspecError, LookupError, TypeError, ValueError, AttributeError, ArithmeticError)


def soft_check(spec: ir.Spec) -> SoftCheck:
    """Check a spec; on failure keep the problems and whatever still resolves."""

    if spec.program is not None:
        return SoftCheck(spec)
    try:
        checked = check(spec)
        return SoftCheck(spec, checked.mechanism, dict(checked.params), tuple(checked.induced))
    except SpecError as exc:
        problems = tuple(exc.diagnostics)
    call = spec.mechanism
    mech = plugins.mechanisms().get(call.name) if call is not None else None
    if mech is None or spec.domain is None:
        return SoftCheck(spec, mech, {}, (), problems)
    try:
        params, param_problems = resolve_params(mech, call, spec)
        if param_problems:
            return SoftCheck(spec, mech, params, (), problems)
        induced = tuple(mech.induced_invariants(spec, params))
    except _PLUGIN_FAILURES:
        return SoftCheck(spec, mech, {}, (), problems)
    return SoftCheck(spec, mech, params, induced, problems)


def account_from_result(result) -> Account:
    facts = dict(getattr(result, "facts", {}) or {})
    return Account(facts, getattr(result, "statement", None), getattr(result, "ledger", None))


def compute_account(checked: SoftCheck) -> Account:
    """The budget account without running the mechanism (`dpspec budget`'s path: the data is read
    only when the mechanism's budget depends on public facts of it)."""

    if not checked.passed or checked.mechanism is None:
        return Account(problem="the spec does not pass the check, so its budget cannot be computed")
    try:
        _, facts, statement, _, ledger = _spec_account.spec_ledger(checked.spec)
    except _PLUGIN_FAILURES as exc:
        return Account(problem=f"the budget could not be computed: {exc}")
    return Account(dict(facts or {}), statement, ledger)


@attrs.define
class AuditContext:
    """Everything a rule may read. The `result` is a compiled `dpspec.run.compiler.Result` or None."""

    spec: ir.Spec
    checked: SoftCheck
    account: Account | None = None
    result: object | None = None
    baseline: ir.Spec | None = None
    baseline_checked: SoftCheck | None = None
    baseline_account: Account | None = None
    baseline_result: object | None = None
    _comparison: object | None = attrs.field(default=None, init=False)

    @property
    def has_account(self) -> bool:
        return self.account is not None and self.account.statement is not None

    @property
    def ledger(self):
        return self.account.ledger if self.account else None

    @property
    def statement(self):
        return self.account.statement if self.account else None

    @property
    def facts(self) -> dict:
        return self.account.facts if self.account else {}

    @property
    def comparison(self):
        """The block-by-block comparison with the baseline (computed once, on demand)."""
        if self.baseline is None:
            return None
        if self._comparison is None:
            self._comparison = compare(
                self.spec,
                self.baseline,
                self.result,
                self.baseline_result,
                account=self.account,
                baseline_account=self.baseline_account,
            )
        return self._comparison


def _as_spec_and_result(obj):
    """A baseline may be given as a Spec or as a compiled Result."""
    if obj is None:
        return None, None
    if isinstance(obj, ir.Spec):
        return obj, None
    return obj.spec, obj


def build_context(spec: ir.Spec, result=None, baseline=None, compute_budget: bool = True) -> AuditContext:
    """Assemble the context: soft checks, and budget accounts from results or computed."""
    if result is not None and spec is None:
        spec = result.spec
    checked = (
        soft_check(spec)
        if result is None
        else SoftCheck(spec, result.checked.mechanism, dict(result.checked.params), tuple(result.checked.induced))
    )
    if result is not None:
        account = account_from_result(result)
    elif spec.program is not None:
        account = Account(problem="a program has no mechanism of its own; its budget is the composition of its members")
    elif compute_budget and checked.passed:
        account = compute_account(checked)
    else:
        account = None
    base_spec, base_result = _as_spec_and_result(baseline)
    base_checked = base_account = None
    if base_spec is not None:
        if base_result is not None:
            base_checked = SoftCheck(
                base_spec,
                base_result.checked.mechanism,
                dict(base_result.checked.params),
                tuple(base_result.checked.induced),
            )
            base_account = account_from_result(base_result)
        else:
            base_checked = soft_check(base_spec)
            if compute_budget and base_checked.passed and base_spec.program is None:
                base_account = compute_account(base_checked)
    return AuditContext(spec, checked, account, result, base_spec, base_checked, base_account, base_result)
