"""The Wasserstein K-norm gradient mechanisms (seed 2, Theorem 10): a rate, a clipped mean, a regression slope.

The rate's loss over n units with binary values x_i is l(theta) = sum_i (x_i - theta)^2 / 2,
convex, with gradient n theta - S (S the number of 1s). One unit's secret moves S, so the
gradient's Wasserstein sensitivity over the class is the count's (1 under independence). The
mechanism releases theta with density proportional to exp(-epsilon |n theta - S| / (2 Delta)) with
respect to a base measure from public information: the grid {0, 1/n, ..., 1} (n, the number of
units, is Z), so theta = k / n with k a discrete Laplace law on 0..n centred at S, drawn by the
project's exact sampler. Theorem 11: the privacy error is O(1/n), below the sampling error
O(1/sqrt(n)); tests/test_wasserstein.py shows n * (theta - S/n) keeping one spread as n grows.
The mean and the slope release on a declared grid with a rational centre (their classes derive
their sensitivities); tests/test_wasserstein_kng.py checks them against their exact laws.
"""

from __future__ import annotations

import math
from fractions import Fraction

import dpspec
from dpspec.api import (
    BudgetBreakdown,
    BudgetStatement,
    Diagnostic,
    Mechanism,
    MechanismError,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    PublicCondition,
    PureDP,
    Release,
    hookimpl,
    ir,
    pufferfish,
    sampler_limit_problem,
    NeighbourPair,
    LazyModule,
)
from dpspec.api import ReleaseColumns

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())

# imported on first use: at import they would load numpy with this module
_samplers = LazyModule("dpspec_wasserstein.samplers", "_samplers", globals())
_likelihood = LazyModule("dpspec_wasserstein.likelihood", "_likelihood", globals())


