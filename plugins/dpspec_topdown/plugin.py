"""The `topdown` mechanism: the 2020 Census TopDown algorithm as a dpspec plugin.

The spec names the person table, the histogram variables (enumerated columns), the total rho
and its split over geographic levels (`levels`) and over queries (`queries`: one block for every
level, or one block per level). Geography comes from the domain's hierarchy; the root level may
be given a share under the name `nation`. The spec's declared invariants on the person table
are enforced exactly and are the mechanism's induced invariants: an invariant it cannot keep
(a column that is neither a level nor a histogram variable) is a check error.
"""
from __future__ import annotations

from fractions import Fraction

from dpspec.api import Diagnostic, Mechanism, NativeFlavor, ParamSpec, ParameterSchema, Release, SpecError, ir, progress

from .allocation import allocate

__version__ = "1.0.0"
ROOT = "nation"


def _variables(spec: ir.Spec, params: dict) -> dict:
    table = spec.domain.table(params["table"])
    out = {}
    for name in params["variables"]:
        col = table.column(name)
        ty = col.type
        if ty.kind == "enum":
            out[name] = list(ty.values)
        elif ty.kind == "bool":
            out[name] = [False, True]
        elif ty.kind == "int":
            out[name] = list(range(ty.low, ty.high + 1))
    return out


def _recode_value(raw):
    """A category as written in a recode group: a whole number, a name or a string."""
    if isinstance(raw, Fraction):
        return int(raw) if raw.denominator == 1 else raw
    return str(raw)


def _recodes(params: dict, variables: dict) -> list[Recode]:
    """The declared recodes: ``NAME: { of: VARIABLE  LABEL: [values]  ... }`` each."""
    from .histogram import Recode  # numpy, imported when a topdown spec is checked, not at startup

    block = params.get("recodes")
    if block is None:
        return []
    if not isinstance(block, ir.ParamBlock):
        raise SpecError("recodes: expected a block such as { hhinstlevels: { of: hhgq  gq: [1, 2] ... } }")
    out = []
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        body = p.value
        of = body.get("of") if isinstance(body, ir.ParamBlock) else None
        if of is None:
            raise SpecError(Diagnostic(f"recodes: '{p.name}' needs a block with 'of: VARIABLE' and its groups", *loc))
        variable = str(of.value)
        if variable not in variables:
            raise SpecError(Diagnostic(f"recodes: '{p.name}' recodes '{variable}', which is not a histogram "
                                       f"variable (known: {', '.join(variables)})", *loc))
        groups = {}
        for g in body.params:
            if g.name == "of":
                continue
            values = g.value if isinstance(g.value, tuple) else (g.value,)
            by_text = {str(c): c for c in variables[variable]}  # categories are written as text
            groups[g.name] = [by_text.get(str(v), v) for v in map(_recode_value, values)]
        try:
            out.append(Recode.build(p.name, variable, variables[variable], groups))
        except SpecError as exc:
            raise SpecError([Diagnostic(d.message, *loc) for d in exc.diagnostics]) from None
    return out


def _schema(spec: ir.Spec, params: dict) -> Schema:
    from .histogram import Schema

    variables = _variables(spec, params)
    return Schema.from_variables(variables).with_recodes(_recodes(params, variables))


def _query_words(item, variables) -> tuple:
    """A query written as a name (total, detailed, hhgq) or a string ("hhgq * hispanic")."""
    return _query_key(str(item).replace(" ", ""), variables)


def _passes(params: dict, variables) -> dict:
    """{level: {"estimation": [[query, ...], ...], "rounding": [...], "tolerance": t}}.

    Each of the ``estimation`` and ``rounding`` blocks maps a level to its passes: a block of
    named passes in order (``{ pass1: ["total"]  pass2: ["hhgq", "hhgq * hispanic"] }``) or one
    list (one pass; for estimation the remaining measured queries then form a last pass)."""
    out: dict = {}
    tolerance = params.get("pass_tolerance")
    if tolerance is None:  # absent (the checker gives it as None): production's slack
        tolerance = Fraction(1, 10)
    for what in ("estimation", "rounding"):
        block = params.get(what)
        if block is None:
            continue
        if not isinstance(block, ir.ParamBlock):
            raise SpecError(f"{what}: expected a block such as {{ county: [\"total\"] }}")
        for p in block.params:
            if isinstance(p.value, ir.ParamBlock):
                groups = [g.value for g in p.value.params]
            else:
                groups = [p.value]
            out.setdefault(p.name, {"tolerance": tolerance})[what] = [
                [_query_words(q, variables) for q in (g if isinstance(g, tuple) else (g,))] for g in groups]
    return out


