"""Randomized response's plugin: the hook implementations and the Mechanism class, which reads
the spec's parameters into a `Design` and hands the work to the modules beside it."""

from __future__ import annotations

import math
from fractions import Fraction

from dpspec.api import (
    ComparedCounts,
    ExpectedError,
    Mechanism,
    NativeFlavor,
    ParamSpec,
    ParameterSchema,
    RunContext,
    hookimpl,
    ir,
    OutputKeys,
    ReleaseColumns,
    BudgetStatement,
    PureDP,
    LazyModule,
)

from . import algorithm, neighbours
from .algorithm import epsilon
from .design import Design, problems

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())
np = LazyModule("numpy", "np", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow, markupsafe with this module
_likelihood = LazyModule("dpspec_rr.likelihood", "_likelihood", globals())
_report = LazyModule("dpspec_rr.report", "_report", globals())

__version__ = "1.0.0"


class RandomizedResponse(Mechanism):
    name = "randomized_response"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    version = __version__
    description = "Warner's randomized response on one binary column: each unit answers truthfully with probability p."
    proof = "Warner (1965); the likelihood ratio of any answer is at most max(p/(1-p), (1-p)/p) (Dwork & Roth 2014, Section 3.2)"
    sampling = "exact: one Bernoulli(p) draw per unit for rational p from uniform integers (dpspec.api.bernoulli)"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose units answer", required=True),
            ParamSpec(
                "column", "column", "the binary column (bool, or an enumerated set of two values)", required=True
            ),
            ParamSpec(
                "p", "number", "probability of answering truthfully", required=True, low=Fraction(0), high=Fraction(1)
            ),
            ParamSpec("positive", "string", "the value counted as 'yes' (default: true, or the first listed value)"),
        )
    )
    outputs = {
        "responses": "one randomized answer per unit, in input order",
        "estimate": "the unbiased estimate of the proportion of 'yes' with its standard error",
    }

    def design(self, spec, params) -> Design:
        """The parameters read once (after `check` found no problem)."""
        return Design.parse(spec, params)

    def check(self, spec, params):
        return problems(spec, params)

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "hamming", "pure")

    def output_keys(self, spec, params):
        """The responses are records (one per unit, how many is the invariant `count TABLE`): a
        value nobody reported is no missing cell. The estimate is one row, keyed by nothing."""

        return {"responses": OutputKeys(params["table"], records=True), "estimate": OutputKeys(params["table"])}

    def release_columns(self, spec, params):
        """The responses `likelihood` reads: the column, each answer one of its declared values (a
        doctored 'nan' would otherwise count as a 'no')."""

        allowed = self.design(spec, params).allowed_answers

        def implied(frame):
            return {params["column"]: frame[params["column"]].astype(str).str.strip().isin(allowed).to_numpy()}

        return {"responses": ReleaseColumns((params["column"],), implied=implied)}

    def induced_invariants(self, spec, params):
        return [ir.CountQuery(params["table"])]

    def budget(self, spec, params, facts):

        return BudgetStatement(
            PureDP(epsilon(params["p"])),
            worst=PureDP(epsilon(params["p"])),
            notes=(f"epsilon = |ln(p/(1-p))| with p = {ir.format_number(params['p'])}",),
        )

    def opendp_script(self, spec, params):
        """Each unit's answer is OpenDP's randomized response on one boolean; under change-one-unit
        only one answer differs, so the release's budget is that measurement's map at d_in = 1.
        OpenDP takes the truth probability at least 1/2: below it, every answer is flipped
        (post-processing), which leaves the budget unchanged."""
        p = Fraction(params["p"])
        truth = max(p, 1 - p)
        return (
            f"# one unit's answer, truthful with probability {ir.format_number(truth)}"
            + (" (the spec's p, flipped: post-processing)" if truth != p else "")
            + "\n"
            f"measurement = dp.m.make_randomized_response_bool({truth.numerator}/{truth.denominator})\n"
            "d_in = 1  # change one unit: its one answer differs (units answer independently)"
        )

    def public_facts(self, spec, params, data):
        """n, the number of units: published exactly (`count TABLE` is the invariant)."""
        return {"n": int(len(data[params["table"]]))} if params["table"] in data else {}

    def expected_error(self, spec, params, facts):
        """The estimated proportion's variance given the data: each report is truthful with
        probability p whatever the answer, so the reported share has variance p(1-p)/n and the
        unbiased estimate (q - (1-p)) / (2p-1) has p(1-p) / (n (2p-1)^2), whatever the true share."""
        n, p = facts.get("n"), Fraction(params["p"])
        variance = math.inf if not n or p == Fraction(1, 2) else float(p * (1 - p) / (n * (2 * p - 1) ** 2))
        return [ExpectedError("estimate", None, "proportion of 'yes'", variance, "estimated proportion")]

    def compared_counts(self, spec, params, data, release):
        """The estimated count of 'yes' (estimate x n) beside the true count (internal only)."""
        est = release.outputs["estimate"].iloc[0]
        truth = int((data[params["table"]][params["column"]] == self.design(spec, params).positive).sum())
        released = pd.Series([float(est["estimate"]) * int(est["n"])], index=["yes"])
        return [ComparedCounts("count of 'yes' (estimated)", None, pd.Series([truth], index=["yes"]), released)]

    def run(self, spec, params, data, ctx):
        return algorithm.release(self.design(spec, params), data, ctx.rng)

    def likelihood(self, spec, params, outputs):
        design = self.design(spec, params)
        return _likelihood.responses_likelihood(design.table, design.column, str(design.positive), design.p, outputs)

    def neighbours(self, spec, params):
        """One unit's answer flips (see `neighbours.pairs`)."""
        return neighbours.pairs(
            spec, self.design(spec, params), lambda data, rng: self.run(spec, params, data, RunContext(rng=rng))
        )

    def utility(self, spec, params, data, releases):
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
    return _report.sections(result)
