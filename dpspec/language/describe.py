"""Plain-language descriptions of a spec: the paper's one-line notation and the five questions.

Shared by `dpspec show`, `dpspec budget` and the reports, so every place says the same thing.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec import ir
from dpspec.language.pufferfish import plain_words

PREMETRIC_WORDS = {
    "pure": (
        "MULT",
        "the multiplicative distance (pure differential privacy): the largest log-ratio of output probabilities",
    ),
    "approximate": (
        "MULT_delta",
        "the delta-approximate multiplicative divergence ((epsilon, delta)-DP): the log-ratio bound may fail with probability up to delta",
    ),
    "zcdp": ("nRényi", "the normalized Rényi metric (zero-concentrated DP, rho)"),
    "renyi": ("Rényi_alpha", "the Rényi divergence of a fixed order alpha (Rényi DP)"),
    "gdp": (
        "GDP",
        "Gaussian differential privacy: distinguishing neighbors is no easier than two unit-variance Gaussians mu apart",
    ),
}
RELATION_WORDS = {
    "hamming": ("Hamming", "changing one {unit} (its records altered, the number of {unit}s fixed)"),
    "symdiff": ("symmetric difference", "adding or removing one {unit}"),
}


def premetric_symbol(p: ir.Premetric | None) -> str:
    if p is None:
        return "?"
    symbol = PREMETRIC_WORDS[p.kind][0]
    options = ", ".join(f"{k}={ir.format_number(v)}" for k, v in p.options)
    return f"{symbol}({options})" if options else symbol


def unit_name(spec: ir.Spec) -> str:
    if spec.unit is None or spec.domain is None:
        return "unit"
    table = spec.domain.table(spec.unit.table)
    return table.unit if table else spec.unit.table


def multiverse_symbol(spec: ir.Spec) -> str:
    if not spec.invariants:
        return "{X}"
    parts = ["×".join(q.columns) if q.columns else f"#{q.table}" for q in spec.invariants]
    return "D[" + "; ".join(parts) + "]"


def notation(spec: ir.Spec, budget: str = "eps_D") -> str:
    """eps_D-DP(X, multiverse, d_X, D_Pr) in the seed paper's notation."""
    domain = spec.domain
    x = f"X_{domain.stage}({domain.name})" if domain and domain.stage else (f"X({domain.name})" if domain else "X")
    d_x = "?"
    if spec.unit:
        d_x = f"d_{RELATION_WORDS[spec.unit.relation][0]}({unit_name(spec)})"
    if spec.pufferfish is not None:  # seed 2, Definition 3: Pufferfish over the pairs given Z, for a class
        z = "; ".join("×".join(p.query.columns) or f"#{p.query.table}" for p in spec.public) or "∅"
        return (
            f"{budget}-Z-Pufferfish({x}, Z=[{z}], class={class_symbol(spec.pufferfish)}, {d_x}, "
            f"{premetric_symbol(spec.premetric)})"
        )
    return f"{budget}-DP({x}, {multiverse_symbol(spec)}, {d_x}, {premetric_symbol(spec.premetric)})"


def class_symbol(c: ir.Pufferfish) -> str:
    options = ", ".join(f"{k}={ir.format_number(v)}" for k, v in c.options)
    return f"{c.kind}({options})" if options else c.kind


BUDGET_WORDS = {
    "pure": "epsilon (ε), the pure-DP budget: the largest log-ratio of the chances of any output with and without one unit",
    "approximate": "epsilon (ε), the budget of (epsilon, delta)-DP: the log-ratio bound, allowed to fail with probability up to delta (δ)",
    "zcdp": "rho (ρ), the zero-concentrated DP budget: a bound on the Rényi divergence of every order, divided by that order",
    "renyi": "epsilon (ε) of Rényi DP: a bound on the Rényi divergence of the stated order alpha (α)",
    "gdp": "mu (μ): telling neighbouring datasets apart is no easier than telling two bell curves mu standard deviations apart",
}


def notation_glossary(spec: ir.Spec, budget: str = "eps_D") -> list[tuple[str, str]]:
    """(symbol, plain words) for each part of `notation`, in order: a printed report has no hover
    text, so every symbol of the one-line form is spelled out next to it."""
    domain = spec.domain
    x = f"X_{domain.stage}({domain.name})" if domain and domain.stage else (f"X({domain.name})" if domain else "X")
    if domain:
        stage = f", at the '{domain.stage}' stage of its life cycle" if domain.stage else ""
        x_words = f"the domain: the data protected, {domain.description or domain.name}{stage}"
    else:
        x_words = "the domain (none declared)"
    kind = spec.premetric.kind if spec.premetric else None
    headline = "the budget, eps_D: how much an output may change with one unit; smaller protects more" + (
        f"; here {BUDGET_WORDS[kind]}" if kind in BUDGET_WORDS else ""
    )
    if spec.invariants:
        listing = "; ".join(q.describe() for q in spec.invariants)
        symbol = multiverse_symbol(spec)
        marks = (["× reads 'by'"] if "×" in symbol else []) + (
            ["#T is the number of rows of table T"] if "#" in symbol else []
        )
        where = (
            f"the multiverse: only datasets that agree exactly on these counts are compared ({listing}); "
            + "; ".join(marks + ["the counts are published without noise"])
        )
    else:
        where = "the multiverse: every dataset of the domain (no statistic is published exactly)"
    d_x, unit_words = "?", "the unit of protection (none declared)"
    if spec.unit:
        d_x = f"d_{RELATION_WORDS[spec.unit.relation][0]}({unit_name(spec)})"
        unit_words = "the input premetric, or unit of protection: neighbouring datasets differ by " + RELATION_WORDS[
            spec.unit.relation
        ][1].format(unit=unit_name(spec))
    how = "the output premetric: how a change in the output is measured, " + (
        PREMETRIC_WORDS[kind][1] if kind else "none declared"
    )
    return [
        (budget, headline),
        (x, x_words),
        (multiverse_symbol(spec), where),
        (d_x, unit_words),
        (premetric_symbol(spec.premetric), how),
    ]