class WassersteinKNG(Mechanism):
    name = "wasserstein_kng"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    version = "1.0.0"
    description = (
        "Seed 2's Wasserstein K-norm gradient mechanism for a rate (squared-error loss), on the grid k/n "
        "given the public number of units; exact draws."
    )
    proof = (
        "Theorem 10 of the second seed paper (the Wasserstein K-norm gradient mechanism; Theorem 11 bounds its error)"
    )
    sampling = "exact: discrete Laplace integer noise on the grid (dpspec.api.discrete_laplace), no floating point"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the unit table", required=True),
            ParamSpec("column", "column", "the bool column whose rate is released", required=True),
            ParamSpec("epsilon", "number", "the Z-Pufferfish budget", required=True, low=Fraction(0)),
        )
    )
    outputs = {"rate": "the released rate, its numerator k and the public number of units n"}

    def check(self, spec, params):
        col = spec.domain.table(params["table"]).column(params["column"])
        problems = []
        if col is None or col.type.kind != "bool":
            problems.append(Diagnostic(f"column '{params['column']}' must be a bool column of '{params['table']}'"))
        if params["epsilon"] <= 0:
            problems.append(Diagnostic("epsilon must be positive"))
        else:
            try:
                scale = 1 / self.rate(spec, params)  # the grid's draw: discrete Laplace proposals of this scale
            except (
                ZeroDivisionError,
                MechanismError,
                ValueError,
            ):  # a class without a count sensitivity: said elsewhere
                scale = None
            problem = (
                None
                if scale is None
                else sampler_limit_problem("discrete_laplace", scale, ("epsilon", params["epsilon"]))
            )
            if problem is not None:
                problems.append(
                    Diagnostic(f"{self.name}: the rate's noise cannot be drawn: {problem}", path=("epsilon",))
                )
        if not any(p.query.table == params["table"] and not p.query.columns for p in spec.public):
            problems.append(
                Diagnostic(
                    f"the base measure is the grid k/n: declare the number of units in Z "
                    f'(public {{ count {params["table"]} released "..." used as total }})'
                )
            )
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], spec.unit.relation if spec.unit else "hamming", "pure")

    def output_keys(self, spec, params):
        """One row keyed by nothing: k, and n from Z (the public number of units)."""
        return {"rate": OutputKeys(params["table"])}

    def release_columns(self, spec, params):
        """The rate `likelihood` reads: k on the grid 0..n and n (whole numbers, 0 <= k <= n)."""

        def implied(frame):
            k, n = (pd_numbers(frame[c]) for c in ("k", "n"))
            whole = (k == np.floor(k)) & (n == np.floor(n))
            return {"n": (n == np.floor(n)) & (n >= 0), "k": whole & (k >= 0) & (k <= n)}  # n first: k is read on it

        return {"rate": ReleaseColumns(("k", "n"), numbers=("k", "n"), implied=implied)}

    def sensitivity(self, spec):

        return pufferfish.count_sensitivity(spec.pufferfish)

    def rate(self, spec, params) -> Fraction:
        return Fraction(params["epsilon"]) / (2 * Fraction(self.sensitivity(spec)))

    def budget(self, spec, params, facts):

        dp = pufferfish.dp_cell_counts_sensitivity("symdiff")
        note = (
            f"epsilon-Z-Pufferfish (Theorem 10): the gradient's Wasserstein sensitivity over the class is "
            f"{ir.format_number(Fraction(self.sensitivity(spec)))} (DP sensitivity {ir.format_number(dp)}, Lemma 12)"
        )
        conditions = tuple(PublicCondition(p.query.describe(), p.source) for p in spec.public)
        return BudgetStatement(
            PureDP(params["epsilon"]), worst=PureDP(params["epsilon"]), notes=(note,), public=conditions
        )

    def budget_breakdown(self, spec, params):
        return BudgetBreakdown(
            {
                "pufferfish": {
                    "guarantee": "epsilon-Z-Pufferfish (seed 2, Definition 3; Theorem 10)",
                    "sensitivity": {"gradient": {"wasserstein": float(self.sensitivity(spec)), "dp": 1.0}},
                }
            }
        )

    def draw(self, spec, params, positives: int, n: int, rng, draws: int = 1):
        return _samplers.truncated_laplace(
            np.full(draws, positives), 0, np.full(draws, n), self.rate(spec, params), rng
        )

    def run(self, spec, params, data, ctx):
        values = data[params["table"]][params["column"]].to_numpy(dtype=bool)
        n, s = len(values), int(values.sum())
        k = int(self.draw(spec, params, s, n, ctx.rng)[0])
        return Release(
            outputs={"rate": pd.DataFrame({"k": [k], "n": [n], "rate": [k / n if n else float("nan")]})},
            facts={"n": n},
            internal={"true_rate": s / n if n else float("nan")},
        )

    def neighbours(self, spec, params):
        """One unit's value is 1 or 0 (n, public, unchanged)."""

        table = spec.domain.table(params["table"])

        def rows(flags):
            out = [{**dpspec.api.miniature_record(table, {}), params["column"]: f} for f in flags]
            return {table.name: dpspec.api.typed_frame(table, out)}

        def batch(data, n, rng):
            values = data[table.name][params["column"]].to_numpy(dtype=bool)
            return self.draw(spec, params, int(values.sum()), len(values), rng, draws=n)[:, None]

        return [
            NeighbourPair(
                "one unit's value is 1 or 0", rows([True, False, False]), rows([False, False, False]), batch=batch
            )
        ]

    def likelihood(self, spec, params, outputs):
        frame = outputs.get("rate")
        if frame is None:
            return None
        n = int(frame["n"].iloc[0])
        return [
            _likelihood._one(
                ir.CountQuery(params["table"], (params["column"],)),
                pd.DataFrame({params["column"]: ["true"]}),
                np.array([int(frame["k"].iloc[0])]),
                float(self.rate(spec, params)),
                np.array([n]),
                "Wasserstein K-norm gradient mechanism on the grid k/n",
            )
        ]


def pd_numbers(values):
    """A published column as floats (NaN where not a number), for `release_columns`' checks."""
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def _int_column(spec, params, name, problems):
    col = spec.domain.table(params["table"]).column(params[name])
    if col is None or col.type.kind != "int":
        problems.append(Diagnostic(f"column '{params[name]}' must be an int column of '{params['table']}'"))


