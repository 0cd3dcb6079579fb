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
TOTAL_BIAS = (
    "Post-processing with the public total: the noisy counts of each group of cells are replaced by the "
    "nearest (least-squares) nonnegative whole numbers that add up to the group's public total. This is "
    "post-processing of noisy answers and a total released elsewhere, so it costs no budget (the guarantee "
    "is conditioned on that total, as the public block says), but it is biased: a cell whose noisy count "
    "was negative is raised to 0, and every other cell of its group is lowered by the same amount to keep "
    "the total, so small cells come out too high and large ones slightly too low. A released count is then "
    "no longer the true count plus symmetric noise, so its 95% interval from the noise law does not apply: "
    "the interval columns of the post-processed counts are empty."
)  # a quantile's epsilon under zCDP: a rational just below sqrt(8 rho)


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


def _query(name: str, given: dict, table: ir.Table, at: tuple, problems: list) -> dict:
    """One query's settings from its resolved block (or the mechanism's own parameters, when
    flat); `at` is the path of the block, () when flat."""

    def err(message, key=None):
        problems.append(Diagnostic(message, path=(*at, key) if key else at))
        return {}

    got: dict = {"name": name}
    stat = given.get("statistic")
    if stat not in STATISTICS:
        return err(f"query '{name}': 'statistic' must be one of {', '.join(STATISTICS)}", "statistic")
    got["statistic"] = stat
    column = given.get("column")
    if stat != "count" or column is not None:
        col = table.column(column) if column else None
        if col is None:
            return err(
                f"query '{name}': {stat} needs 'column', a column of table '{table.name}'"
                + (f" ('{column}' is not one)" if column else ""),
                "column",
            )
        if stat != "count" and col.type.kind not in ("int", "bool"):
            return err(
                f"query '{name}': {stat} needs a numeric column (int or bool); '{column}' is {col.type.kind}", "column"
            )
    got["column"] = column
    low = high = None
    if stat != "count":
        bounds = given.get("bounds")
        if bounds is None or len(bounds) != 2:
            return err(
                f"query '{name}': {stat} needs clipping 'bounds: [lo, hi]' (whole numbers, declared, never "
                "taken from the data)",
                "bounds",
            )
        low, high = bounds
        if low > high:
            return err(f"query '{name}': bounds [{low}, {high}] have lo > hi", "bounds")
    got["low"], got["high"] = low, high
    q = given.get("q")
    if stat == "quantile":
        if q is None or not 0 < q < 1:
            return err(f"query '{name}': a quantile needs 'q' strictly between 0 and 1", "q")
        step = given.get("grid_step")
        step = max(1, (high - low) // 100) if step is None else step
        if step < 1:
            return err(f"query '{name}': 'grid_step' must be a whole number of at least 1", "grid_step")
        got["grid_step"] = step
    else:
        got["grid_step"] = None
    got["q"] = q if stat == "quantile" else None
    share = given.get("share")
    if share is not None and share <= 0:
        return err(f"query '{name}': 'share' must be a positive number", "share")
    got["share"] = share
    got["share_at"] = (*at, "share") if share is not None else at
    return got


def parse(spec: ir.Spec, params: dict) -> tuple[Design | None, list[Diagnostic]]:
    """The design, or the problems that stop it, each with the path of its setting (the core
    turns it into a line: `dpspec.api.located`)."""
    problems: list[Diagnostic] = []

    def err(message, *path):
        problems.append(Diagnostic(message, path=path))

    table = spec.domain.table(params["table"])
    by = tuple(params.get("by") or ())
    for c in by:
        if table.column(c) is None:
            err(f"'by': table '{table.name}' has no column '{c}'", "by")
    noise = params.get("noise") or "laplace"
    budget_name = "epsilon" if noise == "laplace" else "rho"
    other = "rho" if noise == "laplace" else "epsilon"
    total = params.get(budget_name)
    if params.get(other) is not None:
        err(f"noise {noise} is set by '{budget_name}', not '{other}'", other)
    if total is None or total <= 0:
        err(f"noise {noise} needs a positive '{budget_name}' (the whole release's budget)", budget_name)
    raw = []
    queries = params.get("queries")
    if queries is not None:
        if not queries:
            err("'queries' is a block of named query blocks: queries { staff { statistic: count } }", "queries")
        for name, given in queries.items():
            raw.append(_query(name, given, table, ("queries", name), problems))
        flat = [k for k in QUERY_KEYS if params.get(k) is not None]
        if flat:
            err(f"'{flat[0]}' is set both flat and in 'queries': write one or the other", flat[0])
    elif params.get("statistic") is not None:
        raw.append(_query(str(params["statistic"]), params, table, (), problems))
    else:
        err("say what to release: 'statistic: count' (one query), or a 'queries' block of named queries")
    if problems or not all(raw):
        return None, problems
    given = [r["share"] for r in raw if r["share"] is not None]
    if given and len(given) != len(raw):
        err("give every query a 'share', or none (then they are equal)", *raw[0]["share_at"])
    elif given and sum(given) != 1:
        err(f"the queries' shares add up to {ir.format_number(sum(given))}, not 1", *raw[0]["share_at"])
    if problems:
        return None, problems
    queries = tuple(
        Query(
            r["name"],
            r["statistic"],
            r["column"],
            r["low"],
            r["high"],
            r["q"],
            r["grid_step"],
            r["share"] if r["share"] is not None else Fraction(1, len(raw)),
        )
        for r in raw
    )
    for qy in queries:
        if qy.statistic == "quantile" and len(qy.grid) > 100_000:
            err(
                f"query '{qy.name}': the quantile grid has {len(qy.grid):,} points; "
                "use a larger grid_step (at most 100,000 points)"
            )
    post = params.get("postprocess") or "none"
    total_by: tuple = ()
    if post == "total":
        total_by = _total_by(spec, table.name, by, queries, problems)
    design = Design(table.name, by, noise, Fraction(total), queries, post, total_by)
    return (None if problems else design), problems


def public_total(spec: ir.Spec, table: str):
    """The public statistic declared `used as total` on the table (a count), or None."""
    return next((p for p in spec.public if p.use == "total" and p.query.table == table), None)


def _total_by(spec, table: str, by: tuple, queries, problems: list) -> tuple:
    """postprocess total: the public total's columns, which must group the release's cells."""
    z = public_total(spec, table)
    at = {"path": ("postprocess",)}
    if z is None:
        problems.append(
            Diagnostic(
                "postprocess total makes the counts add up to a public total, but the public block "
                f"declares no count of '{table}' 'used as total': the exact total would be released "
                "with no budget covering it",
                **at,
            )
        )
        return ()
    extra = [c for c in z.query.columns if c not in by]
    if extra:
        problems.append(
            Diagnostic(
                f"the public total '{z.query.describe()}' is by {', '.join(extra)}, which the "
                "release is not by: each group of cells must have its own total",
                **at,
            )
        )
    if not any(q.statistic == "count" for q in queries):
        problems.append(Diagnostic("postprocess total applies to count queries, and this release has none", **at))
    return tuple(z.query.columns)
