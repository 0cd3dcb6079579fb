"""The built-in privacy-theatrics rules (docs/theory.md, Privacy theatrics; a page per rule in docs/audit/), registered like any plugin's.

Each rule reads the spec (and, when it needs them, the budget account or a baseline) and says
in plain words, with the numbers, how the nominal budget may overstate the protection. The
seed paper's "perverse guide" (section 3) lists the levers: a later or narrower domain, more
invariants, finer units, weaker premetrics or coarser events, renamed currencies, data-dependent
design; composition and universes add the rest.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.audit.base import Finding, Rule
from dpspec.audit.compare import domain_differences
from dpspec.audit.currency import (
    ancestors,
    bound_budget,
    describe_premetric,
    group_size,
    program_total,
    quote,
    unit_word,
)
from dpspec.audit.identifiers import identifier_columns
from dpspec.audit.multiverse import (
    FINE_LEVEL_NAMES,
    determines,
    geography_levels,
    merged_domain,
    refinement,
    undetermined,
)
from dpspec.budget import change_relation, format_figure, group
from dpspec.budget.ledger import achieved_text
from dpspec.errors import ConversionError, DpspecError
from dpspec.contract.hookspecs import hookimpl
from dpspec.budget.pufferfish import count_sensitivity
from dpspec.language.pufferfish import plain_words
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_data = LazyModule("dpspec.check.data", "_data", globals())

RULES: list[Rule] = []


def rule(id: str, severity: str, title: str, *, needs_baseline: bool = False, needs_result: bool = False):
    """Register a check function as a built-in rule."""

    def wrap(fn):
        doc = " ".join((fn.__doc__ or "").split())
        RULES.append(Rule(id, severity, title, fn, needs_baseline, needs_result, doc))
        return fn

    return wrap


def _num(value) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, dict):  # a stratum's key: 'state = MA, size = 2', never read as a size
        return "(" + ", ".join(f"{k} = {_num(v)}" for k, v in value.items()) + ")"
    if isinstance(value, (list, tuple)):
        return ", ".join(_num(v) for v in value)
    if isinstance(value, str):
        return value
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return f"{value:,}"
    return ir.format_number(value) if not isinstance(value, float) else format_figure(value)


def _budget(value) -> str:
    if value is None:
        return "unknown"
    return str(value) if value.is_finite else "infinite (no finite guarantee)"


def _list(items) -> str:
    items = list(items)
    return "; ".join(f"'{i}'" for i in items)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# ---- who -----------------------------------------------------------------------------------


@rule("narrower-domain", "warning", "The domain protects less than the baseline's", needs_baseline=True)
def narrower_domain(ctx) -> list[Finding]:
    """The domain starts later in the data life cycle than the baseline's, or drops tables,
    variables or values: less is protected, so the same noise buys a smaller budget."""
    diff = domain_differences(ctx.spec, ctx.baseline)
    parts = []
    if diff["stage"] == "later":
        parts.append(
            f"it starts at stage '{ctx.spec.domain.stage}', later in the data life cycle than the "
            f"baseline's '{ctx.baseline.domain.stage}', so whatever happened before (editing, imputation, "
            "sampling) is outside the protection"
        )
    if diff["dropped"]:
        parts.append(f"it drops {', '.join(diff['dropped'])}, which the baseline protects")
    if diff["narrowed"]:
        parts.append(f"it narrows the admitted values of {', '.join(diff['narrowed'])}")
    if not parts:
        return []
    message = (
        "The spec's domain is narrower than the baseline's: "
        + "; ".join(parts)
        + ". A smaller domain needs less budget for the same noise; the two budgets protect different data."
    )
    return [Finding("narrower-domain", "warning", message, diff)]


# ---- where ---------------------------------------------------------------------------------


@rule("added-invariants", "warning", "More invariants than the baseline: a shattered multiverse", needs_baseline=True)
def added_invariants(ctx) -> list[Finding]:
    """The spec keeps statistics exact that the baseline's invariants do not fix (more
    invariants, or the same at a finer geography): its universes are smaller, and a smaller
    nominal budget is bought with exact disclosure."""
    spec, base = ctx.spec, ctx.baseline
    domain = merged_domain(spec.domain, base.domain)
    extra = undetermined(spec.invariants, base.invariants, domain)
    if not extra:
        return []
    order = refinement(spec.invariants, base.invariants, domain)
    message = (
        f"The spec publishes {_plural(len(extra), 'statistic')} exactly that the baseline's invariants do "
        f"not fix: {_list(q.describe() for q in extra)}. "
    )
    if order == "finer":
        message += (
            "Its multiverse shatters the baseline's: each universe is a piece of a baseline universe, so "
            "datasets that differ in these counts are never compared, and those differences are not protected."
        )
    else:
        message += (
            "Its multiverse cuts across the baseline's (each also fixes something the other does not), "
            "so the two guarantees protect different comparisons."
        )
    evidence = {"extra_invariants": [q.describe() for q in extra], "order": order}
    row = ctx.comparison.row("budget") if ctx.comparison else None
    if row is not None and "spec_converted" in row.evidence:
        vs, vb = row.evidence["spec_converted"], row.evidence["baseline_converted"]
        message += (
            f" In one currency the spec's budget is {_budget(vs)} against the baseline's {_budget(vb)}; "
            "any reduction comes from disclosing these counts exactly, not from more noise."
        )
        evidence.update({"spec_budget": vs, "baseline_budget": vb, "currency": row.evidence["currency"]})
    return [Finding("added-invariants", "warning", message, evidence)]


@rule("fine-invariants", "warning", "Invariants at a very fine geography, or by an identifier")
def fine_invariants(ctx) -> list[Finding]:
    """An invariant counted by an identifier-like column (one unit per value) publishes a piece
    of every record exactly, whether declared or induced by a mechanism (a swap holding an id
    column); an invariant at the finest declared geography level, or at a level named block,
    block group or tract, describes a handful of people."""
    return _identifier_invariants(ctx) + _fine_geography_invariants(ctx)


def _identifier_invariants(ctx) -> list[Finding]:
    spec = ctx.spec
    induced = tuple(ctx.checked.induced) if ctx.checked is not None else ()
    mech = ctx.checked.mechanism.name if ctx.checked is not None and ctx.checked.mechanism else None
    declared_keys = {q.key() for q in spec.invariants}
    findings = []
    seen = set()
    for q, origin in [(q, "declared") for q in spec.invariants] + [(q, "induced") for q in induced]:
        if q.key() in seen or (origin == "induced" and q.key() in declared_keys):
            continue
        seen.add(q.key())
        ids = identifier_columns(q, spec.domain)
        if not ids:
            continue
        columns = ", ".join(f"'{c}'" for c, _ in ids)
        why = "; ".join(r for _, r in ids)
        record = unit_word(spec.domain, q.table)
        if origin == "declared":
            lead = f"The invariant '{q.describe()}' is counted by {columns}, an identifier ({why})."
        else:
            lead = (
                f"Mechanism '{mech}' holds {columns} fixed, an identifier ({why}), so it keeps "
                f"'{q.describe()}' exact: an invariant the spec's author may never have meant to declare."
            )
        message = (
            lead + f" A count by an identifier has one {record} group per value: publishing it exactly "
            f"publishes part of every individual record, the worst case of an invariant. No budget "
            "protects what it discloses. Drop the identifier from the invariant"
            + (" (or from the mechanism's held columns)" if origin == "induced" else "")
            + "."
        )
        findings.append(
            Finding(
                "fine-invariants",
                "critical",
                message,
                {
                    "invariant": q.describe(),
                    "identifier_columns": [c for c, _ in ids],
                    "why": why,
                    "origin": origin,
                    "mechanism": mech if origin == "induced" else None,
                },
            )
        )
    return findings


def _fine_geography_invariants(ctx) -> list[Finding]:
    spec = ctx.spec
    domain = spec.domain
    levels = domain.geography.levels if domain and domain.geography else ()
    finest = levels[-1] if len(levels) > 1 else None
    named, at_finest = [], []
    for q in spec.invariants:
        geo = geography_levels(q, domain)
        fine = [c for c in geo if c.lower() in FINE_LEVEL_NAMES]
        if fine:
            named.append((q, fine[0]))
        elif finest and finest in geo:
            at_finest.append((q, finest))
    if not named and not at_finest:
        return []
    hits = named + at_finest
    severity = "warning" if named else "info"
    described = "; ".join(f"'{q.describe()}' (at {level})" for q, level in hits)
    where = "a very fine geography" if named else "the finest geography the spec declares"
    message = (
        f"The spec publishes {_plural(len(hits), 'invariant')} exactly at {where}: {described}. "
        "Exact counts in small areas can single out households or persons, and every invariant shrinks "
        "the universes within which the budget protects anyone."
    )
    if not named:
        message += " Judge whether these areas are small."
    evidence = {
        "invariants": [{"invariant": q.describe(), "level": level} for q, level in hits],
        "finest_declared_level": finest,
    }
    return [Finding("fine-invariants", severity, message, evidence)]


@rule("undeclared-invariants", "critical", "The mechanism keeps statistics exact that the spec does not declare")
def undeclared_invariants(ctx) -> list[Finding]:
    """The mechanism induces invariants the spec does not declare: under the declared
    multiverse the mechanism separates datasets with certainty, so the stated budget is false
    (infinite)."""
    checked = ctx.checked
    if checked is None or checked.mechanism is None or ctx.spec.domain is None:
        return []
    missing = undetermined(checked.induced, ctx.spec.invariants, ctx.spec.domain)
    if not missing:
        return []
    name = checked.mechanism.name
    stated = "; ".join(b.describe() for b in ctx.spec.budgets) or "the stated budget"
    message = (
        f"Mechanism '{name}' publishes {_list(q.describe() for q in missing)} exactly, but the spec's "
        "invariants do not declare " + ("it" if len(missing) == 1 else "them") + ". The declared "
        "multiverse compares datasets that differ in these counts, and the mechanism tells such datasets "
        f"apart with certainty: under the declared flavor its budget is infinite, so '{stated}' is false. "
        "Declare these invariants (and report the disclosure) or use a mechanism that does not fix them."
    )
    evidence = {
        "mechanism": name,
        "undeclared": [q.describe() for q in missing],
        "declared": [q.describe() for q in ctx.spec.invariants],
    }
    return [Finding("undeclared-invariants", "critical", message, evidence)]


@rule("public-information", "info", "The guarantee is conditioned on public information")
def public_information(ctx) -> list[Finding]:
    """Public information (released elsewhere, exactly or with its own noise) shapes the release:
    the guarantee holds only among datasets consistent with it, its values taken as known."""
    public = ctx.spec.public
    if not public:
        return []
    items = "; ".join(f"'{p.query.describe()}' (released in {p.source})" for p in public)
    message = (
        f"The guarantee is conditioned on {_plural(len(public), 'public statistic')} released "
        f"elsewhere and taken as known, exactly as published (with or without their own noise): {items}. "
        "The budget holds only among datasets that agree with "
        + ("it" if len(public) == 1 else "them")
        + " (a Pufferfish guarantee with the same budget): "
        "what they disclose is not protected by this release, and an attacker is assumed to know it. "
        "When such a release was itself computed from the same people (an earlier product of the same "
        "census, with its own budget), one person's total privacy loss is this budget plus that "
        "release's (sequential composition): state both in a program to see the total."
    )
    evidence = {"public": [{"statistic": p.query.describe(), "source": p.source} for p in public]}
    return [Finding("public-information", "info", message, evidence)]


@rule("pufferfish-class", "warning", "A Z-Pufferfish guarantee holds only for its class of data distributions")
def pufferfish_class(ctx) -> list[Finding]:
    """A Z-Pufferfish spec (seed 2) protects against attackers whose beliefs lie in a declared class
    of data-generating distributions; outside it the budget says nothing. Under independence the
    guarantee is conditional on units not carrying information about each other."""

    c = ctx.spec.pufferfish
    if c is None:
        return []
    words = plain_words(c)
    sensitivity = count_sensitivity(c)
    if c.kind == "independent":
        message = (
            "The guarantee is conditional on independence: it is an epsilon-Z-Pufferfish guarantee, and "
            f"{words}. Records that reveal each other (members of one household, contacts in an epidemic) "
            "fall outside it; differential privacy needs no such assumption."
        )
    else:
        message = (
            f"The guarantee is an epsilon-Z-Pufferfish guarantee over a class of data distributions: {words}. "
            f"Over this class one count's Wasserstein sensitivity is {format_figure(float(sensitivity))} "
            "(1 under independence)."
        )
    evidence = {
        "class": c.kind,
        "options": {k: float(v) for k, v in c.options},
        "count_sensitivity": float(sensitivity),
        "in_words": words,
    }
    return [Finding("pufferfish-class", "warning" if c.kind == "independent" else "info", message, evidence)]


@rule(
    "pufferfish-vs-dp", "info", "A Z-Pufferfish release compared block by block with a DP baseline", needs_baseline=True
)
def pufferfish_vs_dp(ctx) -> list[Finding]:
    """A Z-Pufferfish spec audited against a DP baseline (the same data without public information):
    each block says which side protects more, and the assumptions DP does not make are named."""
    if ctx.spec.pufferfish is None or ctx.baseline is None or ctx.baseline.pufferfish is not None:
        return []

    rows = ctx.comparison.rows if ctx.comparison is not None else ()
    parts = [f"{r.block}: {r.reason.rstrip('.')}" for r in rows]
    z = [p.query.describe() for p in ctx.spec.public]
    base_z = [p.query.describe() for p in ctx.baseline.public]
    extra = [q for q in z if q not in base_z]
    parts.append(
        "public information: "
        + (
            f"this spec conditions on {'; '.join(extra)}, which the baseline does not"
            if extra
            else "the same as the baseline"
        )
    )
    parts.append(
        f"class of distributions: {plain_words(ctx.spec.pufferfish)}; the DP baseline holds for every distribution"
    )
    parts.append(
        "reading the budgets: the spec's epsilon is an epsilon-Z-Pufferfish budget, which holds only given Z "
        "and only for the class above, so an equal figure protects less than the DP baseline's, never more"
    )
    message = "Block by block against the DP baseline: " + ". ".join(parts) + "."
    evidence = {"rows": [r.to_json() for r in rows], "public_not_in_baseline": extra, "class": ctx.spec.pufferfish.kind}
    return [Finding("pufferfish-vs-dp", "info", message, evidence)]


# ---- what ----------------------------------------------------------------------------------


@rule(
    "finer-unit",
    "warning",
    "The unit of protection is finer than the baseline's, or than an entity the domain links it to",
)
def finer_unit(ctx) -> list[Finding]:
    """The unit is finer than the baseline's (person against household, event against user),
    or the domain links it to a coarser entity (visits in patients, employees in firms), even
    without a baseline: the budget per coarser unit is the group-privacy budget, stated when a
    bound on how many units one entity holds makes it exist."""
    return _finer_than_baseline(ctx) + _linked_unit(ctx)


def _finer_than_baseline(ctx) -> list[Finding]:
    if ctx.baseline is None:
        return []
    us, ub = ctx.spec.unit, ctx.baseline.unit
    if us is None or ub is None or us.table == ub.table:
        return []
    domain = merged_domain(ctx.spec.domain, ctx.baseline.domain)
    if ub.table not in ancestors(us.table, domain):
        return []
    k = group_size(us.table, ub.table, ub, us, domain=domain)
    q = quote(ctx.spec, ctx.result, ctx.account)
    fine, coarse = unit_word(domain, us.table), unit_word(domain, ub.table)
    evidence = {"unit": us.table, "baseline_unit": ub.table, "k": k}
    message = (
        f"The spec protects one {fine} at a time; the baseline protects a whole {coarse}. "
        f"Changing one {coarse} can change every {fine} in it, so the spec's budget per {fine} "
        f"understates what a {coarse} loses."
    )
    if k is None:
        message += (
            f" Nothing bounds how many {us.table} a {coarse} holds, so no budget per {coarse} "
            f"follows; declare 'unit {ub.table} : {ub.relation} holds at most K {us.table}' to get the "
            "group-privacy figure."
        )
        return [Finding("finer-unit", "warning", message, evidence)]
    if q is not None:
        text, found = _group_words(q, k, fine, coarse, us.table)
        message += text + (f" Compare that figure, not {q.budget}, with the baseline's." if found else "")
        evidence.update(found)
    return [Finding("finer-unit", "warning", message, evidence)]


# Units that are (or stand for) a person: protecting something finer leaves the person's own
# protection to group privacy.
PERSON_WORDS = frozenset(
    {
        "person",
        "persons",
        "people",
        "individual",
        "patient",
        "user",
        "member",
        "student",
        "employee",
        "worker",
        "respondent",
        "resident",
        "customer",
        "client",
        "citizen",
        "child",
        "pupil",
        "account_holder",
        "subscriber",
        "beneficiary",
        "enrollee",
    }
)


def _linked_unit(ctx) -> list[Finding]:
    """One finding per coarser entity the unit's table is linked to, nearest first."""
    spec, unit = ctx.spec, ctx.spec.unit
    if unit is None or spec.domain is None or spec.program is not None:
        return []
    chain = ancestors(unit.table, spec.domain)
    base_unit = ctx.baseline.unit.table if ctx.baseline is not None and ctx.baseline.unit else None
    chain = [a for a in chain if a != base_unit]  # compared against the baseline above
    if not chain:
        return []
    q = quote(spec, ctx.result, ctx.account)
    fine = unit_word(spec.domain, unit.table)
    findings = []
    for coarse_table in chain:
        coarse = unit_word(spec.domain, coarse_table)
        k = group_size(unit.table, coarse_table, unit, domain=spec.domain)
        person = coarse.lower() in PERSON_WORDS and fine.lower() not in PERSON_WORDS
        severity = "warning" if person else "info"
        message = (
            f"The spec protects one {fine} at a time, and the domain links each {fine} to a {coarse} "
            f"(table {unit.table} in {coarse_table}). Changing one {coarse} can change all of its {unit.table}, "
            f"so the guarantee for a whole {coarse} is weaker than the quoted figure."
        )
        if person:
            message += f" Here the {coarse} is the person: the quoted budget is not a person's protection."
        evidence = {"unit": unit.table, "coarser": coarse_table, "k": k}
        if k is None:
            message += (
                f" Nothing bounds how many {unit.table} one {coarse} holds, so no budget per {coarse} follows: "
                f"declare it on the link ('in {_link_text(spec.domain, unit.table, coarse_table)} at most K') to get the group-privacy figure."
            )
        elif q is not None:
            text, found = _group_words(q, k, fine, coarse, unit.table)
            message += text
            evidence.update(found)
        findings.append(Finding("finer-unit", severity, message, evidence))
    return findings