def _steps(lo, hi, step, what, problems) -> int | None:
    """The number of grid steps from lo to hi, or None (with a diagnostic) when step does not divide it."""
    if step <= 0 or hi <= lo:
        problems.append(Diagnostic(f"{what}: the grid needs lower < upper and a positive step"))
        return None
    m = (Fraction(hi) - Fraction(lo)) / Fraction(step)
    if m.denominator != 1:
        problems.append(
            Diagnostic(
                f"{what}: the step {ir.format_number(Fraction(step))} does not divide "
                f"upper - lower = {ir.format_number(Fraction(hi) - Fraction(lo))}"
            )
        )
        return None
    return int(m)


class _GridKNG(Mechanism):
    """What the clipped mean and the slope share: Z holds n, the class gives the count's W_inf, and
    the release is theta = lower + k * step with k drawn exactly from exp(-r |k - c|) on 0..m."""

    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)

    def _check_common(self, spec, params):
        problems = []
        if params["epsilon"] <= 0:
            problems.append(Diagnostic("epsilon must be positive"))
        if not any(p.query.table == params["table"] and not p.query.columns for p in spec.public):
            problems.append(
                Diagnostic(
                    f"the loss's gradient scales with n: declare the number of units in Z "
                    f'(public {{ count {params["table"]} released "..." used as total }})'
                )
            )
        c = spec.pufferfish
        if c is not None and c.kind not in ("independent",):
            problems.append(
                Diagnostic(
                    f"class '{c.kind}' is stated for binary secrets (the probability that another "
                    f"unit's secret is 1); a numeric column's values have no such law, so the count's "
                    f"Wasserstein sensitivity over it bounds nothing here: use class independent"
                )
            )
        return problems

    def _scale_problems(self, spec, params) -> list:
        """The grid's draw refused at `check`, at the epsilon line, when the exact samplers could not
        draw it for some dataset the spec admits (the samplers' own test). Its discrete Laplace scale
        is 2 Delta / (epsilon step N), N from the data (`worst_statistic`); the samplers' limit is on
        the scale's exact numerator, which only shrinks as N gains factors, so the worst case is exact."""
        n, why = self.worst_statistic(params)
        scale = 2 * self.sensitivity(spec, params) / (Fraction(params["epsilon"]) * Fraction(params["step"]) * n)
        problem = sampler_limit_problem("discrete_laplace", scale, ("epsilon", params["epsilon"]))
        if problem is None:
            return []
        return [
            Diagnostic(
                f"{self.name}: the {self.output}'s noise cannot be drawn for every dataset the spec admits: "
                f"{problem}. Why this range: the draw on the grid has discrete Laplace scale "
                f"2 Delta / (epsilon step N) = {ir.format_number(2 * self.sensitivity(spec, params))} / "
                f"(epsilon x {ir.format_number(Fraction(params['step']))} x N), where {why}",
                path=("epsilon",),
            )
        ]

    def unit_sensitivity(self, spec) -> Fraction:
        """The count's W_inf over the class: how many units the optimal coupling of the two secrets'
        worlds changes (1 under independence: the shift coupling moves unit j alone)."""
        return Fraction(pufferfish.count_sensitivity(spec.pufferfish))

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], spec.unit.relation if spec.unit else "hamming", "pure")

    def sensitivity(self, spec, params) -> Fraction:
        return self.unit_sensitivity(spec) * self.width(params, self._relation(spec))

    def _relation(self, spec) -> str:
        return spec.unit.relation if spec.unit else "hamming"

    def budget(self, spec, params, facts):
        note = (
            f"epsilon-Z-Pufferfish (Theorem 10): the gradient's Wasserstein sensitivity over the class is "
            f"{ir.format_number(self.unit_sensitivity(spec))} (the count's) x {ir.format_number(self.width(params, self._relation(spec)))} "
            f"(one unit's largest move of the gradient) = {ir.format_number(self.sensitivity(spec, params))}"
        )
        conditions = tuple(PublicCondition(p.query.describe(), p.source) for p in spec.public)
        return BudgetStatement(
            PureDP(params["epsilon"]), worst=PureDP(params["epsilon"]), notes=(note,), public=conditions
        )

    def budget_breakdown(self, spec, params):
        return BudgetBreakdown(
            {
                "pufferfish": {
                    "guarantee": "epsilon-Z-Pufferfish (seed 2, Definition 3; Theorem 10)",
                    "sensitivity": {
                        "gradient": {
                            "wasserstein": float(self.sensitivity(spec, params)),
                            "dp": float(self.width(params, self._relation(spec))),
                        }
                    },
                }
            }
        )

    def draw(self, spec, params, stats, rng, draws: int = 1):
        """`draws` grid indices k for the data's sufficient statistics (a tuple of exact numbers)."""
        centre, r = self.law(spec, params, stats)
        return _samplers.grid_laplace(centre, r, self.grid_steps(params), draws, rng)

    def pmf(self, spec, params, stats) -> list[float]:
        """The exact law of k (for tests and readers): exp(-r |k - c|) normalized on 0..m."""
        centre, r = self.law(spec, params, stats)
        w = [math.exp(-float(r * abs(k - centre))) for k in range(self.grid_steps(params) + 1)]
        return [v / sum(w) for v in w]

    def theta(self, params, k):
        return Fraction(params[self.grid_names[0]]) + k * Fraction(params[self.grid_names[2]])

    def grid_steps(self, params) -> int:
        lo, hi, step = (params[n] for n in self.grid_names)
        return int((Fraction(hi) - Fraction(lo)) / Fraction(step))

    def run(self, spec, params, data, ctx):
        stats = self.statistics(params, data[params["table"]])
        k = int(self.draw(spec, params, stats, ctx.rng)[0])
        value = self.theta(params, k)
        return Release(
            outputs={
                self.output: pd.DataFrame(
                    {"k": [k], "n": [stats[0]], self.output: [float(value)], "exact": [ir.format_number(value)]}
                )
            },
            facts={"n": stats[0]},
            internal={"statistics": stats},
        )

    def neighbours(self, spec, params):
        """The pair that moves the gradient most: one unit's record at the two extremes (n public, unchanged)."""
        table = spec.domain.table(params["table"])
        first, second, rest = self.extremes(params)

        def rows(records):
            return {
                table.name: dpspec.api.typed_frame(
                    table, [{**dpspec.api.miniature_record(table, {}), **r} for r in records]
                )
            }

        def batch(data, n, rng):
            return self.draw(spec, params, self.statistics(params, data[table.name]), rng, draws=n)[:, None]

        return [
            NeighbourPair(
                "one unit's record at either extreme", rows([first] + rest), rows([second] + rest), batch=batch
            )
        ]