def _structural_zeros(params: dict, variables: dict) -> dict:
    """{name: {variable: [categories]}} from ``structural_zeros: { NAME: { VAR: [values] ... } }``."""
    block = params.get("structural_zeros")
    if block is None:
        return {}
    if not isinstance(block, ir.ParamBlock):
        raise SpecError("structural_zeros: expected a block such as { nurse_nva_0: { hhgq: [3]  votingage: [0] } }")
    out = {}
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        if not isinstance(p.value, ir.ParamBlock) or not p.value.params:
            raise SpecError(Diagnostic(f"structural_zeros: '{p.name}' needs a block of VARIABLE: [values]", *loc))
        cells = {}
        for v in p.value.params:
            if v.name not in variables:
                raise SpecError(Diagnostic(f"structural_zeros: '{p.name}' names '{v.name}', which is not a "
                                           f"histogram variable", *loc))
            by_text = {str(c): c for c in variables[v.name]}
            values = v.value if isinstance(v.value, tuple) else (v.value,)
            cells[v.name] = [by_text.get(str(x), x) for x in map(_recode_value, values)]
        out[p.name] = cells
    return out


def _levels(spec: ir.Spec) -> list[str]:
    geo = spec.domain.geography
    return [ROOT, *geo.levels] if geo else [ROOT]


def _query_key(name: str, variables) -> tuple:
    if name == "total":
        return ()
    if name == "detailed":
        return tuple(variables)
    return tuple(name.split("*"))


def _strategy(params: dict, levels: list[str], variables) -> dict:
    """{level: [(query, share), ...]} for every level that has a budget share."""
    block = params["queries"]
    measured = list(params["levels"])
    per_level = all(isinstance(p.value, ir.ParamBlock) for p in block.params) and block.params
    out = {}
    for level in measured:
        source = block.get(level).value if per_level and block.get(level) else (None if per_level else block)
        if source is None:
            raise SpecError(f"queries: no query shares for level '{level}'")
        out[level] = [(_query_key(p.name, variables), p.value) for p in source.params]
    return out


def _relation(spec: ir.Spec, params: dict) -> str:
    """Sensitivity is computed for the spec's relation when the unit is the person table."""
    return spec.unit.relation if spec.unit and spec.unit.table == params["table"] else "symdiff"


def _invariants(spec: ir.Spec, params: dict):
    """(level, query) pairs for the declared invariants on the person table; and problems."""
    levels = _levels(spec)
    variables = set(params["variables"])
    out, problems = [], []
    for q in spec.invariants:
        if q.table != params["table"]:
            continue
        geo = [c for c in q.columns if c in levels]
        rest = [c for c in q.columns if c not in levels]
        bad = [c for c in rest if c not in variables]
        if bad or len(geo) > 1:
            what = f"columns {', '.join(bad)} are neither geography levels nor histogram variables" if bad else "it names two geography levels"
            problems.append(Diagnostic(f"TopDown cannot keep the invariant '{q.describe()}' exact: {what}",
                                       *((q.loc.line, q.loc.column) if q.loc else (None, None))))
            continue
        out.append(((geo[0] if geo else ROOT), tuple(rest), q))
    return out, problems