def _group_words(q, k: int, fine: str, coarse: str, table: str) -> tuple[str, dict]:
    """The coarse unit's budget by group privacy, in words and as evidence (empty if no rule applies)."""
    try:
        conv = group(q.budget, k)
    except ConversionError as exc:
        return f" One {coarse} holds at most {k} {table}, but no group-privacy rule applies: {exc}.", {}
    text = (
        f" One {coarse} holds at most {k} {table}, so the {q.budget} per {fine} ({q.source}) is "
        f"{conv.result} per {coarse} by group privacy ({conv.note}; {conv.citation})."
    )
    return text, {
        "budget": q.budget,
        "budget_source": q.source,
        "group_budget": conv.result,
        "method": conv.method,
        "citation": conv.citation,
    }


def _link_text(domain: ir.Domain, table: str, coarse_table: str) -> str:
    """`households by hhid`: the link from the table nearest the coarse one, as written in a spec."""
    t = domain.table(table)
    while t is not None and t.parent and t.parent != coarse_table:
        t = domain.table(t.parent)
    return f"{coarse_table} by {t.link if t is not None and t.link else 'ID'}"


# ---- how -----------------------------------------------------------------------------------

FACT_NAMES_FOR_N = ("n_units", "n", "units", "n_records", "records")


def _positive_int(value) -> int | None:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def unit_count(ctx) -> int | None:
    """The number of protected units, only where it is public: a fact the budget is computed
    from, the size of the published microdata, or, when the invariants fix the total anyway,
    the run's count or the data's row count."""
    spec, unit = ctx.spec, ctx.spec.unit
    for key in FACT_NAMES_FOR_N:
        n = _positive_int(ctx.facts.get(key))
        if n:
            return n
    if unit is None:
        return None
    published = getattr(ctx.result, "published", None) or {}
    if unit.table in published:
        return int(len(published[unit.table])) or None
    fixed = list(spec.invariants) + [p.query for p in spec.public]
    if not determines(fixed, ir.CountQuery(unit.table), spec.domain):
        return None
    release = getattr(ctx.result, "release", None)
    run_facts = getattr(release, "facts", None) or {}
    for key in FACT_NAMES_FOR_N:
        n = _positive_int(run_facts.get(key))
        if n:
            return n
    outputs = getattr(release, "outputs", None) or {}
    if unit.table in outputs:
        return int(len(outputs[unit.table])) or None
    source = next((d for d in spec.data if d.table == unit.table), None)
    if ctx.result is None and source is not None and ctx.checked is not None and ctx.checked.passed:
        try:
            return int(len(_data.load_table(spec, source))) or None
        except DpspecError:
            return None
    return None


