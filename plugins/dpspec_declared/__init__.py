"""`declared`: a deployment known only by what its curator published (its budget, unit and
flavor), for example a spec imported from an OpenDP Deployments Registry entry.

dpspec cannot run such a mechanism or derive its budget: the budget is the one stated, taken
as given, under the relation and premetric the statement names. That is still useful: the
budget calculus converts it into other currencies and units, and the audit compares it with
other deployments like with like. The audit says, every time, that the figure is a claim
(`dpspec.audit.registry_rules`), and `compile` refuses to run it.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec.api import (
    Diagnostic,
    Mechanism,
    MechanismError,
    NativeFlavor,
    ParamSpec,
    ParameterSchema,
    hookimpl,
    BudgetStatement,
)

__version__ = "1.0.0"

# The published parameters that name a premetric, most specific first.
_SHAPES = (
    (("rho",), "zcdp"),
    (("epsilon", "delta"), "approx"),
    (("alpha", "epsilon"), "renyi"),
    (("mu",), "gdp"),
    (("epsilon",), "pure"),
)


def stated_premetric(params: dict) -> str | None:
    """The premetric the stated parameters are in, or None when they name none or several."""
    given = {k for k in ("epsilon", "delta", "rho", "mu", "alpha") if params.get(k) is not None}
    for keys, kind in _SHAPES:
        if given == set(keys):
            return kind
    return None


class Declared(Mechanism):
    name = "declared"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    version = __version__
    description = (
        "A deployment known by its published budget only (e.g. a registry entry): "
        "the budget is the curator's statement, not derived; it cannot be run."
    )
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose units the stated budget protects", required=True),
            ParamSpec(
                "relation",
                "choice",
                "the neighbor relation the budget is stated under",
                required=True,
                choices=("hamming", "symdiff"),
            ),
            ParamSpec(
                "epsilon",
                "number",
                "stated epsilon (pure, approximate with delta, or Rényi with alpha)",
                low=Fraction(0),
            ),
            ParamSpec("delta", "number", "stated delta", low=Fraction(0), high=Fraction(1)),
            ParamSpec("rho", "number", "stated zCDP rho", low=Fraction(0)),
            ParamSpec("mu", "number", "stated Gaussian DP mu", low=Fraction(0)),
            ParamSpec("alpha", "number", "Rényi order of a stated Rényi budget", low=Fraction(1)),
            ParamSpec("source", "string", "where the statement was published"),
        )
    )
    outputs = {}

    def check(self, spec, params):
        if stated_premetric(params) is None:
            return [Diagnostic("state one budget: rho; epsilon; epsilon and delta; alpha and epsilon; or mu")]
        return []

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], params["relation"], stated_premetric(params))

    def budget(self, spec, params, facts):
        kind = stated_premetric(params)
        values = {
            k: params[k] for k in ("epsilon", "delta", "rho", "mu", "alpha") if params.get(k) is not None
        }  # exact
        values["premetric"] = kind
        where = f" ({params['source']})" if params.get("source") else ""
        return BudgetStatement.fixed(values, f"stated by the curator{where}, not derived by dpspec")

    def cannot_run(self, spec, params):
        return NOT_RUNNABLE

    def run(self, spec, params, data, ctx):
        raise MechanismError(NOT_RUNNABLE)


NOT_RUNNABLE = (
    "mechanism 'declared' only records a published budget; there is no algorithm to run. "
    "Use 'dpspec check', 'dpspec budget' and 'dpspec audit' on this spec."
)


@hookimpl
def dpspec_mechanisms():
    return [Declared()]
