"""A third-party mechanism, packaged on its own: the geometric mechanism on a row count.

It exists to prove that dpspec finds plugins only through the `dpspec` entry-point group.
It is a test fixture, not a production mechanism: numpy's geometric sampler uses floating point.
Adding or removing one unit changes the count by one, so two-sided geometric noise with
ratio exp(-epsilon) is pure epsilon-DP under add/remove-one (Ghosh, Roughgarden, Sundararajan
2009).
"""

from __future__ import annotations

import math
from fractions import Fraction

import click
import numpy as np
import pandas as pd

from dpspec.api import Mechanism, NativeFlavor, ParamSpec, ParameterSchema, Release, hookimpl

DPSPEC_API = "1.1"  # the plugin API it is written against (dpspec.api.API_VERSION)


class GeometricCount(Mechanism):
    name = "geometric_count"
    version = "0.3.0"
    description = "The number of units of a table, plus two-sided geometric noise."
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose units are counted", required=True),
            ParamSpec(
                "epsilon", "number", "the pure DP budget", required=True, low=Fraction(1, 1000), high=Fraction(20)
            ),
        )
    )
    outputs = {"count": "the noisy count"}

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "symdiff", "pure")

    def budget(self, spec, params, facts):
        from dpspec.api import BudgetStatement, PureDP

        return BudgetStatement.fixed(PureDP(float(params["epsilon"])))

    def run(self, spec, params, data, rng):
        q = math.exp(-float(params["epsilon"]))
        noise = int(rng.geometric(1 - q)) - int(rng.geometric(1 - q))
        return Release(outputs={"count": pd.DataFrame({"count": [len(data[params["table"]]) + noise]})})

    def likelihood(self, spec, params, outputs):
        """Its own likelihood, for `dpspec infer`: P(v | t) = (1 - q)/(1 + q) q^|v - t|."""
        from dpspec.api import CountLikelihood, ir

        if "count" not in outputs:
            return None
        q = math.exp(-float(params["epsilon"]))
        value = outputs["count"]["count"].to_numpy(dtype=np.int64)[:1]
        log_max = math.log((1 - q) / (1 + q))

        def logpmf(truth):
            return log_max + np.abs(value - np.asarray(truth)) * math.log(q)

        return [
            CountLikelihood(
                ir.CountQuery(params["table"]),
                pd.DataFrame(index=pd.RangeIndex(1)),
                value,
                logpmf,
                np.array([log_max]),
                value.astype(float),
                np.array([2 * q / (1 - q) ** 2]),
                "two-sided geometric noise",
            )
        ]


@hookimpl
def dpspec_mechanisms():
    return [GeometricCount()]


@hookimpl
def dpspec_cli(group):
    @group.command("geometric-hello")
    def hello():
        """A command added by a third-party plugin."""
        click.echo("hello from dpspec-geometric")