@rule("weaker-premetric", "critical", "Approximate DP, or a delta that is large against the population")
def weaker_premetric(ctx) -> list[Finding]:
    """Approximate DP instead of pure, or a delta large against 1/(number of units): a
    mechanism may then publish some units' records in full."""
    p = ctx.spec.premetric
    if p is None or p.kind != "approximate" or p.option("delta") is None:
        return []
    delta = p.option("delta")
    unit = ctx.spec.unit.table if ctx.spec.unit else "unit"
    n = unit_count(ctx)
    base_pure = (
        ctx.baseline is not None and ctx.baseline.premetric is not None and ctx.baseline.premetric.kind == "pure"
    )
    evidence = {"delta": delta, "n": n, "baseline_pure": base_pure}
    lead = (
        f"The premetric is approximate DP with delta = {_num(delta)}: the guarantee may fail outright with "
        "probability up to delta. A mechanism that publishes each unit's record in full with probability delta "
        "satisfies it with epsilon = 0."
    )
    if n is not None:
        expected = float(delta) * n
        evidence.update({"one_over_n": 1 / n, "expected_records_exposed": expected})
        if Fraction(delta) > Fraction(1, n):
            message = (
                lead + f" With n = {n:,} units ({unit}), delta exceeds 1/n = {format_figure(1 / n)}: such a "
                f"mechanism would be expected to expose {format_figure(expected)} complete records."
            )
            return [Finding("weaker-premetric", "critical", message, evidence)]
        message = lead + (
            f" With n = {n:,} units ({unit}) such a mechanism would expose {format_figure(expected)} records "
            "in expectation; delta is small against 1/n, but the guarantee is still weaker than pure DP."
        )
        severity = "info"
    elif float(delta) > 1e-6:
        message = lead + (
            " The number of units is not public here (the invariants do not fix it and no "
            "release states it); delta above 1e-6 is large against 1/n for any population of "
            "fewer than a million units."
        )
        severity = "warning"
    else:
        message = lead + " Delta is small, but the guarantee is weaker than pure DP."
        severity = "info"
    if base_pure:
        message += " The baseline uses pure DP, so the two budgets are not in the same currency."
        severity = "warning" if severity == "info" else severity
    return [Finding("weaker-premetric", severity, message, evidence)]


