"""The aggregate mechanism's design: its queries and budget split, parsed once from the parameters.

Why a frozen object: the plugin's check, budget, run and accuracy all read the same queries; each
parses nothing again, and a problem is found once, at the line that causes it.
"""
from __future__ import annotations

import math
from fractions import Fraction

import attrs

from dpspec.api import Diagnostic, ir

STATISTICS = ("count", "sum", "mean", "quantile")
QUERY_KEYS = ("statistic", "column", "bounds", "q", "grid_step", "share")
EPSILON_DIGITS = 10**6
POSTPROCESS = ("none", "nonnegative", "total")
TOTAL_BIAS = ("Post-processing with the public total: the noisy counts of each group of cells are replaced by the "
              "nearest (least-squares) nonnegative whole numbers that add up to the group's public total. This is "
              "post-processing of noisy answers and a total released elsewhere, so it costs no budget (the guarantee "
              "is conditioned on that total, as the public block says), but it is biased: a cell whose noisy count "
              "was negative is raised to 0, and every other cell of its group is lowered by the same amount to keep "
              "the total, so small cells come out too high and large ones slightly too low. A released count is then "
              "no longer the true count plus symmetric noise, so its 95% interval from the noise law does not apply: "
              "the interval columns of the post-processed counts are empty.")  # a quantile's epsilon under zCDP: a rational just below sqrt(8 rho)


@attrs.frozen
class Query:
    """One released statistic per cell. share: its part of the mechanism's budget (exact)."""

    name: str
    statistic: str
    column: str | None
    low: int | None
    high: int | None
    q: Fraction | None
    grid_step: int | None
    share: Fraction

    @property
    def clipped(self) -> bool:
        return self.statistic != "count"

    @property
    def grid(self) -> list[int]:
        """The quantile's candidate outputs: the declared grid from low to high."""
        return list(range(self.low, self.high + 1, self.grid_step)) if self.statistic == "quantile" else []


@attrs.frozen
class Design:
    table: str
    by: tuple[str, ...]
    noise: str  # "laplace" (pure epsilon) or "gaussian" (zCDP rho)
    total: Fraction  # the mechanism's epsilon (laplace) or rho (gaussian)
    queries: tuple[Query, ...]
    postprocess: str  # "none", "nonnegative" or "total" (see POSTPROCESS)
    total_by: tuple[str, ...] = ()  # postprocess total: the public total's columns (a subset of `by`)

    @property
    def nonnegative(self) -> bool:
        return self.postprocess in ("nonnegative", "total")

    @property
    def premetric(self) -> str:
        return "pure" if self.noise == "laplace" else "zcdp"

    def budget_of(self, query: Query) -> Fraction:
        return self.total * query.share


def quantile_epsilon(rho: Fraction) -> Fraction:
    """The exponential mechanism's epsilon under a zCDP share rho: the largest multiple of 1e-6
    whose square is at most 8 rho (the mechanism is epsilon²/8-zCDP), so the stated rho is exact."""
    return Fraction(math.isqrt((8 * rho * EPSILON_DIGITS**2).__floor__()), EPSILON_DIGITS)


def _text(value) -> str | None:
    return str(value) if isinstance(value, (str, ir.Name)) else None


