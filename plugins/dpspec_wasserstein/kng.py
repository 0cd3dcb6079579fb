"""The Wasserstein K-norm gradient mechanism (seed 2, Theorem 10) for a rate.

The loss of a rate theta over n units with binary values x_i is l(theta) = sum_i (x_i - theta)^2 / 2,
convex, with gradient n theta - S (S the number of 1s). One unit's secret moves S, so the
gradient's Wasserstein sensitivity over the class is the count's (1 under independence). The
mechanism releases theta with density proportional to exp(-epsilon |n theta - S| / (2 Delta)) with
respect to a base measure from public information: the grid {0, 1/n, ..., 1} (n, the number of
units, is Z), so theta = k / n with k a discrete Laplace law on 0..n centred at S, drawn by the
project's exact sampler. Theorem 11: the privacy error is O(1/n), below the sampling error
O(1/sqrt(n)); tests/test_wasserstein.py shows n * (theta - S/n) keeping one spread as n grows.
"""
from __future__ import annotations

from fractions import Fraction

from dpspec.api import (BudgetStatement, Diagnostic, Mechanism, MechanismError, NativeFlavor, OutputKeys, ParamSpec, ParameterSchema,
                        PublicCondition, PureDP, Release, hookimpl, ir, pufferfish, sampler_limit_problem)


class WassersteinKNG(Mechanism):
    name = "wasserstein_kng"
    version = "1.0.0"
    description = ("Seed 2's Wasserstein K-norm gradient mechanism for a rate (squared-error loss), on the grid k/n "
                   "given the public number of units; exact draws.")
    proof = 'Theorem 10 of the second seed paper (the Wasserstein K-norm gradient mechanism; Theorem 11 bounds its error)'
    sampling = 'exact: discrete Laplace integer noise on the grid (dpspec.api.discrete_laplace), no floating point'
    parameters = ParameterSchema((
        ParamSpec("table", "table", "the unit table", required=True),
        ParamSpec("column", "column", "the bool column whose rate is released", required=True),
        ParamSpec("epsilon", "number", "the Z-Pufferfish budget", required=True, low=Fraction(0)),
    ))
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
            except (ZeroDivisionError, MechanismError, ValueError):  # a class without a count sensitivity: said elsewhere
                scale = None
            problem = None if scale is None else sampler_limit_problem("discrete_laplace", scale, ("epsilon", params["epsilon"]))
            if problem is not None:
                p = spec.mechanism.params.get("epsilon")
                loc = (p.loc if p is not None else None) or spec.mechanism.loc
                problems.append(Diagnostic(f"{self.name}: the rate's noise cannot be drawn: {problem}",
                                           *((loc.line, loc.column) if loc else (None, None))))
        if not any(p.query.table == params["table"] and not p.query.columns for p in spec.public):
            problems.append(Diagnostic(f"the base measure is the grid k/n: declare the number of units in Z "
                                       f"(public {{ count {params['table']} released \"...\" used as total }})"))
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], spec.unit.relation if spec.unit else "hamming", "pure")

    def output_keys(self, spec, params):
        """One row keyed by nothing: k, and n from Z (the public number of units)."""
        return {"rate": OutputKeys(params["table"])}

    def sensitivity(self, spec):

        return pufferfish.count_sensitivity(spec.pufferfish)

    def rate(self, spec, params) -> Fraction:
        return Fraction(params["epsilon"]) / (2 * Fraction(self.sensitivity(spec)))

    def budget(self, spec, params, facts):

        dp = pufferfish.dp_cell_counts_sensitivity("symdiff")
        note = (f"epsilon-Z-Pufferfish (Theorem 10): the gradient's Wasserstein sensitivity over the class is "
                f"{ir.format_number(Fraction(self.sensitivity(spec)))} (DP sensitivity {ir.format_number(dp)}, Lemma 12)")
        conditions = tuple(PublicCondition(p.query.describe(), p.source) for p in spec.public)
        return BudgetStatement(PureDP(params["epsilon"]), worst=PureDP(params["epsilon"]), notes=(note,),
                               public=conditions)

    def budget_breakdown(self, spec, params):
        return {"pufferfish": {"guarantee": "epsilon-Z-Pufferfish (seed 2, Definition 3; Theorem 10)",
                               "sensitivity": {"gradient": {"wasserstein": float(self.sensitivity(spec)), "dp": 1.0}}}}

    def draw(self, spec, params, positives: int, n: int, rng, draws: int = 1):
        import numpy as np

        from .samplers import truncated_laplace

        return truncated_laplace(np.full(draws, positives), 0, np.full(draws, n), self.rate(spec, params), rng)

    def run(self, spec, params, data, rng):
        import pandas as pd

        values = data[params["table"]][params["column"]].to_numpy(dtype=bool)
        n, s = len(values), int(values.sum())
        k = int(self.draw(spec, params, s, n, rng)[0])
        return Release(outputs={"rate": pd.DataFrame({"k": [k], "n": [n], "rate": [k / n if n else float("nan")]})},
                       facts={"n": n}, internal={"true_rate": s / n if n else float("nan")})

    def neighbours(self, spec, params):
        """One unit's value is 1 or 0 (n, public, unchanged)."""
        import numpy as np

        from dpspec.api import NeighbourPair, miniature_record, typed_frame

        table = spec.domain.table(params["table"])

        def rows(flags):
            out = [{**miniature_record(table, {}), params["column"]: f} for f in flags]
            return {table.name: typed_frame(table, out)}

        def batch(data, n, rng):
            values = data[table.name][params["column"]].to_numpy(dtype=bool)
            return self.draw(spec, params, int(values.sum()), len(values), rng, draws=n)[:, None]

        return [NeighbourPair("one unit's value is 1 or 0", rows([True, False, False]), rows([False, False, False]),
                              batch=batch)]

    def likelihood(self, spec, params, outputs):
        import numpy as np
        import pandas as pd

        from .likelihood import _one

        frame = outputs.get("rate")
        if frame is None:
            return None
        n = int(frame["n"].iloc[0])
        return [_one(ir.CountQuery(params["table"], (params["column"],)), pd.DataFrame({params["column"]: ["true"]}),
                     np.array([int(frame["k"].iloc[0])]), float(self.rate(spec, params)), np.array([n]),
                     "Wasserstein K-norm gradient mechanism on the grid k/n")]


@hookimpl
def dpspec_mechanisms():
    return [WassersteinKNG()]