@rule("coarse-events", "warning", "Protection measured on a reduced event space")
def coarse_events(ctx) -> list[Finding]:
    """Change in the output is measured only on some events (subspace-style guarantees): the
    budget bounds a coarser sigma-algebra, not the mechanism's real behaviour."""
    p = ctx.spec.premetric
    if p is None or not p.events:
        return []
    message = (
        f'The output premetric is measured only on the events "{p.events}", not on every event of the '
        "output space. The budget then bounds what an observer learns from those events alone; whatever "
        "else the output reveals is not covered, so the figure looks smaller than the mechanism's real "
        "rate of change."
    )
    return [Finding("coarse-events", "warning", message, {"events": p.events})]


# ---- how much ------------------------------------------------------------------------------


def _effective_methods(spec: ir.Spec) -> dict[str, str]:
    """bound -> the conversion it was (or will be) computed with, for bounds that need one."""
    p = spec.premetric
    if p is None or p.kind in ("pure", "approximate"):
        return {}
    out = {}
    for b in spec.budgets:
        needs = b.quantity in ("epsilon", "delta") and (b.with_ or p.kind in ("zcdp", "gdp"))
        if needs or b.method:
            out[b.describe()] = b.method or "cks20"
    return out


@rule("redenomination", "warning", "A budget quoted in another currency looks smaller than the protection it gives")
def redenomination(ctx) -> list[Finding]:
    """A figure quoted in a different currency (premetric, conversion, add/remove against
    change-one, unit) that looks comparable or smaller while the protection, restated in one
    currency, is the same or weaker. Quotes that look larger, or protect more, are honest."""
    spec = ctx.spec
    findings = []
    unit = spec.unit
    if unit is not None:
        for b in spec.budgets:
            if b.relation and b.relation != unit.relation:
                findings.append(_relation_quote(ctx, b))
    methods = _effective_methods(spec)
    if len(set(methods.values())) > 1:
        listing = "; ".join(f"'{k}' by {v}" for k, v in methods.items())
        message = (
            f"The spec's bounds use different conversions: {listing}. The same mechanism has different "
            "epsilons under Bun-Steinke (bs16) and Canonne-Kamath-Steinke (cks20) (rho = 15.29 at "
            "delta = 1e-10 is 52.82 by one and 51.56 by the other): figures from different conversions "
            "cannot be compared as if they were the same."
        )
        findings.append(Finding("redenomination", "warning", message, {"methods": methods}))
    if ctx.baseline is not None:
        findings.extend(_redenominated_against_baseline(ctx))
    return findings