class WassersteinKNGMean(_GridKNG):
    """The clipped mean. Loss l(theta) = sum_i (v_i - theta)^2 / 2 with v_i = x_i clipped to
    [lower, upper]; gradient n theta - S, S = sum v_i. n is in Z. Replacing one unit's value moves
    S by at most upper - lower, so a coupling that changes W units moves the gradient by at most
    W (upper - lower) at every theta: the Wasserstein sensitivity is the count's W_inf over the
    class times the clipping width (Theorem 10's condition), width under independence. On the
    declared grid theta_k = lower + k step, |n theta_k - S| = n step |k - c| with
    c = (S - n lower) / (n step), so k has law exp(-r |k - c|), r = epsilon n step / (2 Delta)."""

    name = "wasserstein_kng_mean"
    version = "1.0.0"
    description = (
        "Seed 2's Wasserstein K-norm gradient mechanism for the mean of an int column clipped to declared "
        "bounds (squared-error loss), on a declared grid given the public number of units; exact draws."
    )
    proof = (
        "Theorem 10 of the second seed paper (the Wasserstein K-norm gradient mechanism): the gradient "
        "n theta - sum clip(x) moves by the count's Wasserstein sensitivity times upper - lower"
    )
    sampling = (
        "exact: a discrete Laplace proposal on the grid (dpspec.api.discrete_laplace) and an exact "
        "Bernoulli(exp(-x)) acceptance for the rational centre (dpspec.api.bernoulli_exp), no floating point"
    )
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the unit table", required=True),
            ParamSpec("column", "column", "the int column whose clipped mean is released", required=True),
            ParamSpec("lower", "number", "the clipping lower bound (declared, public)", required=True),
            ParamSpec("upper", "number", "the clipping upper bound (declared, public)", required=True),
            ParamSpec(
                "step",
                "number",
                "the release grid's step: the mean is released on lower, lower + step, ..., upper",
                required=True,
                low=Fraction(0),
            ),
            ParamSpec("epsilon", "number", "the Z-Pufferfish budget", required=True, low=Fraction(0)),
        )
    )
    outputs = {"mean": "the released mean (float and exact), its grid index k and the public number of units n"}
    output = "mean"
    grid_names = ("lower", "upper", "step")

    def check(self, spec, params):
        problems = self._check_common(spec, params)
        _int_column(spec, params, "column", problems)
        _steps(params["lower"], params["upper"], params["step"], "the mean's grid", problems)
        if not problems and params["upper"] > params["lower"]:
            problems.extend(self._scale_problems(spec, params))
        return problems

    def worst_statistic(self, params) -> tuple[int, str]:
        """(N, why) for the scale 2 Delta / (epsilon step N): N = n, the number of units, public but
        taken from the data; no bound on it is declared, and its widest scale is at n = 1, whose
        exact numerator is the largest any n gives (dividing by n only cancels factors)."""
        return 1, (
            "N = n, the number of units (public, but counted in the data, and the spec admits any n): "
            "the scale is widest at n = 1, and no other n gives a larger exact numerator"
        )

    def output_keys(self, spec, params):
        return {"mean": OutputKeys(params["table"])}

    def width(self, params, relation: str = "hamming") -> Fraction:
        """One unit's largest move of the gradient n theta - S: a replaced value moves S by at most
        upper - lower; an added or removed one moves the gradient by theta - v, as much (theta and v
        both in [lower, upper])."""
        return Fraction(params["upper"]) - Fraction(params["lower"])

    def statistics(self, params, frame):
        """(n, S): the number of units and the exact sum of the clipped values (an int column: integers)."""
        lo, hi = Fraction(params["lower"]), Fraction(params["upper"])
        x = frame[params["column"]].to_numpy(dtype=np.int64)
        below, above = x < lo, x > hi
        inside = _exact_sum(x[~below & ~above])
        return len(x), inside + int(below.sum()) * lo + int(above.sum()) * hi

    def law(self, spec, params, stats):
        n, s = stats
        lo, step = Fraction(params["lower"]), Fraction(params["step"])
        if n == 0:
            return Fraction(0), Fraction(0)
        return (Fraction(s) - n * lo) / (n * step), Fraction(params["epsilon"]) * n * step / (
            2 * self.sensitivity(spec, params)
        )

    def extremes(self, params):
        c = params["column"]
        lo, hi = math_floor_ceil(params)
        return {c: hi}, {c: lo}, [{c: lo}, {c: lo}]


