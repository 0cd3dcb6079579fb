"""The SafeTab design a spec declares, validated, with its exact zCDP accounting.

One *table* (SafeTab-P's T1/T2 person counts; SafeTab-H's T3 household type and T4 tenure)
has, for every (geography level, iteration level), a budget rho, thresholds and a ladder of
stage-2 details (detail 0 = total only, then finer tables). SafeTab-P measures a stage-1
total with `stage1_fraction` of a cell's rho and the stage-2 table with the rest; SafeTab-H has
no stage 1 (the choice comes from SafeTab-P's published totals) and spends all of rho on it.

Why the per-(geography, iteration level) rho is exactly the guarantee: with fan-out k (the
number of group cells one record reaches), every noise variance is sigma^2 = k / (2 rho_stage),
so each group a record belongs to costs rho_1/k + rho_2/k = rho/k (its stage-2 cells partition
the group, so only one changes) and k groups cost rho. Geography levels compose sequentially
(every record is in one unit of each), units of a level in parallel; tables sequentially.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec.api import Diagnostic, ir, sampler_limit_problem

ROOT = "nation"
NATION_CODE = "US"  # the root's one unit
ITERATION_LEVELS = {"level1": 1, "level2": 2}


@attrs.frozen
class Detail:
    """One rung of the ladder: the variables of the stage-2 table (() = total only)."""

    name: str
    variables: tuple[str, ...]


@attrs.frozen
class Cell:
    """Budget and thresholds of one (table, geography level, iteration level)."""

    table: str
    geo: str
    level: int
    rho: Fraction
    thresholds: tuple[int, ...]
    where: tuple = attrs.field(default=(), eq=False, repr=False)  # the path of its rho, to locate a problem


@attrs.frozen
class TableDesign:
    name: str
    details: tuple[Detail, ...]
    cells: tuple[Cell, ...]

    def cell(self, geo: str, level: int) -> Cell | None:
        return next((c for c in self.cells if c.geo == geo and c.level == level), None)


@attrs.frozen
class Design:
    tables: tuple[TableDesign, ...]
    geo_levels: tuple[str, ...]  # nation, hierarchy levels, then the components
    components: tuple[str, ...]
    detailed_geos: tuple[str, ...]
    stage1_fraction: Fraction | None  # None: the choice comes from public totals
    suppression: Fraction | None
    suppress_at: tuple[str, ...]
    max_race_codes: int
    max_groups: int | None

    @property
    def two_stage(self) -> bool:
        return self.stage1_fraction is not None

    def granularity(self, geo: str) -> str:
        return "detailed" if geo in self.detailed_geos else "coarse"

    def stages(self, cell: Cell) -> list[tuple[str, Fraction]]:
        """(stage, rho) of one cell: stage 1 and 2, or the single measurement."""
        if cell.rho == 0:
            return []
        if self.two_stage:
            return [("stage 1", cell.rho * self.stage1_fraction), ("stage 2", cell.rho * (1 - self.stage1_fraction))]
        return [("stage 2", cell.rho)]

    def total_rho(self) -> Fraction:
        return sum((c.rho for t in self.tables for c in t.cells), Fraction(0))


def geo_levels(spec: ir.Spec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    geo = spec.domain.geography
    if geo is None:
        return (ROOT,), ()
    components = tuple(getattr(geo, "components", ()) or ())
    return (ROOT, *geo.levels, *components), components


def parse(spec: ir.Spec, params: dict) -> tuple[Design | None, list[Diagnostic]]:
    """Validate the resolved parameters into a Design; every problem carries the path of the
    value it is about (the core turns it into a line)."""
    problems: list[Diagnostic] = []
    levels, components = geo_levels(spec)

    def err(message, *path):
        problems.append(Diagnostic(message, path=path))

    detailed = tuple(params.get("detailed_geographies") or (ROOT,))
    suppress_at = tuple(params.get("suppress_at") or ())
    fraction = params.get("stage1_fraction")
    if fraction is not None and not (0 < fraction < 1):
        err(f"stage1_fraction must lie strictly between 0 and 1, got {ir.format_number(fraction)}", "stage1_fraction")
    if fraction is None and not params.get("public_totals"):
        err(
            "give either stage1_fraction (a two-stage design) or public_totals (the detail is chosen from published counts)"
        )
    suppression = params.get("zero_suppression")
    tables = []
    if not params.get("tables"):
        err("tables: expected a block such as { t1: { rho: {...} thresholds: {...} details: [...] } }", "tables")
        return None, problems
    for name, given in params["tables"].items():
        td = _table(
            name, given, err, fraction if fraction is not None and 0 < fraction < 1 else None, params.get("max_groups")
        )
        if td is not None:
            tables.append(td)
    if problems:
        return None, problems
    design = Design(
        tuple(tables),
        levels,
        components,
        detailed,
        fraction,
        suppression,
        suppress_at,
        int(params["max_race_codes"]),
        params.get("max_groups"),
    )
    declared = params.get("total_rho")
    if declared is not None and declared != design.total_rho():
        err(
            f"total_rho: the tables' budgets add up to {ir.format_number(design.total_rho())}, "
            f"not the declared {ir.format_number(declared)}",
            "total_rho",
        )
        return None, problems
    return design, problems


def _table(name: str, given: dict, err, fraction=None, max_groups=None) -> TableDesign | None:
    """One table's ladder and cells from its resolved block (rho and thresholds per geography
    and iteration level, the details as query expressions)."""
    at = ("tables", name)
    details = [Detail("*".join(q), tuple(q)) if q else Detail("total", ()) for q in given["details"]]
    if not details or details[0].variables:
        err(
            f'{name}.details: the first rung must be "total" (what a group below every threshold gets)',
            *at,
            "details",
            *((0,) if details else ()),
        )
    cells = []
    for geo, per_level in given["rho"].items():
        for level_name, rho in per_level.items():
            lv = ITERATION_LEVELS[level_name]
            where = (*at, "rho", geo, level_name)
            tv = given["thresholds"].get(geo, {}).get(level_name)
            if tv is None:
                err(f"{name}.thresholds: no thresholds for {geo}.level{lv}", *at, "thresholds")
                continue
            thr_at = (*at, "thresholds", geo, level_name)
            if any(b <= a for a, b in zip(tv, tv[1:])):
                err(
                    f"{name}.thresholds: {geo}.level{lv} must be strictly increasing, got "
                    f"[{', '.join(str(t) for t in tv)}]",
                    *thr_at,
                )
                continue
            if len(tv) != len(details) - 1:
                err(
                    f"{name}.thresholds: {geo}.level{lv} has {len(tv)} thresholds but the ladder has "
                    f"{len(details)} details (one threshold between consecutive details)",
                    *thr_at,
                )
                continue
            problem = sampler_problem(f"{name}.rho {geo}.level{lv}", rho, fraction, int(max_groups or 1))
            if problem is not None:
                err(problem, *where)
                continue
            cells.append(Cell(name, geo, lv, rho, tuple(tv), where))
    return TableDesign(name, tuple(details), tuple(cells))


def sampler_problem(name: str, rho: Fraction, fraction, fanout: int) -> str | None:
    """A cell's rho so small that its noise is beyond the exact discrete Gaussian, known at `check`:
    its smallest stage spends rho·min(f, 1 - f) and each of its counts gets sigma² = k / (2 rho_stage),
    k the fan-out `run` uses (the declared max_groups, else the public iteration table's bound: see
    `SafeTab.check`), so `check` refuses exactly what `compile` could not draw."""
    if rho == 0:
        return None
    least = rho * min(fraction, 1 - fraction) if fraction is not None else rho
    problem = sampler_limit_problem("discrete_gaussian", Fraction(fanout) / (2 * least), (name, rho))
    if problem is None:
        return None
    return (
        f"safetab: the noise of {name} cannot be drawn: {problem} (each of its counts has sigma² = k / (2 rho_stage) "
        f"with the fan-out k = {fanout} the run uses{' and rho_stage its smallest stage' if fraction is not None else ''})"
    )


def sigma2(fanout: int, rho: Fraction) -> Fraction:
    """Noise variance of a count with L2 sensitivity sqrt(fanout) spending rho: k / (2 rho)."""
    return Fraction(fanout) / (2 * rho)


def variable_values(spec: ir.Spec, params: dict, design: Design) -> dict:
    """Every stage-2 variable with its declared values as text (the order of the domain)."""
    table = spec.domain.table(params["table"])
    out = {}
    for td in design.tables:
        for d in td.details:
            for v in d.variables:
                ty = table.column(v).type
                if ty.kind == "enum":
                    out[v] = [str(x) for x in ty.values]
                elif ty.kind == "int":
                    out[v] = [str(x) for x in range(ty.low, ty.high + 1)]
                elif ty.kind == "bool":
                    out[v] = ["False", "True"]
    return out