def _relation_quote(ctx, b) -> Finding:
    """A bound quoted under another neighbor relation than the unit's, restated in the unit's."""
    spec, unit = ctx.spec, ctx.spec.unit
    evidence = {"bound": b.describe(), "quoted_under": b.relation, "unit_relation": unit.relation}
    message = (
        f"The bound '{b.describe()}' is quoted for {_relation(b.relation)} neighbors, but the spec's unit uses "
        f"{_relation(unit.relation)} neighbors ({unit.relation}). "
    )
    check = _bound_check(ctx, b)
    achieved = (
        f" The ledger computes {format_figure(check.achieved)} for it ({check.currency})."
        if check is not None and not math.isnan(check.achieved)
        else ""
    )
    if check is not None and not math.isnan(check.achieved):
        evidence["achieved_in_quoted_currency"] = float(check.achieved)  # the JSON float, as the budget JSON has it
    if b.relation != "symdiff":
        message += (
            "A change-one figure is the larger of the two for the same mechanism and says nothing about adding "
            "or removing a unit; it is checked in its own currency." + achieved
        )
        return Finding("redenomination", "info", message, evidence)
    restated = None
    try:
        quoted = bound_budget(spec, b)
        restated = change_relation(quoted, "symdiff", "hamming") if quoted is not None else None
    except ConversionError:
        pass
    if restated is not None:
        message += (
            f"One change-one step is an add/remove pair, so the quoted {restated.source} per add/remove step is "
            f"{restated.result} per change-one {unit_word(spec.domain, unit.table)}, the spec's own currency "
            f"({restated.note}). The smaller-looking figure is the same protection in another currency, not "
            "more noise; quote the change-one figure."
        )
        evidence.update({"restated": restated.result, "method": restated.method})
    else:
        message += (
            "One change-one step is an add/remove pair, so in the spec's own currency the figure is larger "
            "(pure x2, zCDP x4): the smaller-looking number is a different currency, not more noise."
        )
    return Finding("redenomination", "warning", message + achieved, evidence)


def _relation(rel: str) -> str:
    return {"hamming": "change-one", "symdiff": "add/remove"}.get(rel, rel)


def _bound_check(ctx, bound):
    ledger = ctx.ledger
    if ledger is None:
        return None
    return next((c for c in ledger.bounds if c.bound == bound), None)


def _currency(spec: ir.Spec) -> dict:
    p, u = spec.premetric, spec.unit
    return {
        "premetric": describe_premetric(attrs.evolve(p, events=None)) if p else None,
        "relation": u.relation if u else None,
        "methods": tuple(sorted(set(_effective_methods(spec).values()))),
        "quoted_relations": tuple(sorted({b.relation or (u.relation if u else "") for b in spec.budgets})),
    }


# A headline within this factor of another "looks comparable": readers do not weigh 1.1 against 1.0.
LOOKS_COMPARABLE = 1.1


def _headline(spec: ir.Spec) -> tuple[str, float] | None:
    """The number a reader sees first: the first bound's quantity and value."""
    b = spec.budgets[0] if spec.budgets else None
    return (b.quantity, float(b.value)) if b is not None else None


def _strength(vs, vb) -> str:
    """Which of two budgets in one currency is stronger, and by how much, in words."""
    name, a, c = _main_param(vs), _main_param(vs, value=True), _main_param(vb, value=True)
    if a is None or c is None or not (math.isfinite(a) and math.isfinite(c)):
        return ""
    if math.isclose(a, c, rel_tol=1e-9):
        return "neither is stronger: the same protection"
    who = "the baseline's" if a > c else "the spec's"
    diff = abs(a - c)
    pct = f" ({float(100 * diff / max(a, c)):.0f}% smaller)"
    return f"{who} is stronger: its {name} is smaller by {format_figure(diff)}{pct}"


def _main_param(budget, value: bool = False):
    names = {"pure": "epsilon", "approx": "epsilon", "renyi": "epsilon", "zcdp": "rho", "gdp": "mu"}
    name = names.get(budget.kind)
    if not value:
        return name
    return float(budget.params()[name]) if name in budget.params() else None


