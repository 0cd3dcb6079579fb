"""Protection in plain words: the achieved budget read as what an attacker can learn about one
unit, and about a coarser entity (patient, household) by group privacy where the domain bounds
how many units it holds. Computed with the audit (`Audit.plain_words`), rendered by the report,
which prints the formula next to each number so a reader can recompute it. Numbers come from
`dpspec.budget.interpret`."""

from __future__ import annotations

import math

from dpspec import ir
from dpspec.audit.currency import ACHIEVED, ancestors, flavor_spec, group_size, quote, unit_word
from dpspec.budget import ConversionError, convert, group
from dpspec.budget.interpret import CURVES, PRIORS, TEST_ALPHAS, read
from dpspec.budget.ledger import DEFAULT_DELTA


def reading_delta(spec: ir.Spec) -> tuple[float, str]:
    """The delta at which zCDP and GDP budgets are read: the spec's own, else the default."""
    p = spec.premetric
    if p is not None and p.option("delta") is not None:
        return float(p.option("delta")), "the premetric's delta"
    for b in spec.budgets:
        for name, value in b.with_:
            if name == "delta":
                return float(value), f"the delta of the bound '{b.describe()}'"
    return DEFAULT_DELTA, "dpspec's default; the spec states none"


def _readable(budget, delta: float):
    """Rényi budgets of one order are read through approximate DP at delta."""
    if budget.kind == "renyi":
        return convert(budget, "approx", delta=delta).result
    return budget


def _row(who: str, budget, source: str, delta: float) -> dict:
    r = read(_readable(budget, delta), delta)
    return {
        "who": who,
        "budget": str(budget),
        "source": source,
        "kind": r.budget.kind,
        "epsilon": r.epsilon,
        "delta": r.delta,
        "finite": math.isfinite(r.epsilon),
        "posteriors": [{"prior": p, "posterior": q} for p, q in r.posteriors],
        "powers": [{"alpha": a, "power": w} for a, w in r.powers],
        "formula": r.formula,
        "curve": r.curve,
        "read_as": {
            "premetric": r.budget.kind,
            **{k: float(v) for k, v in r.budget.params().items()},
        },  # a picture's input
    }


def plain_words(spec: ir.Spec, ledger=None, result=None, account=None) -> dict:
    """The section's model: one row per protected entity (the unit, then bounded coarser ones)."""
    flavor = flavor_spec(spec)
    out = {
        "available": False,
        "rows": [],
        "priors": list(PRIORS),
        "alphas": list(TEST_ALPHAS),
        "problem": None,
        "unbounded": [],
    }
    budget, source = None, None
    if ledger is not None and ledger.declared is not None:
        budget, source = ledger.declared, ACHIEVED
    else:
        q = quote(spec, result, account)
        if q is not None:
            budget, source = q.budget, q.source
    if budget is None or flavor.unit is None:
        out["problem"] = "no budget is known for this spec, so there is nothing to read"
        return out
    delta, delta_source = reading_delta(flavor)
    out.update({"delta": delta, "delta_source": delta_source})
    unit = flavor.unit
    domain = flavor.domain
    try:
        out["rows"].append(_row(f"one {unit_word(domain, unit.table)}", budget, source, delta))
        for coarse in ancestors(unit.table, domain):
            k = group_size(unit.table, coarse, unit, domain=domain)
            word = unit_word(domain, coarse)
            if k is None:
                out["unbounded"].append(word)
                continue
            try:
                conv = group(budget, k)
            except ConversionError:
                continue
            out["rows"].append(
                _row(f"one {word} (at most {k} {unit.table})", conv.result, f"group privacy: {conv.note}", delta)
            )
    except (ConversionError, ValueError) as exc:
        out["problem"] = str(exc)
        out["rows"] = []
        return out
    out["available"] = bool(out["rows"])
    formulas: dict[tuple[str, str], list[str]] = {}
    for r in out["rows"]:
        formulas.setdefault((r["formula"], r["curve"]), []).append(r["who"])
    out["formulas"] = [{"who": who, "formula": f, "curve": c} for (f, c), who in formulas.items()]
    return out


__all__ = ["plain_words", "reading_delta", "CURVES"]
