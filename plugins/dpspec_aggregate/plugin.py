"""The everyday release: noisy counts, sums, means and quantiles over declared keys."""

from __future__ import annotations

from fractions import Fraction

import attrs

import dpspec
from dpspec.api import (
    BudgetBreakdown,
    BudgetStatement,
    ClippingBound,
    ComparedCounts,
    ComposedPart,
    DataError,
    ExpectedError,
    Mechanism,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    PureDP,
    Release,
    ZCDP,
    declared_keys,
    ir,
    typed_keys,
    LazyModule,
)

from . import design as design_mod, sensitivity as sens_mod
from .design import Design, Query, quantile_epsilon
from dpspec.api import effective_sigma2, Diagnostic, sampler_limit_problem, SpecError, located

# imported on first use: `dpspec --help` loads this module, not them
_a_priori = LazyModule("dpspec_aggregate.a_priori", "_a_priori", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_accuracy = LazyModule("dpspec_aggregate.accuracy", "_accuracy", globals())
_release = LazyModule("dpspec_aggregate.release", "_release", globals())
_on_engine = LazyModule("dpspec_aggregate.on_engine", "_on_engine", globals())
_algorithm = LazyModule("dpspec_aggregate.algorithm", "_algorithm", globals())

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())


@attrs.frozen
class Part:
    """One noisy measurement: a query's value, or a mean's sum or count, or a quantile's score."""

    query: Query
    role: str  # "value", "sum", "count" or "score"
    sensitivity: sens_mod.Sensitivity
    parameter: Fraction  # Laplace scale t, Gaussian sigma², or the quantile's epsilon
    spent: Fraction  # the budget it really spends (pure epsilon or zCDP rho)


def plan(design: Design, relation: str) -> list[Part]:
    """Every measurement with its noise and exact spending, from the parameters alone."""

    keyed = bool(design.by)
    parts = []
    for q in design.queries:
        budget = design.budget_of(q)
        if q.statistic == "quantile":
            eps = budget if design.noise == "laplace" else quantile_epsilon(budget)
            parts.append(
                Part(
                    q,
                    "score",
                    sens_mod.of(q, relation, keyed),
                    eps,
                    eps if design.noise == "laplace" else eps * eps / 8,
                )
            )
            continue
        roles = (
            [("sum", q, budget / 2), ("count", attrs.evolve(q, statistic="count"), budget / 2)]
            if q.statistic == "mean"
            else [("value", q, budget)]
        )
        for role, shape, b in roles:
            s = sens_mod.of(shape, relation, keyed)
            if design.noise == "laplace":
                t = s.l1 / b if s.l1 else Fraction(0)
                parts.append(Part(q, role, s, t, s.l1 / t if t else Fraction(0)))
            else:
                sigma2 = effective_sigma2(s.l2_squared / (2 * b)) if s.l2_squared else Fraction(0)
                parts.append(Part(q, role, s, sigma2, s.l2_squared / (2 * sigma2) if sigma2 else Fraction(0)))
    return parts


def _expected_error(noise: str, parameter) -> str:
    """The error a priori, as `budget` states it: the noise's standard deviation and its 95% interval."""
    sd, width, coverage = _a_priori.expected_error(noise, parameter)
    return (
        f"expected error a priori: standard deviation {sd:.4g}, "
        f"{coverage:.1%} of noisy answers within ±{width:,} of the truth"
    )


