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
    where: object = attrs.field(default=None, eq=False, repr=False)  # the rho's parameter, to locate a problem


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


def _names(value) -> tuple[str, ...] | None:
    if isinstance(value, ir.Name):
        return (value.text,)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, (ir.Name, str)) for v in value):
        return tuple(str(v) for v in value)
    return None


def _detail(text: str, columns) -> tuple[Detail | None, str | None]:
    text = text.strip()
    if text == "total":
        return Detail("total", ()), None
    names = tuple(n.strip() for n in text.split("*"))
    missing = [n for n in names if n not in columns]
    if missing:
        return None, f"'{missing[0]}' is not a column of the table"
    return Detail("*".join(names), names), None


def parse(spec: ir.Spec, params: dict, raw: dict | None = None, call_loc=None) -> tuple[Design | None, list[Diagnostic]]:
    """Validate the parameters into a Design; every problem is located at its parameter."""
    problems: list[Diagnostic] = []
    levels, components = geo_levels(spec)
    table = spec.domain.table(params["table"])
    columns = set(table.column_names) if table else set()
    raw = raw or {}

    def err(message, where=None):
        problems.append(Diagnostic(message, *ir.line_column(where if where is not None else call_loc)))

    detailed = _names(params.get("detailed_geographies")) or (ROOT,)
    for g in detailed:
        if g not in levels:
            err(f"detailed_geographies: '{g}' is not a geography level (known: {', '.join(levels)})", raw.get("detailed_geographies"))
    suppress_at = _names(params.get("suppress_at")) or ()
    for g in suppress_at:
        if g not in levels:
            err(f"suppress_at: '{g}' is not a geography level (known: {', '.join(levels)})", raw.get("suppress_at"))
    fraction = params.get("stage1_fraction")
    if fraction is not None and not (0 < fraction < 1):
        err(f"stage1_fraction must lie strictly between 0 and 1, got {ir.format_number(fraction)}", raw.get("stage1_fraction"))
    if fraction is None and not params.get("public_totals"):
        err("give either stage1_fraction (a two-stage design) or public_totals (the detail is chosen from published counts)")
    suppression = params.get("zero_suppression")
    tables_block = params.get("tables")
    tables = []
    if not isinstance(tables_block, ir.ParamBlock) or not tables_block.params:
        err("tables: expected a block such as { t1: { rho: {...} thresholds: {...} details: [...] } }", raw.get("tables"))
        return None, problems
    for tp in tables_block.params:
        td = _table(tp, levels, columns, err, fraction if fraction is not None and 0 < fraction < 1 else None,
                    params.get("max_groups"))
        if td is not None:
            tables.append(td)
    if problems:
        return None, problems
    design = Design(tuple(tables), levels, components, tuple(detailed), fraction,
                    suppression, tuple(suppress_at), int(params["max_race_codes"]),
                    params.get("max_groups"))
    declared = params.get("total_rho")
    if declared is not None and declared != design.total_rho():
        err(f"total_rho: the tables' budgets add up to {ir.format_number(design.total_rho())}, "
            f"not the declared {ir.format_number(declared)}", raw.get("total_rho"))
        return None, problems
    return design, problems


def _table(tp: ir.Param, levels, columns, err, fraction=None, max_groups=None) -> TableDesign | None:
    block = tp.value
    if not isinstance(block, ir.ParamBlock):
        err(f"tables: '{tp.name}' must be a block with rho, thresholds and details", tp)
        return None
    for p in block.params:
        if p.name not in ("rho", "thresholds", "details"):
            err(f"tables: {tp.name}: unknown entry '{p.name}' (expected rho, thresholds, details)", p)
    rho_p, thr_p, det_p = block.get("rho"), block.get("thresholds"), block.get("details")
    if rho_p is None or thr_p is None or det_p is None:
        err(f"tables: {tp.name} needs rho, thresholds and details", tp)
        return None
    details = []
    items = det_p.value if isinstance(det_p.value, tuple) else (det_p.value,)
    for item in items:
        if not isinstance(item, str):
            err(f"{tp.name}.details: each entry is a string such as \"total\" or \"QSEX*AGE4\"", det_p)
            return None
        d, problem = _detail(item, columns)
        if problem:
            err(f"{tp.name}.details: {problem}", det_p)
            return None
        details.append(d)
    if not details or details[0].variables:
        err(f"{tp.name}.details: the first rung must be \"total\" (what a group below every threshold gets)", det_p)
    rho = _per_level(rho_p, levels, f"{tp.name}.rho", err)
    thresholds = _per_level(thr_p, levels, f"{tp.name}.thresholds", err)
    if rho is None or thresholds is None:
        return None
    cells = []
    for (geo, lv), value in rho.items():
        if not isinstance(value[0], Fraction) or value[0] < 0:
            err(f"{tp.name}.rho: {geo}.level{lv} must be a non-negative number", value[1])
            continue
        thr = thresholds.get((geo, lv))
        if thr is None:
            err(f"{tp.name}.thresholds: no thresholds for {geo}.level{lv}", thr_p)
            continue
        tv, where = thr
        tv = tv if isinstance(tv, tuple) else (tv,)
        if not all(isinstance(t, Fraction) and t.denominator == 1 for t in tv):
            err(f"{tp.name}.thresholds: {geo}.level{lv} must be a list of whole numbers", where)
            continue
        if any(b <= a for a, b in zip(tv, tv[1:])):
            err(f"{tp.name}.thresholds: {geo}.level{lv} must be strictly increasing, got "
                f"[{', '.join(ir.format_number(t) for t in tv)}]", where)
            continue
        if len(tv) != len(details) - 1:
            err(f"{tp.name}.thresholds: {geo}.level{lv} has {len(tv)} thresholds but the ladder has "
                f"{len(details)} details (one threshold between consecutive details)", where)
            continue
        problem = sampler_problem(f"{tp.name}.rho {geo}.level{lv}", value[0], fraction, int(max_groups or 1))
        if problem is not None:
            err(problem, value[1])
            continue
        cells.append(Cell(tp.name, geo, lv, value[0], tuple(int(t) for t in tv), value[1]))
    return TableDesign(tp.name, tuple(details), tuple(cells))


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
    return (f"safetab: the noise of {name} cannot be drawn: {problem} (each of its counts has sigma² = k / (2 rho_stage) "
            f"with the fan-out k = {fanout} the run uses{' and rho_stage its smallest stage' if fraction is not None else ''})")


def _per_level(p: ir.Param, levels, what, err):
    """{(geo, iteration level): (value, param)} from { geo: { level1: v  level2: v } }."""
    if not isinstance(p.value, ir.ParamBlock):
        err(f"{what}: expected a block {{ geography: {{ level1: ...  level2: ... }} }}", p)
        return None
    out = {}
    for g in p.value.params:
        if g.name not in levels:
            err(f"{what}: '{g.name}' is not a geography level (known: {', '.join(levels)})", g)
            continue
        if not isinstance(g.value, ir.ParamBlock):
            err(f"{what}: {g.name} must be a block {{ level1: ...  level2: ... }}", g)
            continue
        for lv in g.value.params:
            if lv.name not in ITERATION_LEVELS:
                err(f"{what}: {g.name}: unknown iteration level '{lv.name}' (expected level1, level2)", lv)
                continue
            out[(g.name, ITERATION_LEVELS[lv.name])] = (lv.value, lv)
    return out


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