def _redenominated_against_baseline(ctx) -> list[Finding]:
    cs, cb = _currency(ctx.spec), _currency(ctx.baseline)
    names = {
        "premetric": "output premetric",
        "relation": "neighbor relation",
        "methods": "conversion method",
        "quoted_relations": "relation the bounds are quoted under",
    }
    differ = [k for k in cs if cs[k] != cb[k] and (cs[k] or cb[k])]
    if not differ or not ctx.spec.budgets or not ctx.baseline.budgets:
        return []
    row = ctx.comparison.row("budget")
    hs, hb = _headline(ctx.spec), _headline(ctx.baseline)
    looks = hs[1] <= hb[1] * LOOKS_COMPARABLE
    listing = "; ".join(f"{names[k]}: {_show(cs[k])} against {_show(cb[k])}" for k in differ)
    evidence = {
        "differences": {k: {"spec": cs[k], "baseline": cb[k]} for k in differ},
        "spec_headline": {hs[0]: hs[1]},
        "baseline_headline": {hb[0]: hb[1]},
    }
    if "spec_converted" not in row.evidence:
        message = (
            f"The spec and the baseline quote their budgets in different currencies ({listing}), and no "
            f"common currency exists: {row.evidence.get('no_common_currency', row.reason)}. The figures "
            f"({hs[0]} = {format_figure(hs[1])} against {hb[0]} = {format_figure(hb[1])}) cannot be read "
            "side by side, and neither can be said to protect more."
        )
        return [Finding("redenomination", "warning", message, evidence)]
    vs, vb, verdict = row.evidence["spec_converted"], row.evidence["baseline_converted"], row.verdict
    evidence.update(
        {
            "currency": row.evidence["currency"],
            "spec_budget": vs,
            "baseline_budget": vb,
            "verdict": verdict,
            "strength": _strength(vs, vb),
        }
    )
    smaller = hs[1] < hb[1]
    # A smaller-looking figure for the same protection is the maneuver; a comparable-looking one
    # only when it protects less (equal figures, equal protection: an honest change of currency).
    misleads = verdict in ("weaker", "incomparable") or (verdict == "same" and smaller)
    if not misleads or not looks:
        return []  # an honest quote: the spec protects as much or more than its figure suggests
    message = (
        f"The spec quotes {hs[0]} = {format_figure(hs[1])} and the baseline {hb[0]} = {format_figure(hb[1])}, "
        f"in different currencies ({listing}): the spec's figure looks "
        + ("smaller" if smaller else "comparable")
        + ". "
        f"In one currency ({row.evidence['currency']}) the spec's budget is {_budget(vs)} and the baseline's "
        f"{_budget(vb)}" + VERDICT_WORDS[verdict] + "."
    )
    strength = _strength(vs, vb)
    if strength and verdict != "same":
        message += f" In that currency {strength}."
    message += (
        " The smaller-looking number comes from the currency, not from more noise."
        if smaller
        else " The comparable-looking number hides weaker protection: the difference is the currency's."
    )
    return [Finding("redenomination", "warning", message, evidence)]


VERDICT_WORDS = {
    "same": ": the same protection",
    "stronger": ": the spec's is the smaller (stronger)",
    "weaker": ": the spec's is the larger (weaker)",
    "incomparable": ", and neither is smaller in every parameter",
}


def _show(value) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, tuple):
        return ", ".join(_show(v) for v in value)
    if isinstance(value, Fraction):
        return ir.format_number(value)
    return str(value)


@rule("data-dependent-design", "critical", "Mechanism tuned on the confidential data")
def data_dependent_design(ctx) -> list[Finding]:
    """The mechanism's parameters were chosen using the confidential data: the
    meta-mechanism (tuning plus mechanism) is what the data goes through, and its budget is
    what counts."""
    t = ctx.spec.tuning
    if t is None or t.source != "confidential":
        return []
    note = f' ("{t.note}")' if t.note else ""
    message = (
        f"The mechanism's parameters were chosen using the confidential data itself{note}. The stated budget "
        "covers the mechanism with its parameters fixed, not the tuning: what the data actually goes through "
        "is the tuning plus the mechanism, whose budget is not stated. (In the extreme, a constant output "
        "chosen to equal the data has budget 0 as a mechanism and infinity once its design is counted.) "
        "Tune on public, earlier or synthetic data, or account for the tuning in the budget."
    )
    return [Finding("data-dependent-design", "critical", message, {"tuned_on": t.source, "note": t.note})]


@rule("uncomposed-releases", "warning", "Several releases without a stated total budget")
def uncomposed_releases(ctx) -> list[Finding]:
    """Several releases of the same data whose total budget is not stated: each figure
    looks small alone; what the data loses is their composition."""
    spec = ctx.spec
    if spec.budgets:
        return []
    if spec.program is not None:
        parts = spec.program.parts
        paths = [p for part in parts for p in part.paths]
        if len(paths) < 2:
            return []
        parallel = [part for part in parts if part.parallel]
        message = (
            f"The program '{spec.program.title}' releases {len(paths)} specs of the same data "
            f"({', '.join(paths)}) but states no total budget. Each release's budget may look small alone; "
            "what the data loses is their composition (the sum in one currency"
            + ("; parallel parts on disjoint universes count once, at their largest" if parallel else "")
            + ")."
        )
        evidence = {"program": spec.program.title, "specs": paths, "parallel_groups": len(parallel)}
        found = program_total(spec)
        if found is not None:
            message += f" Composed, they cost {_budget(found[0])}."
            evidence["total"] = found[0]
        message += " State the total with a 'budget' line so it is checked."
        return [Finding("uncomposed-releases", "warning", message, evidence)]
    mech = ctx.checked.mechanism if ctx.checked else None
    if mech is None:
        return []
    outputs = set(getattr(mech, "outputs", {}) or {})
    if spec.releases:
        released = sorted(
            {r.name for r in spec.releases if r.kind in ("output", "microdata")}
            | ({r.name for r in spec.releases if r.kind == "count"} & outputs)
        )
    else:
        released = sorted(outputs)
    if len(released) < 2:
        return []
    message = (
        f"The spec releases {len(released)} outputs of mechanism '{mech.name}' ({', '.join(released)}) and "
        "states no budget bound. Nothing says what the releases cost together; if any of them comes from a "
        "separate run, their budgets add up. State the total as a 'budget' line so the ledger checks it."
    )
    return [Finding("uncomposed-releases", "warning", message, {"mechanism": mech.name, "released": released})]


@rule(
    "infinite-budget", "critical", "No finite budget: the mechanism cannot meet the declared flavor", needs_result=True
)
def infinite_budget(ctx) -> list[Finding]:
    """The mechanism cannot meet the declared flavor at all (for example swapping with
    p = 0 or 1 and a stratum holding two different records)."""
    stmt, ledger = ctx.statement, ctx.ledger
    actual = ledger.declared if ledger is not None and ledger.declared is not None else getattr(stmt, "actual", None)
    if actual is None or actual.is_finite:
        return []
    name = ctx.checked.mechanism.name if ctx.checked and ctx.checked.mechanism else "the mechanism"
    depends = dict(getattr(stmt, "depends_on", {}) or {})
    facts = _facts_in_words(ctx, depends)
    message = (
        f"No finite budget exists: under the declared flavor {name} can reveal the data with certainty "
        f"(its budget is {actual})" + (f", given {facts}" if facts else "") + ". "
    )
    notes = list(getattr(stmt, "notes", ()) or ())
    if notes:  # the mechanism's own words for why; the first notes carry the reason
        message += " ".join(n.rstrip(".") + "." for n in notes[:2]) + " "
    message += "Any finite budget quoted for this release is false."
    return [
        Finding(
            "infinite-budget", "critical", message.strip(), {"budget": actual, "depends_on": depends, "notes": notes}
        )
    ]


