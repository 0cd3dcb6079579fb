"""The typed answers of a mechanism's optional hooks (API 1.7), and the one reader of each.

`Mechanism.power`, `budget_breakdown`, `expected_error` and `compared_counts` return these frozen
classes (`semantics` the family in `dpspec.contract.semantics`). Each class states the fields the
core reads, and `ir.to_jsonable` writes it as the dict it replaces was written, key for key, so
no JSON output moves. Each reader (`power_result`, ...) hands the core the typed answer and still
reads the dict or list of dicts of API 1.6 and earlier, with a DeprecationWarning naming the class
to return, until plugin API 2.0.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs

from dpspec import ir
from dpspec.errors import MechanismError


def _name(mechanism) -> str:
    return getattr(mechanism, "name", "?")


def warn_old_shape(mechanism, hook: str, shape: str, replacement: str) -> None:
    """The deprecation of an answer in the shape of an older API, naming what to return instead."""
    warnings.warn(
        f"mechanism '{_name(mechanism)}': {hook} returning {shape} is deprecated (removed in plugin API 2.0); "
        f"return {replacement}",
        DeprecationWarning,
        stacklevel=3,
    )


def from_dict(cls, value: dict, mechanism, hook: str):
    """`cls` built from the dict an older plugin returned: its fields by name (one the dict lacks
    takes its default; a required one missing is the mechanism's error), and every other key in
    the class's inline field (`extra`), when it has one, in the dict's order."""
    fields = {f.name: f for f in attrs.fields(cls)}
    inline = next((f.name for f in fields.values() if f.metadata.get("json") == "inline"), None)
    known = {k: v for k, v in value.items() if k in fields and k != inline}
    missing = [n for n, f in fields.items() if f.default is attrs.NOTHING and n != inline and n not in known]
    if missing:
        raise MechanismError(
            f"mechanism '{_name(mechanism)}': {hook}'s answer has no {', '.join(repr(m) for m in missing)}"
        )
    if inline is not None:
        known[inline] = {k: v for k, v in value.items() if k not in fields or k == inline}
    return cls(**known)


def wrong_answer(mechanism, hook: str, value, wanted: str) -> MechanismError:
    """The error of a hook that answered neither the class nor the older shape."""
    return MechanismError(f"mechanism '{_name(mechanism)}': {hook} returned {type(value).__name__}, not {wanted}")


def _optional(**kwargs):
    return attrs.field(default=None, metadata=ir.JSON_OPTIONAL, **kwargs)


def extra_field():
    """A field holding further keys a plugin names itself, written in its place in the JSON."""
    return attrs.field(factory=dict, converter=dict, metadata=ir.JSON_INLINE)


# ---- dpspec infer --power -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Power:
    """Seed 2's Theorem 15 on one released cell (`Mechanism.power`, `dpspec infer --power`): the
    power at count `alternative` of the level-`level` test of the cell's count `null`, on the
    release (`*_release`) and on the release post-processed with Z (`*_post_processed`, by
    `post_processing`, the words saying how), with the values the two tests saw (`released`,
    `post_processed_value`) and a `note`. Optional: the cell's `column`, the test's `direction`
    ("greater" or "less"), the noise `rate`, the public `total` and each test's probability of
    rejecting what it saw; `extra`, further keys the inference JSON keeps after these."""

    null: int
    alternative: int
    level: float
    rate: float | None = _optional()
    total: int | None = _optional()
    direction: str | None = _optional()
    power_release: float
    power_post_processed: float
    size_release: float
    size_post_processed: float
    cell: str
    column: str | None = _optional()
    released: int
    post_processed_value: int
    reject_probability_release: float | None = _optional()
    reject_probability_post_processed: float | None = _optional()
    post_processing: str
    note: str
    extra: dict = extra_field()


def power_result(value, mechanism) -> Power | None:
    """`Mechanism.power`'s answer as a `Power` (the dict of API 1.4 to 1.6 read with a warning)."""
    if value is None or isinstance(value, Power):
        return value
    if not isinstance(value, dict):
        raise wrong_answer(mechanism, "power", value, "a dpspec.api.Power")
    warn_old_shape(mechanism, "power", "a dict", "dpspec.api.Power(null=, alternative=, level=, ...)")
    return from_dict(Power, value, mechanism, "power")


# ---- dpspec budget --json -----------------------------------------------------------------


@attrs.frozen
class BudgetBreakdown:
    """How a mechanism splits its budget (`Mechanism.budget_breakdown`), from the spec alone:
    `figures`, {key: JSON-ready value}, each key one more key of `dpspec budget --json`. The keys
    and their meaning are the mechanism's: the core names none of them."""

    figures: dict = extra_field()


def budget_breakdown_result(value, mechanism) -> BudgetBreakdown:
    """`Mechanism.budget_breakdown`'s answer as a `BudgetBreakdown` (a dict read with a warning)."""
    if isinstance(value, BudgetBreakdown):
        return value
    if value is None:
        return BudgetBreakdown()
    if not isinstance(value, dict):
        raise wrong_answer(mechanism, "budget_breakdown", value, "a dpspec.api.BudgetBreakdown")
    warn_old_shape(mechanism, "budget_breakdown", "a dict", "dpspec.api.BudgetBreakdown({key: figures})")
    return BudgetBreakdown(value)


# ---- dpspec sweep -------------------------------------------------------------------------


@attrs.frozen
class ExpectedError:
    """The error a mechanism promises for one released figure from public parameters alone
    (`Mechanism.expected_error`, `dpspec sweep`'s public report): per (`table`, `level` or None,
    `query`), the `variance` of the figure `of` names ("noisy measurement", "estimated
    proportion")."""

    table: str
    level: str | None
    query: str
    variance: float
    of: str


@attrs.frozen
class ComparedCounts:
    """One table of released counts beside the confidential ones (`Mechanism.compared_counts`,
    `dpspec sweep --runs`, internal only): `truth` and `released`, pandas Series indexed by cell,
    for `table` at geography `level` (or None)."""

    table: str
    level: str | None
    truth: Any
    released: Any


def _rows(value, mechanism, hook: str, cls, replacement: str) -> list | None:
    """A list hook's answer as a list of `cls`, dicts among it read with one warning."""
    if value is None:
        return None
    if isinstance(value, (dict, str)) or not hasattr(value, "__iter__"):
        raise wrong_answer(mechanism, hook, value, f"a list of dpspec.api.{cls.__name__}")
    rows = list(value)
    if any(isinstance(r, dict) for r in rows):
        warn_old_shape(mechanism, hook, "dicts", replacement)
    # an older dict could leave out its level (the core read it with .get)
    return [from_dict(cls, {"level": None, **r}, mechanism, hook) if isinstance(r, dict) else r for r in rows]


def expected_error_result(value, mechanism) -> list[ExpectedError] | None:
    """`Mechanism.expected_error`'s answer as `ExpectedError`s (dicts read with a warning)."""
    return _rows(
        value, mechanism, "expected_error", ExpectedError, "dpspec.api.ExpectedError(table, level, query, variance, of)"
    )


def compared_counts_result(value, mechanism) -> list[ComparedCounts] | None:
    """`Mechanism.compared_counts`'s answer as `ComparedCounts` (dicts read with a warning)."""
    return _rows(
        value, mechanism, "compared_counts", ComparedCounts, "dpspec.api.ComparedCounts(table, level, truth, released)"
    )