class TopDown(Mechanism):
    name = "topdown"
    version = __version__
    description = ("The 2020 Census TopDown algorithm: integer noise from a discrete Gaussian (bell-shaped) "
                   "distribution on every count of every geographic unit, then, from the nation down, the "
                   "nonnegative whole-number counts closest to the noisy ones (least squares) that keep the invariants.")
    parameters = ParameterSchema((
        ParamSpec("table", "table", "the person table", required=True),
        ParamSpec("variables", "columns", "the histogram variables (enumerated, boolean or integer-range columns)", required=True),
        ParamSpec("rho", "number", "the total zCDP budget", required=True, low=Fraction(0)),
        ParamSpec("levels", "shares", "share of rho per geographic level ('nation' is the root); must sum to 1", required=True),
        ParamSpec("queries", "block", "share of each level's rho per query (total, detailed, or var*var); "
                  "one block for all levels or one per level; must sum to 1", required=True),
        ParamSpec("recodes", "block", "query factors that group one variable's categories: "
                  "NAME: { of: VARIABLE  LABEL: [values] ... }, a partition of the variable"),
        ParamSpec("estimation", "block", "least-squares passes per level: { county: [total] } fits the total "
                  "first and then the other queries, keeping earlier answers within pass_tolerance"),
        ParamSpec("rounding", "block", "rounding passes per level: { county: { pass1: [\"total\"]  pass2: [\"hhgq\", \"hhgq * hispanic\"] } } "
                  "keeps each pass's margins within floor/ceil of the fit, then fixes them"),
        ParamSpec("pass_tolerance", "number", "how far a later estimation pass may move earlier passes' answers "
                  "(production: 1/10)", low=Fraction(0)),
        ParamSpec("structural_zeros", "block", "cells that must be 0 everywhere, e.g. { nurse_nva_0: { hhgq: [3]  "
                  "votingage: [0] } }; data with a record there is rejected"),
        ParamSpec("constraints", "block", "bounds on persons per block from a second table, e.g. { hhgq_total_lb_ub: "
                  "{ of: hhgq  table: facilities  type: gqtype  occupied: [1, 2] } }: none of a type the block "
                  "lacks, at least one per occupied facility; its counts by block and type must be invariants"),
        ParamSpec("workers", "int", "solver processes (default: all cores)", low=Fraction(1), high=Fraction(256)),
    ))
    outputs = {
        "microdata": "privacy-protected person records (geography and histogram variables); named after the table",
        "measurements": "the noisy measurements: level, geocode, query, cell, value, variance",
    }
    engine_tables = True  # a Parquet person table stays on the engine: TopDown only counts it

    def check(self, spec, params):
        problems = []
        table = spec.domain.table(params["table"])
        if spec.domain.geography is None:
            return [Diagnostic("TopDown needs a geography hierarchy in the domain (geography NAME { state > county ... })")]
        for level in spec.domain.geography.levels:
            if table.column(level) is None:
                problems.append(Diagnostic(f"table '{table.name}' has no column for geography level '{level}'"))
        for name in params["variables"]:
            col = table.column(name)
            if col is None:
                problems.append(Diagnostic(f"histogram variable '{name}' is not a column of table '{table.name}'"))
            elif col.type.kind == "category":
                problems.append(Diagnostic(f"histogram variable '{name}' must have a declared value set (enumerated, bool or int range), not an open category"))
            elif name in spec.domain.geography.levels:
                problems.append(Diagnostic(f"'{name}' is a geography level, not a histogram variable"))
        known = set(_levels(spec))
        for level in params["levels"]:
            if level not in known:
                problems.append(Diagnostic(f"levels: '{level}' is not a geography level (known: {', '.join(_levels(spec))})"))
        if not isinstance(params["queries"], ir.ParamBlock):
            problems.append(Diagnostic("queries: expected a block such as { total: 1/2  detailed: 1/2 }"))
        if problems:
            return problems
        _, inv_problems = _invariants(spec, params)
        problems.extend(inv_problems)
        try:
            alloc = self._allocation(spec, params)
            from .multipass import pass_plan

            schema = _schema(spec, params)
            _structural_zeros(params, _variables(spec, params))
            from .constraints import facility_constraints

            facility_constraints(spec, params, _variables(spec, params))
            for level, plan in _passes(params, list(schema.names)).items():
                if level not in params["levels"]:
                    raise SpecError(f"estimation/rounding passes name level '{level}', which has no budget share")
                pass_plan(level, plan, schema, alloc, groups=False)  # names checked; arrays at run time
        except SpecError as exc:
            problems.extend(exc.diagnostics)
        return problems

    def _allocation(self, spec, params):
        variables = _variables(spec, params)
        schema = _schema(spec, params)
        strategy = {lv: [(schema.canonical(q), s) for q, s in entries]
                    for lv, entries in _strategy(params, _levels(spec), list(variables)).items()}
        return allocate(params["rho"], params["levels"], strategy, _relation(spec, params))

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], _relation(spec, params), "zcdp")

    def induced_invariants(self, spec, params):
        invariants, problems = _invariants(spec, params)
        return [] if problems else [q for _, _, q in invariants]

    def budget(self, spec, params, facts):
        from dpspec.api import BudgetStatement, ZCDP

        alloc = self._allocation(spec, params)
        notes = [f"rho = {ir.format_number(alloc.rho)} split over geographic levels in shares "
                 + ", ".join(f"{lv} {ir.format_number(s)}" for lv, s in alloc.level_shares.items()),
                 f"L2 sensitivity squared s^2 = {alloc.queries[0].sensitivity2} per query under {alloc.relation} "
                 "(the sum of the squared changes one record can make to a query's counts); each query's noise "
                 "variance is s^2 / (2 rho_q), rho_q being that query's share of rho"]
        if alloc.rho_spent != alloc.total_rho:
            notes.append(f"noise variances were rounded up to exact rationals: the noise costs rho = "
                         f"{float(alloc.rho_spent):.12g}, within the stated {float(alloc.total_rho):.12g}")
        return BudgetStatement.fixed(ZCDP(float(alloc.total_rho)), *notes)

    def budget_breakdown(self, spec, params):
        """The allocation an auditor re-derives: one row per (level, query)."""
        schema = _schema(spec, params)
        variables = list(schema.names)
        labels = {(lv, schema.canonical(_query_key(p.name, variables))): " * ".join(p.name.split("*"))
                  for lv, block in _query_blocks(params) for p in block.params}
        return {"allocation": allocation_rows(self._allocation(spec, params), labels)}

    def expected_error(self, spec, params, facts):
        """Per (level, query): the variance of each noisy measurement, from the allocation alone
        (the discrete Gaussian's exact variance at its sigma²); post-processing is not included."""
        return [{"table": f"{row['level']}: {row['query']}", "level": row["level"], "query": row["query"],
                 "variance": float(row["noise_variance"]), "of": "noisy measurement, before post-processing"}
                for row in self.budget_breakdown(spec, params)["allocation"]]

    def semantics(self, spec, params):
        """Per-attribute and per-geography rho, as the P.L. 94-171 certificates account them."""
        from .semantics import attribute_rhos, geography_rhos

        alloc = self._allocation(spec, params)
        return {"attributes": attribute_rhos(alloc, _schema(spec, params)),
                "geographies": geography_rhos(alloc, _levels(spec))}

    def run(self, spec, params, data, rng, engine=None):
        import pandas as pd  # lazily, with the engine: `dpspec check` needs neither

        from .engine import run_topdown, table_counts

        from dpspec.api import EngineTable

        variables = _variables(spec, params)
        invariants, _ = _invariants(spec, params)
        persons = data[params["table"]]
        from .constraints import facility_bounds_from_counts, facility_constraints

        bounds = []
        for con in facility_constraints(spec, params, variables):
            lower, upper = facility_bounds_from_counts(con, table_counts(data[con["table"]], [con["finest"], con["type"]], engine),
                                           variables[con["of"]])
            bounds.append((con["name"], (con["of"],), lower, upper))
        if isinstance(persons, EngineTable):  # held by the engine: counted there, never collected
            frame = persons
        else:
            frame = pd.DataFrame({c: persons[c].astype(object) if c in variables else persons[c]
                                  for c in [*spec.domain.geography.levels, *variables]})
        result = run_topdown(
            frame, _levels(spec), variables,
            _strategy(params, _levels(spec), list(variables)), params["rho"], params["levels"],
            _relation(spec, params), [(lv, q) for lv, q, _ in invariants], rng,
            recodes=_schema(spec, params).recodes, passes=_passes(params, list(variables)),
            structural_zeros=_structural_zeros(params, variables), bounds=bounds,
            progress=lambda stage, done, total: progress.report(f"{stage} level", done, total),
            workers=params.get("workers"), engine=engine,
        )
        categories = {}  # the same codes as the input, so invariants compare exactly
        for col in [*spec.domain.geography.levels, *variables]:
            dtype = persons.dtype(col) if isinstance(persons, EngineTable) else persons[col].dtype if col in persons.columns else None
            if isinstance(dtype, pd.CategoricalDtype):
                categories[col] = dtype
        # both tables are streamed: written chunk by chunk, counted from the protected histograms
        micro = result.microdata_table(categories)
        errors = accuracy(spec, params, result)
        timings = {lv: {k: v for k, v in t.items() if isinstance(v, (int, float, bool))} for lv, t in result.timings["levels"].items()}
        failsafe = {lv: t["failsafe_nodes"] for lv, t in timings.items() if t.get("failsafe_nodes")}
        return Release(
            outputs={params["table"]: micro, "measurements": result.measurements_table()},
            facts={"total_rho": float(result.total_rho), "rho_spent": float(result.rho_spent),
                   "solver_share": result.timings["solver_share"], "timings": timings,
                   # production's failsafe: nodes whose later pass had no solution, redone in one pass
                   "failsafe_nodes": failsafe},
            internal={"errors": errors},
        )

    def likelihood(self, spec, params, outputs):
        from .likelihood import measurement_likelihoods

        return measurement_likelihoods(spec, params, outputs)

    def utility(self, spec, params, data, releases):
        import pandas as pd

        runs = [r.internal["errors"] for r in releases]
        table = pd.concat([pd.DataFrame(r) for r in runs])
        summary = table.groupby(["level", "query"], sort=False)["mean_absolute_error"].agg(["mean", "std"]).reset_index()
        return {
            "runs": len(releases),
            "error_by_level_and_query": [
                {"level": row.level, "query": row.query, "mean_absolute_error": float(row["mean"]),
                 "sd_over_runs": float(row["std"]) if len(releases) > 1 else None}
                for _, row in summary.iterrows()
            ],
        }

    def neighbours(self, spec, params):
        """Miniature neighbours and batched noisy measurements for `dpspec verify`."""
        from .neighbours import topdown_pairs

        return topdown_pairs(self, spec, params, _variables, ROOT, recodes=_schema(spec, params).recodes)


