"""Audit rules for deployments known by what their curators published (registry entries).

A spec imported from an OpenDP Deployments Registry entry states its budget instead of deriving
it (mechanism `declared`) and carries the entry's prose as notes. An oversight body must be told
which parts of such a spec are a claim and which prose dpspec could not turn into formal blocks;
and, since real entries often protect a unit finer than a person (an event, a user-day), what
that unit means for one person who contributes many of them.
"""

from __future__ import annotations

import re

from dpspec.audit.base import Rule
from dpspec.budget import group
from dpspec.errors import DpspecError
from dpspec.contract.hookspecs import hookimpl

RULES: list[Rule] = []

#: The note in which `dpspec import --registry` lists what it could not formalise.
UNCHECKED_NOTE = "dpspec.unchecked"
STATED_MECHANISM = "declared"

# Units that stand for a contribution of a person rather than the person, and the numbers of
# such units one person plausibly contributes that the finding spells out.
_TIME_WINDOWS = {
    "hour": (24, 24 * 30, 24 * 365),
    "day": (7, 30, 365),
    "week": (4, 13, 52),
    "month": (3, 6, 12),
    "year": (2, 5, 10),
    "session": (10, 100, 1000),
}
_EVENT_WORDS = (
    "event",
    "record",
    "report",
    "query",
    "search",
    "click",
    "visit",
    "transaction",
    "contribution",
    "message",
    "trip",
    "edge",
    "interaction",
    "submission",
    "observation",
)
_EVENT_COUNTS = (10, 100, 1000)


def rule(id: str, severity: str, title: str, *, needs_result: bool = False):
    def wrap(fn):
        RULES.append(Rule(id, severity, title, fn, False, needs_result, " ".join((fn.__doc__ or "").split())))
        return fn

    return wrap


def _words(text: str) -> list[str]:
    return [w.rstrip("s") for w in re.split(r"[^a-z]+", text.lower()) if w]


def finer_kind(unit_name: str, unit_prose: str | None) -> tuple[str, tuple[int, ...]] | None:
    """('day', (7, 30, 365)) when the unit is a person's contribution rather than a person."""
    words = _words(unit_name) + _words(unit_prose or "")
    for w in words:
        if w in _TIME_WINDOWS or w == "daily":
            key = "day" if w == "daily" else w
            return key, _TIME_WINDOWS[key]
    for w in words:
        if w in _EVENT_WORDS:
            return w, _EVENT_COUNTS
    return None


@rule("stated-budget", "warning", "budget stated by the curator, not derived")
def stated_budget(ctx):
    """The mechanism is `declared`: the budget is the curator's published figure. dpspec checked
    its arithmetic and conversions, not the algorithm; what the import could not formalise is
    listed as unchecked."""
    call = ctx.spec.mechanism
    if call is None or call.name != STATED_MECHANISM:
        return []
    unchecked = [line.strip("- ").strip() for line in (ctx.spec.note(UNCHECKED_NOTE) or "").split("\n") if line.strip()]
    figure = ""
    if ctx.ledger is not None and ctx.ledger.declared is not None:
        figure = f" ({ctx.ledger.declared})"
    message = (
        f"the budget{figure} is the curator's published statement; dpspec did not derive it from an "
        "algorithm, so it holds only if the published description is complete and correct"
    )
    if unchecked:
        message += "; not formalised, so not checked: " + "; ".join(unchecked)
    prose = sorted(n.key for n in ctx.spec.notes if n.key != UNCHECKED_NOTE and not n.key.startswith("basic."))
    return [stated_budget_rule.finding(message, {"unchecked": unchecked, "prose_fields": prose}, severity="warning")]


stated_budget_rule = RULES[-1]


@rule("unit-finer-than-person", "warning", "a unit finer than a person", needs_result=True)
def unit_finer_than_person(ctx):
    """The unit is a contribution of a person (an event, a user-day) and nothing bounds how many
    of them one person has: a person with k units is protected only at the group budget."""
    unit = ctx.spec.unit
    if unit is None or unit.bound is not None:
        return []
    table = ctx.spec.domain.table(unit.table) if ctx.spec.domain else None
    if table is not None and table.parent:  # linked to its person-like entity: finer-unit's case
        return []
    name = table.unit if table is not None else unit.table
    kind = finer_kind(name, ctx.spec.note("privacy_loss.privacy_unit"))
    if kind is None or ctx.ledger is None or ctx.ledger.declared is None:
        return []
    word, counts = kind
    budget = ctx.ledger.declared
    figures = {}
    for k in counts:
        try:
            figures[k] = group(budget, k).result
        except DpspecError:
            continue
    shown = "; ".join(f"{k} {word}s: {b}" for k, b in figures.items())
    message = (
        f"the unit is one {name} (a {word} of a person's data), and no bound on how many one person has "
        f"is stated: the budget {budget} protects a single {word}; for a person with k of them it is the "
        f"group-privacy budget ({shown}), and without a bound it is unbounded"
    )
    return [
        unit_finer_rule.finding(
            message, {"unit": name, "per_unit": budget, "per_person": {str(k): b for k, b in figures.items()}}
        )
    ]


unit_finer_rule = RULES[-1]


@hookimpl
def dpspec_audit_rules():
    return list(RULES)


__all__ = ["RULES", "UNCHECKED_NOTE", "finer_kind"]