def _facts_in_words(ctx, facts: dict) -> str:
    """Public facts with the mechanism's labels ('b = 264,331 (households in the largest
    stratum ...)'), never bare internal keys; a key without a label is shown as its words."""
    labels = {}
    mech = ctx.checked.mechanism if ctx.checked else None
    if mech is not None and ctx.spec.mechanism is not None:
        try:
            labels = dict(mech.fact_labels(ctx.spec, ctx.checked.params) or {})
        except AttributeError:  # a plugin from before the hook
            labels = {}
    parts = []
    for key, value in facts.items():
        # a finding is one sentence: the label without its asides, in lower case mid-sentence
        label = re.sub(r"\s*\([^()]*\)", "", labels.get(key) or "").strip()
        if label.startswith(f"{key}:"):
            parts.append(f"{key} = {_num(value)} ({label[len(key) + 1 :].strip()})")
        else:
            label = label or str(key).replace("_", " ")
            parts.append(f"{label[:1].lower()}{label[1:]}: {_num(value)}")
    return "; ".join(parts)


@rule("per-universe-budget", "warning", "The budget differs between universes", needs_result=True)
def per_universe_budget(ctx) -> list[Finding]:
    """eps_D varies between universes: show the actual universe's value and the worst case
    over the universes the spec admits."""
    stmt, ledger = ctx.statement, ctx.ledger
    if stmt is None or not getattr(stmt, "per_universe", False):
        return []
    actual = ledger.declared if ledger is not None and ledger.declared is not None else stmt.actual
    worst = ledger.worst if ledger is not None and ledger.declared is not None else stmt.worst
    depends = dict(getattr(stmt, "depends_on", {}) or {})
    facts = _facts_in_words(ctx, depends) or "the universe"
    finite_worst = worst is not None and worst.is_finite
    message = (
        f"The budget is a function of the universe: it depends on {facts}, public functions of the "
        f"invariants. In the actual universe it is {_budget(actual)}; "
        + (
            f"the worst case over the universes the spec admits is {worst}."
            if finite_worst
            else "over the universes the spec admits it has no finite worst case."
        )
        + " Other universes (another stratification, other invariants) give other figures, and finer "
        "strata give smaller nominal budgets."
    )
    severity = "info" if finite_worst else "warning"
    return [
        Finding("per-universe-budget", severity, message, {"actual": actual, "worst": worst, "depends_on": depends})
    ]


@rule("bound-not-met", "critical", "A declared budget bound does not hold", needs_result=True)
def bound_not_met(ctx) -> list[Finding]:
    """A declared bound that the achieved budget exceeds, or that cannot be checked in its
    quoted currency: the spec promises what the mechanism does not deliver."""
    ledger = ctx.ledger
    if ledger is None:
        return []
    findings = []
    if ledger.problem:
        findings.append(
            Finding(
                "bound-not-met",
                "critical",
                f"The mechanism's budget cannot be stated in the spec's flavor: {ledger.problem}.",
                {"problem": ledger.problem},
            )
        )
    for check in ledger.bounds:
        if check.holds:
            continue
        if math.isnan(check.achieved):
            message = f"The declared bound '{check.bound.describe()}' {check.currency}."
        else:
            achieved = achieved_text(check) if math.isfinite(check.achieved) else "no finite budget"
            message = (
                f"The declared bound '{check.bound.describe()}' does not hold: the mechanism achieves "
                f"{achieved} ({check.currency})."
            )
        findings.append(
            Finding(
                "bound-not-met",
                "critical",
                message,
                {"bound": check.bound.describe(), "achieved": float(check.achieved), "currency": check.currency},
            )
        )
    return findings


@rule("known-seed", "critical", "The run used a known seed")
def known_seed(ctx) -> list[Finding]:
    """An explicit seed makes the noise reproducible: anyone who knows it can remove it
    (judged on a compiled release only)."""
    seed = getattr(ctx.result, "seed", None)
    if seed is None:
        return []
    if getattr(getattr(ctx.result, "mechanism", None), "own_random_source", ""):
        return []  # a library drew the noise from its own generator, which the seed never reached
    message = (
        "The release was produced with an explicit seed (its value is withheld from findings and reports). "
        "Anyone who knows the seed can reproduce the random draws and remove them: this release is not "
        "protected. Use it for tests only."
    )
    return [Finding("known-seed", "critical", message, {"seeded": True})]


# ---- what is released: how the mechanism's design is presented ----------------------------------

# What a plugin may raise when asked about its design on a spec it cannot parse.
_DESIGN_FAILURES = (DpspecError, LookupError, TypeError, ValueError, AttributeError, ArithmeticError)


def _design_hook(ctx, name: str) -> list:
    """A mechanism's optional design hook (`clipping_bounds`, `composed_parts`), [] when it has
    none or cannot answer for this spec."""
    checked = ctx.checked
    mech = checked.mechanism if checked is not None else None
    if mech is None or not checked.params or ctx.spec.domain is None:
        return []
    try:
        return list(getattr(mech, name)(ctx.spec, checked.params) or [])
    except _DESIGN_FAILURES:
        return []


def _declared_limits(domain: ir.Domain, table: str, column: str) -> tuple:
    """The column's declared range (public), as (low, high); None at an end the type leaves open."""
    t = domain.table(table) if domain is not None else None
    col = t.column(column) if t is not None else None
    if col is None:
        return None, None
    if col.type.kind == "bool":
        return 0, 1
    return col.type.low, col.type.high


def _observed_ranges(ctx, bounds) -> dict:
    """{"table.column": (min, max)} of the clipped columns in the confidential data: from a
    compiled release's internal figures, or read from the data when the spec checks."""
    if ctx.result is not None:
        release = getattr(ctx.result, "release", None)
        return dict((getattr(release, "internal", None) or {}).get("observed_ranges") or {})
    if ctx.checked is None or not ctx.checked.passed:
        return {}

    out = {}
    for table in sorted({b.table for b in bounds}):
        source = next((d for d in ctx.spec.data if d.table == table), None)
        if source is None:
            continue
        try:
            frame = _data.load_table(ctx.spec, source)
        except DpspecError:
            continue
        for b in bounds:
            if b.table == table and b.column in frame.columns and len(frame):
                values = frame[b.column].dropna().astype("int64")
                if len(values):
                    out[f"{table}.{b.column}"] = (int(values.min()), int(values.max()))
    return out