def _query_blocks(params: dict):
    """(level, block of query shares) for every measured level."""
    block = params["queries"]
    per_level = all(isinstance(p.value, ir.ParamBlock) for p in block.params) and block.params
    for level in params["levels"]:
        inner = block.get(level) if per_level else None
        yield level, (inner.value if inner is not None else block)


def allocation_rows(alloc, labels: dict | None = None) -> list[dict]:
    """level, query (as written, factors joined by ' * '), rho, variance (sigma², the noise
    parameter) and the exact fractions behind them, in level then declaration order."""
    from dpspec.api import discrete_gaussian_variance

    labels = labels or {}
    return [{"level": q.level, "query": labels.get((q.level, q.query), q.name), "rho": float(q.rho), "variance": float(q.sigma2),
             "share": str(q.share), "rho_exact": str(q.rho), "sigma2_exact": str(q.sigma2),
             "noise_variance": discrete_gaussian_variance(q.sigma2)}
            for q in alloc.queries]


def accuracy(spec, params, result) -> list[dict]:
    """Mean absolute error of every (level, query) table against the confidential data: over
    the cells either side has persons in, |confidential - protected| on average.

    From the run's confidential and protected histograms (sparse), so no person table is
    needed. Computed against the confidential data: internal report only."""
    schema = result.schema
    variables = list(params["variables"])
    queries = {"total": (), "detailed": tuple(variables)}
    block = params["queries"]
    for p in block.params:
        if isinstance(p.value, ir.ParamBlock):
            for inner in p.value.params:
                queries[inner.name] = _query_key(inner.name, variables)
        else:
            queries[p.name] = _query_key(p.name, variables)
    out = []
    for level in _levels(spec):
        for name, query in queries.items():
            indicator = schema.indicator(query)
            a = (result.confidential[level] @ indicator).tocsr()
            b = (result.histograms[level] @ indicator).tocsr()
            either = a + b  # counts are nonnegative: a + b is nonzero where either side is
            either.eliminate_zeros()
            cells = either.nnz
            diff = float(abs(a - b).sum())
            mae = diff / cells if cells else 0.0
            out.append({"level": level, "query": name, "mean_absolute_error": mae})
    return out
