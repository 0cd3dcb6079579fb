"""What the budget would be under other match keys (the seed paper's comparison of strata).

Finer strata give a smaller b, hence a smaller nominal epsilon, but only because more is
published exactly; coarser strata do the opposite. The table here lets a custodian (and the
report) see that trade at a glance: b, the stratum that attains it, and epsilon at a few rates
for keys with coarser and finer geography, with and without the other match columns.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd

from dpspec.api import implied_by, ir, DpspecError, exact_number, unknown
from dpspec_swap.algorithm import largest_stratum, stratum_codes
from dpspec_swap.roles import nesting_parents, roles, swap_table
from dpspec_swap.theorem import as_rate, psa_epsilon

DEFAULT_RATES = (Fraction(1, 100), Fraction(2, 100), Fraction(5, 100), Fraction(10, 100), Fraction(50, 100))
MAX_SUBSET_COLUMNS = 4  # all subsets of the non-geographic match columns, when there are few


def parse_rates(text: str) -> list[Fraction]:
    """'0.01,5%,1/10' -> exact rates; a decimal means exactly what it says (0.05 is 1/20)."""

    rates = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = exact_number(item)
        except DpspecError:
            raise ValueError(f"{item!r} is not a rate (write 0.05, 5% or 1/20)") from None
        if not 0 <= value <= 1:
            raise ValueError(f"rate {item} is outside [0, 1]")
        rates.append(value)
    if not rates:
        raise ValueError("give at least one rate")
    return rates


def epsilon_rows(b: int, rates) -> list[dict]:
    """[{b, rate, epsilon}] for each rate: Theorem II.1 evaluated exactly in the rate."""
    return [{"b": int(b), "rate": float(as_rate(p)), "epsilon": psa_epsilon(int(b), p)} for p in rates]


def stratum_sizes(df: pd.DataFrame, match) -> np.ndarray:
    """Number of records in each stratum code of the key (unused codes count 0)."""
    codes, n_codes = stratum_codes(df, list(match))
    return np.bincount(codes, minlength=n_codes)


def _geography(table: ir.Table, spec: ir.Spec, swap) -> tuple[list[str], list[str]]:
    """(geographic columns coarser than the swapped level, all geographic columns).

    Geography is the domain's hierarchy restricted to this table, plus the nesting parents of
    the swapped columns; a level finer than the swapped one cannot be matched on (it would fix
    the swapped value in every stratum).
    """
    levels = [c for c in (spec.domain.geography.levels if spec.domain.geography else ()) if c in table.column_names]
    for c in swap:
        for parent in reversed(nesting_parents(table, c)):
            if parent not in levels:
                levels.insert(0, parent)
    swapped = [i for i, c in enumerate(levels) if c in swap]
    cut = min(swapped) if swapped else len(levels)
    coarser = [c for c in levels[:cut] if c not in swap]
    return coarser, levels


def alternative_keys(spec: ir.Spec, params: dict) -> list[tuple[str, ...]]:
    """The spec's key first, then: each coarser geographic level or none, crossed with subsets
    of the other match columns, and with the other match columns plus one holding column."""
    table = swap_table(spec, params)
    match, swap, hold = roles(spec, params)
    coarser, levels = _geography(table, spec, swap)
    geo_options = [()] + [(g,) for g in coarser]
    other = [c for c in match if c not in levels]
    if len(other) <= MAX_SUBSET_COLUMNS:
        other_options = [tuple(s) for r in range(len(other) + 1) for s in itertools.combinations(other, r)]
    else:
        other_options = [(), tuple(other)]
    finer = [tuple(other) + (h,) for h in hold if h not in levels]
    keys = [tuple(match)]
    for g, o in itertools.product(geo_options, other_options + finer):
        keys.append(g + o)
    return list(dict.fromkeys(keys))


def stratification(df: pd.DataFrame, key, others) -> dict:
    """b, the stratum attaining it and the number of strata that can swap, for one key."""
    key = list(key)
    b, where = largest_stratum(df, key, [c for c in others if c not in key])
    sizes = stratum_sizes(df, key)
    return {"match": key, "b": int(b), "largest_stratum": where, "strata_of_two_or_more": int((sizes >= 2).sum())}


def stratifications(
    spec: ir.Spec, params: dict, df: pd.DataFrame, extra_keys=(), measure=None, only_from_invariants: bool = False
) -> list[dict]:
    """One row per alternative key (the spec's own first), each computed on `df`.

    from_invariants: the key's counts are published by the spec's declared invariants, so its
    b discloses nothing new. keeps_nesting: the key holds every parent of the swapped columns
    fixed (otherwise a swap could move a county into another state). measure(key, others):
    `stratification` computed elsewhere (an engine's counts; `df` is then unused);
    only_from_invariants: measure only the keys whose counts the invariants publish.
    """
    table = swap_table(spec, params)
    match, swap, hold = roles(spec, params)
    keys = alternative_keys(spec, params) + [tuple(k) for k in extra_keys]
    parents = {ps[0] for c in swap if (ps := nesting_parents(table, c)) and ps[0] not in swap}
    measure = measure or functools.partial(stratification, df)
    rows = []
    for key in dict.fromkeys(keys):
        published = implied_by(ir.CountQuery(table.name, key), spec.invariants)
        if only_from_invariants and not published:
            continue
        row = measure(key, swap + hold + match)
        row["is_spec"] = list(key) == list(match)
        row["from_invariants"] = published
        row["keeps_nesting"] = parents <= set(key)
        rows.append(row)
    return rows


def with_epsilons(rows: list[dict], rates) -> list[dict]:
    """Each row with `epsilon`: [{rate, epsilon}] at the given rates."""
    out = []
    for row in rows:
        eps = [{"rate": r["rate"], "epsilon": r["epsilon"]} for r in epsilon_rows(row["b"], rates)]
        out.append({**row, "epsilon": eps})
    return out


def validate_key(table: ir.Table, swap, key: tuple[str, ...]) -> str | None:
    """A problem with a user-given key, or None."""

    for c in key:
        if c not in table.column_names:
            message, hint = unknown("column", c, table.column_names, f"table '{table.name}'")
            return message + (f"; {hint}" if hint else "")
        if c in swap:
            return f"'{c}' is swapped and cannot be in a match key"
    return None


def format_epsilon(value: float, digits: int = 2) -> str:
    """Budgets as the paper quotes them (two decimals); 'inf' when there is no finite one."""
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"