def _query(name: str, block: ir.ParamBlock, table: ir.Table, where, problems: list) -> dict:
    """One query's settings from its block (or the mechanism block itself, when flat)."""
    got: dict = {"name": name}
    stat_p = block.get("statistic")
    stat = _text(stat_p.value) if stat_p else None
    if stat not in STATISTICS:
        problems.append(Diagnostic(f"query '{name}': 'statistic' must be one of {', '.join(STATISTICS)}", *ir.line_column(stat_p, where)))
        return {}
    got["statistic"] = stat
    col_p = block.get("column")
    column = _text(col_p.value) if col_p else None
    if stat != "count" or column is not None:
        col = table.column(column) if column else None
        if col is None:
            problems.append(Diagnostic(f"query '{name}': {stat} needs 'column', a column of table '{table.name}'"
                                       + (f" ('{column}' is not one)" if column else ""), *ir.line_column(col_p, where)))
            return {}
        if stat != "count" and col.type.kind not in ("int", "bool"):
            problems.append(Diagnostic(f"query '{name}': {stat} needs a numeric column (int or bool); '{column}' is "
                                       f"{col.type.kind}", *ir.line_column(col_p, where)))
            return {}
    got["column"] = column
    bounds_p = block.get("bounds")
    low = high = None
    if stat != "count":
        value = bounds_p.value if bounds_p else None
        if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, Fraction) and v.denominator == 1 for v in value)):
            problems.append(Diagnostic(f"query '{name}': {stat} needs clipping 'bounds: [lo, hi]' (whole numbers, "
                                       "declared, never taken from the data)", *ir.line_column(bounds_p, where)))
            return {}
        low, high = int(value[0]), int(value[1])
        if low > high:
            problems.append(Diagnostic(f"query '{name}': bounds [{low}, {high}] have lo > hi", *ir.line_column(bounds_p, where)))
            return {}
    got["low"], got["high"] = low, high
    q_p = block.get("q")
    q = q_p.value if q_p else None
    if stat == "quantile":
        if not isinstance(q, Fraction) or not 0 < q < 1:
            problems.append(Diagnostic(f"query '{name}': a quantile needs 'q' strictly between 0 and 1",
                                       *ir.line_column(q_p, where)))
            return {}
        step_p = block.get("grid_step")
        step = step_p.value if step_p else Fraction(max(1, (high - low) // 100))
        if not isinstance(step, Fraction) or step.denominator != 1 or step < 1:
            problems.append(Diagnostic(f"query '{name}': 'grid_step' must be a whole number of at least 1",
                                       *ir.line_column(step_p, where)))
            return {}
        got["grid_step"] = int(step)
    else:
        got["grid_step"] = None
    got["q"] = q if stat == "quantile" else None
    share_p = block.get("share")
    if share_p is not None and (not isinstance(share_p.value, Fraction) or share_p.value <= 0):
        problems.append(Diagnostic(f"query '{name}': 'share' must be a positive number", *ir.line_column(share_p, where)))
        return {}
    got["share"] = share_p.value if share_p else None
    got["share_at"] = ir.line_column(share_p, where)
    return got


def parse(spec: ir.Spec, params: dict) -> tuple[Design | None, list[Diagnostic]]:
    """The design, or the problems that stop it, each at its line."""
    problems: list[Diagnostic] = []
    call = spec.mechanism
    where = call.loc if call else None
    table = spec.domain.table(params["table"])
    by = tuple(params.get("by") or ())
    for c in by:
        if table.column(c) is None:
            problems.append(Diagnostic(f"'by': table '{table.name}' has no column '{c}'", *ir.line_column(call.params.get("by"), where)))
    noise = params.get("noise") or "laplace"
    budget_name = "epsilon" if noise == "laplace" else "rho"
    other = "rho" if noise == "laplace" else "epsilon"
    total = params.get(budget_name)
    if params.get(other) is not None:
        problems.append(Diagnostic(f"noise {noise} is set by '{budget_name}', not '{other}'", *ir.line_column(call.params.get(other), where)))
    if total is None or total <= 0:
        problems.append(Diagnostic(f"noise {noise} needs a positive '{budget_name}' (the whole release's budget)",
                                   *ir.line_column(call.params.get(budget_name), where)))
    raw = []
    queries_p = call.params.get("queries")
    if queries_p is not None:
        if not isinstance(queries_p.value, ir.ParamBlock) or not queries_p.value.params:
            problems.append(Diagnostic("'queries' is a block of named query blocks: queries { staff { statistic: count } }",
                                       *ir.line_column(queries_p, where)))
        else:
            for p in queries_p.value.params:
                if not isinstance(p.value, ir.ParamBlock):
                    problems.append(Diagnostic(f"query '{p.name}' must be a block ({{ statistic: ... }})", *ir.line_column(p, where)))
                    continue
                for inner in p.value.params:
                    if inner.name not in QUERY_KEYS:
                        problems.append(Diagnostic(f"query '{p.name}': unknown setting '{inner.name}' (known: "
                                                   f"{', '.join(QUERY_KEYS)})", *ir.line_column(inner, where)))
                raw.append(_query(p.name, p.value, table, p.loc or where, problems))
        flat = [k for k in QUERY_KEYS if call.params.get(k) is not None]
        if flat:
            problems.append(Diagnostic(f"'{flat[0]}' is set both flat and in 'queries': write one or the other",
                                       *ir.line_column(call.params.get(flat[0]), where)))
    elif call.params.get("statistic") is not None:
        raw.append(_query(str(params["statistic"]), call.params, table, where, problems))
    else:
        problems.append(Diagnostic("say what to release: 'statistic: count' (one query), or a 'queries' block of named "
                                   "queries", *ir.line_column(None, where)))
    if problems or not all(raw):
        return None, problems
    given = [r["share"] for r in raw if r["share"] is not None]
    if given and len(given) != len(raw):
        problems.append(Diagnostic("give every query a 'share', or none (then they are equal)", *raw[0]["share_at"]))
    elif given and sum(given) != 1:
        problems.append(Diagnostic(f"the queries' shares add up to {ir.format_number(sum(given))}, not 1",
                                   *raw[0]["share_at"]))
    if problems:
        return None, problems
    queries = tuple(Query(r["name"], r["statistic"], r["column"], r["low"], r["high"], r["q"], r["grid_step"],
                          r["share"] if r["share"] is not None else Fraction(1, len(raw))) for r in raw)
    for qy in queries:
        if qy.statistic == "quantile" and len(qy.grid) > 100_000:
            problems.append(Diagnostic(f"query '{qy.name}': the quantile grid has {len(qy.grid):,} points; "
                                       "use a larger grid_step (at most 100,000 points)", *ir.line_column(None, where)))
    post = params.get("postprocess") or "none"
    total_by: tuple = ()
    if post == "total":
        total_by = _total_by(spec, table.name, by, queries, where, problems)
    design = Design(table.name, by, noise, Fraction(total), queries, post, total_by)
    return (None if problems else design), problems


def public_total(spec: ir.Spec, table: str):
    """The public statistic declared `used as total` on the table (a count), or None."""
    return next((p for p in spec.public if p.use == "total" and p.query.table == table), None)


def _total_by(spec, table: str, by: tuple, queries, where, problems: list) -> tuple:
    """postprocess total: the public total's columns, which must group the release's cells."""
    z = public_total(spec, table)
    at = ir.line_column(spec.mechanism.params.get("postprocess"), where)
    if z is None:
        problems.append(Diagnostic("postprocess total makes the counts add up to a public total, but the public block "
                                   f"declares no count of '{table}' 'used as total': the exact total would be released "
                                   "with no budget covering it", *at))
        return ()
    extra = [c for c in z.query.columns if c not in by]
    if extra:
        problems.append(Diagnostic(f"the public total '{z.query.describe()}' is by {', '.join(extra)}, which the "
                                   "release is not by: each group of cells must have its own total", *at))
    if not any(q.statistic == "count" for q in queries):
        problems.append(Diagnostic("postprocess total applies to count queries, and this release has none", *at))
    return tuple(z.query.columns)