QUOTED_UNDER = {
    "hamming": "quoted for changing one unit",
    "symdiff": "quoted for adding or removing one unit; changing a unit is a removal and an addition",
}
QUOTED_BY = {"bs16": "converted by Bun & Steinke 2016", "cks20": "converted by Canonne, Kamath & Steinke 2020"}


def _bound_words(b: ir.BudgetBound) -> str:
    """A declared bound as written, with its currency words spelled out ('under symdiff' ...)."""
    words = [
        QUOTED_UNDER.get(b.relation, f"quoted under {b.relation}") if b.relation else "",
        QUOTED_BY.get(b.method, f"converted by {b.method}") if b.method else "",
    ]
    words = [w for w in words if w]
    return b.describe() + (f" ({'; '.join(words)})" if words else "")


# a base is the earlier periods' counts: the released period's own are what the release protects
_BASE_PERIODS = {"base": ": its counts of the periods before the released one, not the released period's"}


def five_questions(spec: ir.Spec) -> list[tuple[str, str, str]]:
    """(question, block, answer) in plain language."""
    d = spec.domain
    who = "no domain declared"
    if d:
        public = {p.query.table for p in spec.public}
        tables = ", ".join(
            f"{t.name} ({len(t.columns)} column{'' if len(t.columns) == 1 else 's'}, one row per {t.unit}"
            + ("; public: a release taken as known, not protected here" if t.name in public else "")
            + ")"
            for t in d.tables
        )
        stage = f" at the '{d.stage}' stage of the data's life cycle" if d.stage else ""
        who = f"{d.description or d.name}{stage}: {tables}"
    if spec.invariants:
        where = (
            "only among datasets that agree exactly on: "
            + "; ".join(q.describe() for q in spec.invariants)
            + ". Those statistics are published without noise and are not protected."
        )
    else:
        where = "among all datasets of the domain (no invariants)."
    if spec.public:
        where += (
            " Conditioned on public information: "
            + "; ".join(
                f"{p.query.describe()} ({p.source}"
                + (f"; the mechanism uses it as its {p.use}" + _BASE_PERIODS.get(p.use, "") + ")" if p.use else ")")
                for p in spec.public
            )
            + "."
        )
    if spec.pufferfish is not None:
        z = "the public information above" if spec.public else "no public information"
        where += (
            f" An epsilon-Z-Pufferfish guarantee (seed 2): Z is {z}; the secrets are each unit's presence and "
            f"record, compared in pairs; {plain_words(spec.pufferfish)}."
        )
    what = "no unit declared"
    if spec.unit:
        what = RELATION_WORDS[spec.unit.relation][1].format(unit=unit_name(spec))
        if spec.unit.bound:
            what += f"; each {unit_name(spec)} holds at most {spec.unit.bound.k} {spec.unit.bound.finer} records"
    how = "no premetric declared"
    if spec.premetric:
        how = PREMETRIC_WORDS[spec.premetric.kind][1]
        if spec.premetric.options:
            how += " (" + ", ".join(f"{k} = {ir.format_number(v)}" for k, v in spec.premetric.options) + ")"
        if spec.premetric.events:
            how += f", but measured only on the events '{spec.premetric.events}'"
    how_much = "; ".join(_bound_words(b) for b in spec.budgets) or "no bound declared"
    return [
        ("Who is protected?", "domain", who),
        ("Where does protection extend?", "multiverse", where),
        ("What is the unit of protection?", "input premetric", what),
        ("How is change measured?", "output premetric", how),
        ("How much protection?", "budget", how_much),
    ]


def _param_summary(value, most: int = 8) -> str:
    """A parameter as one short reading: a block by its entries' names (a production TopDown
    spec's recodes and passes would otherwise print as one line of tens of thousands of characters)."""
    if not isinstance(value, ir.ParamBlock):
        return str(ir.to_jsonable(value))
    if not any(isinstance(q.value, ir.ParamBlock) for q in value.params):  # shares and settings: in full if short
        whole = (
            "{"
            + ", ".join(
                f"{q.name}: {ir.format_number(q.value) if isinstance(q.value, Fraction) else ir.to_jsonable(q.value)}"
                for q in value.params
            )
            + "}"
        )
        if len(whole) <= 240:
            return whole
    names = [q.name for q in value.params]
    more = f", ... {len(names) - most} more" if len(names) > most else ""
    return "{" + ", ".join(names[:most]) + more + "}"


def describe_spec(spec: ir.Spec) -> str:
    lines = [spec.title or "(untitled spec)", notation(spec), ""]
    for question, block, answer in five_questions(spec):
        lines.append(f"{question} [{block}]")
        lines.append(f"  {answer}")
    if spec.mechanism:
        params = ", ".join(f"{p.name}: {_param_summary(p.value)}" for p in spec.mechanism.params.params)
        lines += ["", f"mechanism {spec.mechanism.name}: {params}"]
        if any(isinstance(p.value, ir.ParamBlock) for p in spec.mechanism.params.params):
            lines.append("  (blocks by their entries; `dpspec show --json` gives them whole)")
    if spec.releases:
        lines.append("releases: " + "; ".join(r.describe() for r in spec.releases))
    return "\n".join(lines)