def _exact_sum(values) -> int:
    """The exact integer sum of an int64 array (int64 when it cannot overflow, Python ints otherwise)."""
    if not len(values):
        return 0
    big = int(np.abs(values).max())
    return int(values.sum()) if big * len(values) < 2**62 else int(values.astype(object).sum())


def math_floor_ceil(params):
    """Int values at the clipping bounds (the column is int): the extremes a record can take once clipped."""
    return math.ceil(Fraction(params["lower"])), math.floor(Fraction(params["upper"]))


def _slope_range(beta: Fraction, params) -> tuple[Fraction, dict, dict]:
    """max - min over int records (x, y) in the box of g(x, y) = beta x^2 - x (y - a), the gradient's
    one-unit term at beta, with its argmax and argmin records. g is linear in y (extremes at the y
    bounds) and quadratic in x (extremes at the x bounds or the integers around beta's vertex
    (y - a) / (2 beta)), so a few candidates give the exact extremes."""
    a = Fraction(params["intercept"])
    xs = {params["x_lower"], params["x_upper"]}
    ys = (params["y_lower"], params["y_upper"])
    if beta != 0:
        for y in ys:
            v = (y - a) / (2 * beta)
            xs |= {min(max(t, params["x_lower"]), params["x_upper"]) for t in (math.floor(v), math.ceil(v))}
    vals = {(x, y): beta * x * x - x * (y - a) for x in xs for y in ys}
    top, bottom = max(vals, key=vals.get), min(vals, key=vals.get)
    return vals[top] - vals[bottom], {"x": top[0], "y": top[1]}, {"x": bottom[0], "y": bottom[1]}


