"""Randomized response (Warner 1965): the classroom example of pure DP, and the worked example
for plugin authors.

Each unit reports its binary attribute truthfully with probability p and the other value
otherwise. Under Hamming distance on that unit (change one unit's answer) the likelihood ratio
of any output is at most max(p/(1-p), (1-p)/p), so the mechanism is pure |ln(p/(1-p))|-DP. The
number of units is published exactly: `count TABLE` is an invariant.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    import numpy as np

import math
from fractions import Fraction

from dpspec.api import Diagnostic, Mechanism, NativeFlavor, ParamSpec, ParameterSchema, Release, hookimpl, ir

__version__ = "1.0.0"
MAX_DENOMINATOR = 1 << 62


def epsilon(p: Fraction):
    """Pure DP budget of randomized response with truth probability p: |ln(p/(1-p))|, irrational,
    so stated as a certified upper bound (an exact Fraction, the smallest float at or above it)."""
    from dpspec.api import interval

    p = Fraction(p)
    if p in (0, 1):
        return math.inf
    log_odds = interval(p / (1 - p)).ln()
    return max(log_odds.upper(), (-log_odds).upper())


def estimate(reported_yes: np.ndarray, p: Fraction) -> dict:
    """Unbiased estimate of the true proportion, with its estimated standard error."""
    n = int(reported_yes.size)
    q = float(reported_yes.mean()) if n else math.nan
    scale = 2 * float(p) - 1
    if n == 0 or scale == 0:
        return {"n": n, "reported_proportion": q, "estimate": math.nan, "standard_error": math.inf}
    est = (q - (1 - float(p))) / scale
    se = math.sqrt(q * (1 - q) / n) / abs(scale)
    return {"n": n, "reported_proportion": q, "estimate": est, "standard_error": se}


class RandomizedResponse(Mechanism):
    name = "randomized_response"
    version = __version__
    description = "Warner's randomized response on one binary column: each unit answers truthfully with probability p."
    proof = 'Warner (1965); the likelihood ratio of any answer is at most max(p/(1-p), (1-p)/p) (Dwork & Roth 2014, Section 3.2)'
    sampling = 'exact: one Bernoulli(p) draw per unit for rational p from uniform integers (dpspec.api.bernoulli)'
    parameters = ParameterSchema((
        ParamSpec("table", "table", "the table whose units answer", required=True),
        ParamSpec("column", "column", "the binary column (bool, or an enumerated set of two values)", required=True),
        ParamSpec("p", "number", "probability of answering truthfully", required=True, low=Fraction(0), high=Fraction(1)),
        ParamSpec("positive", "string", "the value counted as 'yes' (default: true, or the first listed value)"),
    ))
    outputs = {
        "responses": "one randomized answer per unit, in input order",
        "estimate": "the unbiased estimate of the proportion of 'yes' with its standard error",
    }

    def _column(self, spec, params) -> ir.Column:
        return spec.domain.table(params["table"]).column(params["column"])

    def check(self, spec, params):
        problems = []
        table = spec.domain.table(params["table"])
        col = table.column(params["column"])
        if col is None:
            return [Diagnostic(f"table '{table.name}' has no column '{params['column']}'")]
        if col.type.kind not in ("bool", "enum") or (col.type.kind == "enum" and len(col.type.values) != 2):
            problems.append(Diagnostic(f"column '{col.name}' must be binary (bool, or a set of exactly two values) for randomized response"))
        elif params.get("positive") is not None:
            allowed = ("true", "false") if col.type.kind == "bool" else col.type.values
            if params["positive"] not in allowed:
                problems.append(Diagnostic(f"positive value '{params['positive']}' is not one of {', '.join(allowed)}"))
        p = params["p"]
        if p.denominator > MAX_DENOMINATOR:
            problems.append(Diagnostic(f"p = {p} has too large a denominator for the exact sampler (at most 2^62)"))
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "hamming", "pure")

    def output_keys(self, spec, params):
        """The responses are records (one per unit, how many is the invariant `count TABLE`): a
        value nobody reported is no missing cell. The estimate is one row, keyed by nothing."""
        from dpspec.api import OutputKeys

        return {"responses": OutputKeys(params["table"], records=True), "estimate": OutputKeys(params["table"])}

    def release_columns(self, spec, params):
        """The responses `likelihood` reads: the column, each answer one of its declared values (a
        doctored 'nan' would otherwise count as a 'no')."""
        from dpspec.api import ReleaseColumns

        col = self._column(spec, params)
        allowed = ({"True", "False", "true", "false"} if col.type.kind == "bool"
                   else {str(v) for v in col.type.values})

        def implied(frame):
            return {params["column"]: frame[params["column"]].astype(str).str.strip().isin(allowed).to_numpy()}

        return {"responses": ReleaseColumns((params["column"],), implied=implied)}

    def induced_invariants(self, spec, params):
        return [ir.CountQuery(params["table"])]

    def budget(self, spec, params, facts):
        from dpspec.api import BudgetStatement, PureDP

        return BudgetStatement(PureDP(epsilon(params["p"])), worst=PureDP(epsilon(params["p"])),
                               notes=(f"epsilon = |ln(p/(1-p))| with p = {ir.format_number(params['p'])}",))

    def opendp_script(self, spec, params):
        """Each unit's answer is OpenDP's randomized response on one boolean; under change-one-unit
        only one answer differs, so the release's budget is that measurement's map at d_in = 1.
        OpenDP takes the truth probability at least 1/2: below it, every answer is flipped
        (post-processing), which leaves the budget unchanged."""
        p = Fraction(params["p"])
        truth = max(p, 1 - p)
        return (f"# one unit's answer, truthful with probability {ir.format_number(truth)}"
                + (" (the spec's p, flipped: post-processing)" if truth != p else "") + "\n"
                f"measurement = dp.m.make_randomized_response_bool({truth.numerator}/{truth.denominator})\n"
                "d_in = 1  # change one unit: its one answer differs (units answer independently)")

    def public_facts(self, spec, params, data):
        """n, the number of units: published exactly (`count TABLE` is the invariant)."""
        return {"n": int(len(data[params["table"]]))} if params["table"] in data else {}

    def expected_error(self, spec, params, facts):
        """The estimated proportion's variance given the data: each report is truthful with
        probability p whatever the answer, so the reported share has variance p(1-p)/n and the
        unbiased estimate (q - (1-p)) / (2p-1) has p(1-p) / (n (2p-1)^2), whatever the true share."""
        n, p = facts.get("n"), Fraction(params["p"])
        if not n or p == Fraction(1, 2):
            return [{"table": "estimate", "level": None, "query": "proportion of 'yes'", "variance": math.inf,
                     "of": "estimated proportion"}]
        return [{"table": "estimate", "level": None, "query": "proportion of 'yes'",
                 "variance": float(p * (1 - p) / (n * (2 * p - 1) ** 2)), "of": "estimated proportion"}]

    def compared_counts(self, spec, params, data, release):
        """The estimated count of 'yes' (estimate x n) beside the true count (internal only)."""
        import pandas as pd

        est = release.outputs["estimate"].iloc[0]
        truth = int((data[params["table"]][params["column"]] == self._positive(spec, params)).sum())
        return [{"table": "count of 'yes' (estimated)", "level": None, "truth": pd.Series([truth], index=["yes"]),
                 "released": pd.Series([float(est["estimate"]) * int(est["n"])], index=["yes"])}]

    def _positive(self, spec, params):
        col = self._column(spec, params)
        if col.type.kind == "bool":
            return params.get("positive", "true") != "false"
        return params.get("positive") or col.type.values[0]

    def run(self, spec, params, data, rng):
        import numpy as np  # lazily: `dpspec check` and `--help` must not pay for numpy or pandas
        import pandas as pd

        from dpspec.api import bernoulli, record_measurement

        frame = data[params["table"]]
        values = frame[params["column"]]
        truth = (values == self._positive(spec, params)).to_numpy(dtype=bool)
        record_measurement("units", len(truth), "none")  # the invariant `count TABLE`: one answer per unit
        record_measurement("answers", truth, "randomized_response", params["p"], sensitivity=1, norm="l1")
        keep = bernoulli(params["p"], len(truth), rng)
        reported = np.where(keep, truth, ~truth)
        col = self._column(spec, params)
        if col.type.kind == "bool":
            answers = pd.Series(reported, name=col.name)
        else:
            pos = self._positive(spec, params)
            neg = next(v for v in col.type.values if v != pos)
            answers = pd.Series(np.where(reported, pos, neg), name=col.name)
        est = estimate(reported, params["p"])
        internal = {"true_proportion": float(truth.mean()) if len(truth) else math.nan}
        return Release(
            outputs={"responses": answers.to_frame(), "estimate": pd.DataFrame([est])},
            facts={"n": int(len(truth))},
            internal=internal,
        )

    def likelihood(self, spec, params, outputs):
        from .likelihood import responses_likelihood

        return responses_likelihood(params["table"], params["column"], str(self._positive(spec, params)),
                                    params["p"], outputs)
    def neighbours(self, spec, params):
        """One unit's answer flips (the worst case: the ratio is p/(1-p) for its report).

        Runs are batched: the miniature table repeated n times is one call to `run`, whose units
        answer independently, so row r of the batch is run r // units of the miniature."""
        import numpy as np

        from dpspec.api import NeighbourPair, miniature_rows, typed_frame

        table = spec.domain.table(params["table"])
        col = self._column(spec, params)
        pos = self._positive(spec, params)
        values = (True, False) if col.type.kind == "bool" else (pos, next(v for v in col.type.values if v != pos))
        rows = miniature_rows(spec)
        frames = []
        for value in values:
            records = [dict(r) for r in rows[table.name]]
            records[0][col.name] = value
            frames.append({**{t.name: typed_frame(t, rows[t.name]) for t in spec.domain.tables},
                           table.name: typed_frame(table, records)})

        def batch(data, n, rng):
            frame = data[table.name]
            units = len(frame)
            repeated = frame.iloc[np.tile(np.arange(units), n)].reset_index(drop=True)
            release = self.run(spec, params, {**data, table.name: repeated}, rng)
            answers = release.outputs["responses"][col.name].to_numpy()
            yes = answers.astype(bool) if col.type.kind == "bool" else answers == pos
            return yes.reshape(n, units)

        return [NeighbourPair(f"one {table.name} unit's {col.name} is {values[0]} or {values[1]}",
                              frames[0], frames[1], batch=batch)]

    def utility(self, spec, params, data, releases):
        import numpy as np

        truth = releases[0].internal["true_proportion"]
        estimates = np.array([r.outputs["estimate"]["estimate"].iloc[0] for r in releases])
        errors = estimates - truth
        return {
            "true_proportion": truth,
            "runs": len(releases),
            "mean_estimate": float(estimates.mean()),
            "mean_absolute_error": float(np.abs(errors).mean()),
            "root_mean_squared_error": float(np.sqrt((errors**2).mean())),
        }


@hookimpl
def dpspec_mechanisms():
    return [RandomizedResponse()]


@hookimpl
def dpspec_report_sections(result):
    from dpspec_rr.report import sections

    return sections(result)