class Aggregate(Mechanism):
    name = "aggregate"
    version = "1.0.0"
    description = (
        "Noisy counts, sums, means and quantiles of one table over declared keys, with the exact discrete "
        "Laplace (pure epsilon) or discrete Gaussian (zCDP) and a 95% interval beside every number."
    )
    proof = "Laplace: Dwork, McSherry, Nissim & Smith (2006) with the discrete Laplace of Canonne, Kamath & Steinke (2020); Gaussian: zCDP of the discrete Gaussian (Canonne, Kamath & Steinke 2020, Theorem 14; Bun & Steinke 2016); quantiles: the exponential mechanism (McSherry & Talwar 2007); sequential composition over the queries, parallel over disjoint cells"
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Laplace and discrete Gaussian rejection samplers on integers and rationals (dpspec.api.discrete_laplace, discrete_gaussian), no floating point; a quantile's grid point by exact Bernoulli(exp(-x)) draws"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose rows are aggregated", required=True),
            ParamSpec("by", "columns", "the key columns: one row per declared combination (none: a grand total)"),
            ParamSpec(
                "noise",
                "choice",
                "laplace (pure epsilon, set by 'epsilon') or gaussian (zCDP, set by 'rho')",
                default="laplace",
                choices=("laplace", "gaussian"),
            ),
            ParamSpec("epsilon", "number", "the whole release's pure epsilon (noise laplace)", low=Fraction(0)),
            ParamSpec("rho", "number", "the whole release's zCDP rho (noise gaussian)", low=Fraction(0)),
            ParamSpec(
                "statistic",
                "choice",
                "one query, written flat: count, sum, mean or quantile",
                choices=design_mod.STATISTICS,
            ),
            ParamSpec(
                "column", "column", "the flat query's column (sum, mean, quantile: int or bool)", table_param="table"
            ),
            ParamSpec(
                "bounds",
                "list",
                "the flat query's clipping bounds [lo, hi], declared (never from the data)",
                items="int",
            ),
            ParamSpec("q", "number", "the flat quantile's q, strictly between 0 and 1"),
            ParamSpec("grid_step", "int", "the flat quantile's grid step from lo to hi (default: (hi - lo) / 100)"),
            ParamSpec("share", "number", "the flat query's share of the budget (1)"),
            ParamSpec(
                "queries",
                "map",
                "several queries, each a named block of statistic, column, bounds, q, grid_step "
                "and share (shares default to equal)",
                keys="names",
                values=ParamSpec(
                    "",
                    "block",
                    "one query",
                    fields=(
                        ParamSpec("statistic", "choice", "count, sum, mean or quantile", choices=design_mod.STATISTICS),
                        ParamSpec(
                            "column", "column", "its column (sum, mean, quantile: int or bool)", table_param="table"
                        ),
                        ParamSpec("bounds", "list", "its clipping bounds [lo, hi], declared", items="int"),
                        ParamSpec("q", "number", "a quantile's q, strictly between 0 and 1"),
                        ParamSpec("grid_step", "int", "a quantile's grid step (default: (hi - lo) / 100)"),
                        ParamSpec("share", "number", "its share of the budget"),
                    ),
                ),
            ),
            ParamSpec(
                "postprocess",
                "choice",
                "none; nonnegative: counts and sums below 0 are released as 0 (raises small "
                "cells' expected value; intervals keep their coverage); total: counts also made whole numbers adding "
                "up to the public total declared 'used as total' (biased; no interval)",
                default="none",
                choices=design_mod.POSTPROCESS,
            ),
        )
    )
    engine_tables = True  # a Parquet table stays on the engine: its group-by gives the exact statistics
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    uses_engine = True  # its units of work run on ctx.engine
    outputs = {
        "statistics": "one row per declared cell: the keys, each query's noisy value, its noise scale and its "
        "95% interval"
    }

    # ---- the design ----
    def _design(self, spec, params) -> Design:
        found, problems = design_mod.parse(spec, params)
        if problems:
            raise SpecError(located(spec, problems), spec.path, spec.text)
        return found

    def _relation(self, spec, params) -> str:
        unit = spec.unit
        return unit.relation if unit is not None and unit.table == params["table"] else "symdiff"

    def check(self, spec, params):
        design, problems = design_mod.parse(spec, params)
        return problems if design is None else self._sampler_problems(spec, params, design)

    def _sampler_problems(self, spec, params, design):
        """A budget so small that a measurement's noise is beyond the exact samplers: refused at `check`,
        at the budget's line, in the samplers' words (every scale grows as 1/budget)."""

        name = "epsilon" if design.noise == "laplace" else "rho"
        kind = "discrete_laplace" if design.noise == "laplace" else "discrete_gaussian"
        noisy = [p for p in plan(design, self._relation(spec, params)) if p.role != "score" and p.parameter != 0]
        for p in sorted(noisy, key=lambda p: p.parameter, reverse=True):  # the widest first: it bounds the budget
            problem = sampler_limit_problem(kind, p.parameter, (name, design.total))
            if problem is not None:
                what = p.query.name + ("" if p.role == "value" else f" ({p.role})")
                return [Diagnostic(f"aggregate: the noise of query '{what}' cannot be drawn: {problem}", path=(name,))]
        return []

    def flavor(self, spec, params):
        noise = params.get("noise") or "laplace"
        return NativeFlavor(params["table"], self._relation(spec, params), "pure" if noise == "laplace" else "zcdp")

    def induced_invariants(self, spec, params):
        d = self._design(spec, params)
        exact = [p for p in plan(d, self._relation(spec, params)) if p.parameter == 0]
        return [ir.CountQuery(d.table)] if exact else []

    def output_keys(self, spec, params):
        return {"statistics": OutputKeys(params["table"], tuple(params.get("by") or ()))}

    # ---- the budget ----
    def budget(self, spec, params, facts):
        d = self._design(spec, params)
        parts = plan(d, self._relation(spec, params))
        total = sum((p.spent for p in parts), Fraction(0))
        word = "epsilon" if d.noise == "laplace" else "rho"
        notes = [
            f"{word} = {ir.format_number(total)} exactly: the sum over the measurements below (sequential "
            f"composition; the cells of one measurement are disjoint, so they compose in parallel)"
        ]
        for p in parts:
            what = f"{p.query.name}" + ("" if p.role in ("value", "score") else f" ({p.role})")
            if p.role == "score":
                notes.append(
                    f"{what}: exponential mechanism over {len(p.query.grid):,} grid points at epsilon "
                    f"{ir.format_number(p.parameter)} ({p.sensitivity.why}), {word} {ir.format_number(p.spent)}"
                )
            elif p.parameter == 0:
                notes.append(f"{what}: released exactly ({p.sensitivity.why})")
            else:
                noise = (
                    f"discrete Laplace scale {ir.format_number(p.parameter)} for L1 sensitivity "
                    f"{ir.format_number(p.sensitivity.l1)}"
                    if d.noise == "laplace"
                    else f"discrete Gaussian sigma² {ir.format_number(p.parameter)} for L2² sensitivity "
                    f"{ir.format_number(p.sensitivity.l2_squared)}"
                )
                notes.append(
                    f"{what}: {noise} ({p.sensitivity.why}), {word} {ir.format_number(p.spent)}; "
                    f"{_expected_error(d.noise, p.parameter)}"
                )
        for q in d.queries:
            if q.clipped:
                notes.append(
                    f"{q.name}: values of {q.column} are clipped to [{q.low}, {q.high}] before they are added: "
                    "a value outside counts as the nearest bound (declared, never taken from the data)"
                )
        budget = PureDP(total) if d.noise == "laplace" else ZCDP(total)  # exact
        return BudgetStatement(budget, worst=budget, notes=tuple(notes))

    def clipping_bounds(self, spec, params):
        d = self._design(spec, params)
        return [
            ClippingBound(q.name, d.table, q.column, Fraction(q.low), Fraction(q.high)) for q in d.queries if q.clipped
        ]

    def composed_parts(self, spec, params):
        """One part per query (a mean's sum and count together): what each query's share spends."""
        spent: dict = {}
        for p in plan(self._design(spec, params), self._relation(spec, params)):
            spent[p.query.name] = spent.get(p.query.name, Fraction(0)) + p.spent
        return [ComposedPart(name, budget) for name, budget in spent.items()]

    def budget_breakdown(self, spec, params):
        return BudgetBreakdown({"measurements": self._measurements(spec, params)})

    def _measurements(self, spec, params) -> list[dict]:
        """One row per measurement (a query's part): its budget, noise parameter and, but for a
        score, its noise variance and interval."""
        d = self._design(spec, params)
        rows = []
        for p in plan(d, self._relation(spec, params)):
            row = {
                "query": p.query.name,
                "part": p.role,
                "statistic": p.query.statistic,
                "spent": ir.format_number(p.spent),
                "parameter": ir.format_number(p.parameter),
            }
            if p.role != "score":
                row["noise_variance"] = _accuracy.variance(d.noise, p.parameter)
                row["interval_half_width"], row["interval_coverage"] = _accuracy.half_width(d.noise, p.parameter)
            rows.append(row)
        return rows

    def expected_error(self, spec, params, facts):
        """The noise variance of each count, sum and mean part, before post-processing."""
        return [
            ExpectedError(
                "statistics",
                None,
                f"{r['query']}" + ("" if r["part"] == "value" else f" ({r['part']})"),
                r["noise_variance"],
                "noisy answer, before post-processing",
            )
            for r in self._measurements(spec, params)
            if r["part"] != "score"
        ]

    # ---- the run ----
    def run(self, spec, params, data, ctx):
        d = self._design(spec, params)
        frame = data[d.table]
        keys = declared_keys(spec, d.table, d.by)
        typed = typed_keys(spec, d.table, keys)
        if isinstance(frame, dpspec.api.EngineTable) and not isinstance(frame.handle, pd.DataFrame):
            # held by an engine (Spark): its group-by computes the exact statistics, the noise is added here
            exact = _on_engine.exact_on_engine(d, frame, typed, ctx.engine if ctx.engine is not None else frame.engine)
        else:
            frame = frame.handle if isinstance(frame, dpspec.api.EngineTable) else frame
            for q in d.queries:
                if (
                    q.column is not None
                    and not (isinstance(frame[q.column].dtype, np.dtype) and frame[q.column].dtype.kind in "iub")
                    and frame[q.column].isna().any()
                ):
                    row = int(frame[q.column].isna().to_numpy().argmax())
                    raise DataError(
                        f"table '{d.table}', column '{q.column}', row {row + 1}: a missing value, which "
                        f"{q.statistic} cannot add (declare how to treat it, or clean the data)"
                    )
            exact = _release.exact_here(d, frame, typed)
        table, internal = _release.release(spec, d, plan(d, self._relation(spec, params)), exact, typed, ctx.rng)
        notes = (design_mod.TOTAL_BIAS,) if d.postprocess == "total" else ()
        return Release({"statistics": table}, facts={"cells": len(keys)}, internal=internal, notes=notes)

    # ---- against the confidential data (internal only) ----
    def utility(self, spec, params, data, releases):
        """Each query's released values against the confidential ones, and the clipped counts."""
        d = self._design(spec, params)
        clipped = releases[0].internal.get("clipped", {})
        changed = [q for q in d.queries if q.statistic in ("sum", "mean") and clipped.get(q.name)]
        frame = data[d.table]
        if isinstance(frame, dpspec.api.EngineTable):
            frame = frame.handle if hasattr(frame.handle, "iloc") else None  # on Spark: not brought to the driver
        raw = (
            _algorithm.unclipped_values(frame, releases[0].outputs["statistics"], d, changed)
            if changed and frame is not None
            else {}
        )
        out = _accuracy.realized_error(d, releases, d.by, raw)
        out["truth_unclipped"] = frame is not None or not changed
        return out

    def compared_counts(self, spec, params, data, release):
        """Every released count and sum beside its confidential value, one table per query."""
        d = self._design(spec, params)
        frame = release.outputs["statistics"]
        index = pd.MultiIndex.from_frame(frame[list(d.by)].astype(str)) if d.by else pd.RangeIndex(len(frame))
        return [
            ComparedCounts(
                f"statistics: {q.name}",
                None,
                pd.Series(release.internal["truth"][f"{q.name}:value"], index=index),
                pd.Series(frame[q.name].to_numpy(), index=index),
            )
            for q in d.queries
            if q.statistic in ("count", "sum")
        ]