def _g(beta: Fraction, record: dict, params) -> Fraction:
    return beta * record["x"] ** 2 - record["x"] * (record["y"] - Fraction(params["intercept"]))


class WassersteinKNGSlope(_GridKNG):
    """The slope of a regression through a declared public intercept a (0: through the origin).
    Loss l(beta) = sum_i (y_i - a - beta x_i)^2 / 2 with x, y clipped to declared int bounds;
    gradient beta A - B, A = sum x_i^2, B = sum x_i (y_i - a). Replacing one unit's (x, y) moves
    the gradient at beta by g_beta(x, y) - g_beta(x', y'), g_beta(x, y) = beta x^2 - x (y - a), so
    by at most R(beta) = max g_beta - min g_beta over the box; R is a maximum of functions linear
    in beta, hence convex, so its supremum over the declared slope range is at an end. The
    Wasserstein sensitivity is the count's W_inf over the class times that supremum. On the grid
    beta_k = lower + k step, |beta_k A - B| = step A |k - c| with c = (B - lower A) / (step A),
    so k has law exp(-r |k - c|), r = epsilon step A / (2 Delta) (uniform when A = 0)."""

    name = "wasserstein_kng_slope"
    version = "1.0.0"
    description = (
        "Seed 2's Wasserstein K-norm gradient mechanism for a one-dimensional regression slope (through a "
        "declared public intercept), x and y int columns clipped to declared bounds, on a declared grid; exact draws."
    )
    proof = (
        "Theorem 10 of the second seed paper (the Wasserstein K-norm gradient mechanism): the gradient "
        "beta sum x^2 - sum x (y - a) moves by the count's Wasserstein sensitivity times the largest one-unit "
        "range over the declared box and slope range"
    )
    sampling = WassersteinKNGMean.sampling
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the unit table", required=True),
            ParamSpec("x", "column", "the int regressor column", required=True),
            ParamSpec("y", "column", "the int response column", required=True),
            ParamSpec("x_lower", "int", "x's clipping lower bound (declared, public)", required=True),
            ParamSpec("x_upper", "int", "x's clipping upper bound (declared, public)", required=True),
            ParamSpec("y_lower", "int", "y's clipping lower bound (declared, public)", required=True),
            ParamSpec("y_upper", "int", "y's clipping upper bound (declared, public)", required=True),
            ParamSpec(
                "intercept",
                "number",
                "the public intercept a of y = a + beta x (0: through the origin)",
                default=Fraction(0),
            ),
            ParamSpec("lower", "number", "the slope grid's lower end", required=True),
            ParamSpec("upper", "number", "the slope grid's upper end", required=True),
            ParamSpec("step", "number", "the slope grid's step", required=True, low=Fraction(0)),
            ParamSpec("epsilon", "number", "the Z-Pufferfish budget", required=True, low=Fraction(0)),
        )
    )
    outputs = {"slope": "the released slope (float and exact), its grid index k and the public number of units n"}
    output = "slope"
    grid_names = ("lower", "upper", "step")

    def check(self, spec, params):
        problems = self._check_common(spec, params)
        _int_column(spec, params, "x", problems)
        _int_column(spec, params, "y", problems)
        for v in ("x", "y"):
            if params[f"{v}_lower"] > params[f"{v}_upper"]:
                problems.append(Diagnostic(f"{v}_lower must be at most {v}_upper"))
        _steps(params["lower"], params["upper"], params["step"], "the slope's grid", problems)
        if not problems and self.width(params, self._relation(spec)) == 0:
            problems.append(Diagnostic("the box of records is one point: the gradient never moves, nothing to protect"))
        if not problems:
            problems.extend(self._scale_problems(spec, params))
        return problems

    def worst_statistic(self, params) -> tuple[int, str]:
        """(N, why) for the scale 2 Delta / (epsilon step N): N = A = sum of the clipped x², from the
        data. Every A is a multiple of g, the gcd of the nonzero x² the box allows, and with n
        unbounded some A is g times a number sharing no factor with the scale's numerator: the
        largest exact numerator any dataset gives is the one at A = g (A = 0 draws uniformly)."""
        lo, hi = params["x_lower"], params["x_upper"]
        xs = [x for x in {*range(lo, min(hi, lo + 3) + 1), *range(max(lo, hi - 3), hi + 1)} if x]  # consecutive: gcd 1
        g = math.gcd(*xs) ** 2 if xs else 1
        return g, (
            f"N = A, the sum of the clipped x² over the data (the spec admits any number of records): every A "
            f"is a multiple of {g} (the gcd of the x² the box allows), and some A gives the exact numerator "
            f"the scale has at A = {g}, the largest any dataset gives"
        )

    def output_keys(self, spec, params):
        return {"slope": OutputKeys(params["table"])}

    def width(self, params, relation: str = "hamming") -> Fraction:
        """One unit's largest move of the gradient over the slope range: max(R(lower), R(upper)) for a
        replaced record; an added or removed record moves it by g_beta itself, so under symdiff the
        largest |g_beta| counts too (it exceeds R when the box keeps x away from 0)."""
        ends = [_slope_range(Fraction(params[e]), params) for e in ("lower", "upper")]
        moves = [r for r, _, _ in ends]
        if relation != "hamming":
            moves += [
                abs(_g(Fraction(params[e]), rec, params))
                for e, (_, top, bottom) in zip(("lower", "upper"), ends)
                for rec in (top, bottom)
            ]
        return max(moves)

    def statistics(self, params, frame):
        """(n, A, B): exact integers A = sum x^2 and B = sum x (y - a) (rational with a rational intercept)."""
        x = np.clip(frame[params["x"]].to_numpy(dtype=np.int64), params["x_lower"], params["x_upper"])
        y = np.clip(frame[params["y"]].to_numpy(dtype=np.int64), params["y_lower"], params["y_upper"])
        big = max(abs(params["x_lower"]), abs(params["x_upper"])) * max(
            abs(params["x_lower"]), abs(params["x_upper"]), abs(params["y_lower"]), abs(params["y_upper"])
        )
        if big * max(len(x), 1) >= 2**62:
            x, y = x.astype(object), y.astype(object)
        a = Fraction(params["intercept"])
        return len(x), int((x * x).sum()), int((x * y).sum()) - a * int(x.sum())

    def law(self, spec, params, stats):
        n, A, B = stats
        lo, step = Fraction(params["lower"]), Fraction(params["step"])
        if A == 0:
            return Fraction(0), Fraction(0)
        return (Fraction(B) - lo * A) / (step * A), Fraction(params["epsilon"]) * step * A / (
            2 * self.sensitivity(spec, params)
        )

    def extremes(self, params):
        worst = max(("lower", "upper"), key=lambda e: _slope_range(Fraction(params[e]), params)[0])
        beta = Fraction(params[worst])
        _, top, bottom = _slope_range(beta, params)
        # ten records on the line y = a + beta x (as near as the box allows), so both worlds' laws
        # put mass at the worst end of the slope range, where the two gradients differ by Delta
        x = max(params["x_lower"], min(params["x_upper"], 2)) or params["x_upper"]
        y = max(params["y_lower"], min(params["y_upper"], round(Fraction(params["intercept"]) + beta * x)))
        rename = lambda r: {params["x"]: r["x"], params["y"]: r["y"]}  # noqa: E731
        return rename(top), rename(bottom), [rename({"x": x, "y": y})] * 10


@hookimpl
def dpspec_mechanisms():
    return [WassersteinKNG()]