@rule("clipping-from-data", "warning", "Clipping bounds that are the confidential data's own extremes")
def clipping_from_data(ctx) -> list[Finding]:
    """A mechanism clips a confidential column to declared bounds that are exactly its smallest
    and largest values in the data (an end at the domain's declared limit counts as public):
    bounds read off the data publish its extremes, often one person's value, with no noise and
    no budget, and clip nothing, so the sensitivity they set is the data's own. The audit cannot
    see how the bounds were chosen; it reports the coincidence, computed from the confidential data."""
    bounds = _design_hook(ctx, "clipping_bounds")
    if not bounds:
        return []
    ranges = _observed_ranges(ctx, bounds)
    findings = []
    for b in bounds:
        found = ranges.get(f"{b.table}.{b.column}")
        if found is None:
            continue
        observed = {"low": found[0], "high": found[1]}
        declared = dict(zip(("low", "high"), _declared_limits(ctx.spec.domain, b.table, b.column)))
        stated = {"low": b.low, "high": b.high}
        public = [e for e in stated if declared[e] is not None and stated[e] == declared[e]]
        from_data = [e for e in stated if e not in public and stated[e] == observed[e]]
        if not from_data or len(public) + len(from_data) < 2:
            continue
        shown = f"[{_num(b.low)}, {_num(b.high)}]"
        which = (
            "its smallest and largest values"
            if len(from_data) == 2
            else f"its {'smallest' if from_data[0] == 'low' else 'largest'} value (the other end is the domain's "
            "declared limit)"
        )
        message = (
            f"Query '{b.query}' clips {b.table}.{b.column} to {shown}, and "
            + ("these are" if len(from_data) == 2 else f"{_num(stated[from_data[0]])} is")
            + f" exactly {which} in the confidential data. Bounds read off the data are a data-dependent "
            "design: the spec publishes the extremes (often one person's value) with no noise and no budget, and "
            "the sensitivity they set is the data's own, so the stated budget does not cover them. This may be a "
            "coincidence at a natural limit; the audit cannot see how the bounds were chosen. Declare bounds from "
            "public knowledge (a pay scale, a legal maximum, the column's declared range) or spend budget on a "
            "private estimate of them. (This finding is computed from the confidential data; it says only that "
            "bounds the spec already states are the data's extremes.)"
        )
        findings.append(
            Finding(
                "clipping-from-data",
                "warning",
                message,
                {
                    "query": b.query,
                    "table": b.table,
                    "column": b.column,
                    "bounds": [b.low, b.high],
                    "ends_from_data": from_data,
                    "ends_at_declared_limits": public,
                },
            )
        )
    return findings


_STATED_FIGURE = re.compile(r"\b(epsilon|rho|eps)\b\s*(?:=|<=|≤|of|at|is)?\s*(\d+(?:\.\d+)?(?:/\d+)?)", re.I)
_QUANTITY = {"pure": "epsilon", "zcdp": "rho"}


def _stated_figures(spec: ir.Spec, quantity: str) -> list[tuple[str, Fraction]]:
    """(where, value): plain bounds in the native quantity, and figures its title states."""
    out = [
        (f"the budget bound '{b.describe()}'", b.value)
        for b in spec.budgets
        if b.quantity == quantity and not b.with_ and not b.relation and not b.method
    ]
    for m in _STATED_FIGURE.finditer(spec.title or ""):
        word = "epsilon" if m.group(1).lower() in ("epsilon", "eps") else "rho"
        if word == quantity:
            out.append((f"the title ('{m.group(0)}')", Fraction(m.group(2))))
    return out


@rule("per-query-budget", "warning", "One query's share of the budget presented as the release's total")
def per_query_budget(ctx) -> list[Finding]:
    """The mechanism composes several measurements, and a figure the spec states as its budget (a
    bound in the budget block, or a number in its title) is what one of them spends, not their
    sum: a reader takes one query's share for the loss of the whole release."""
    parts = [p for p in _design_hook(ctx, "composed_parts") if p.budget > 0]
    if len(parts) < 2:
        return []
    try:
        quantity = _QUANTITY.get(ctx.checked.mechanism.flavor(ctx.spec, ctx.checked.params).premetric)
    except _DESIGN_FAILURES:
        return []
    if quantity is None:
        return []
    total = sum((p.budget for p in parts), Fraction(0))
    scale = (
        1.0  # native figures to the spec's flavor (a coarser unit, change-one), when the ledger is in the same quantity
    )
    ledger, stmt = ctx.ledger, ctx.statement
    if (
        ledger is not None
        and ledger.declared is not None
        and stmt is not None
        and ledger.declared.kind == stmt.actual.kind
    ):
        native = _main_param(stmt.actual, value=True)
        declared = _main_param(ledger.declared, value=True)
        if native and declared and math.isfinite(declared):
            scale = declared / native
    findings = []
    for where, value in _stated_figures(ctx.spec, quantity):
        v = float(value)
        if any(math.isclose(v, float(total) * f, rel_tol=1e-9) for f in {1.0, scale}):
            continue
        hits = [
            (p, f) for p in parts for f in sorted({1.0, scale}) if math.isclose(v, float(p.budget) * f, rel_tol=1e-9)
        ]
        if not hits:
            continue
        names = sorted({p.name for p, _ in hits})
        f = hits[0][1]
        whole = float(total) * f
        message = (
            f"{where[:1].upper()}{where[1:]} states {quantity} = {format_figure(v)}, which is what "
            + (f"query '{names[0]}' spends" if len(names) == 1 else f"each of the queries {', '.join(names)} spends")
            + f" alone; mechanism '{ctx.checked.mechanism.name}' composes {len(parts)} parts "
            f"({', '.join(f'{p.name}: {ir.format_number(p.budget)}' for p in parts)}) and spends "
            f"{quantity} = {format_figure(whole)} in all"
            + (" in the spec's flavor" if f != 1.0 else "")
            + f". Taken as the release's budget, the figure understates the loss {format_figure(whole / v)}-fold: "
            "state the total, and each query's share beside it."
        )
        findings.append(
            Finding(
                "per-query-budget",
                "warning",
                message,
                {
                    "where": where,
                    "stated": value,
                    "quantity": quantity,
                    "matches": names,
                    "total": whole,
                    "parts": {p.name: p.budget for p in parts},
                },
            )
        )
    return findings


@hookimpl
def dpspec_audit_rules():
    return list(RULES)
