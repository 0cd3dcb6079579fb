"""A mechanism written as dpspec 0.1's README showed (`from dpspec.hookspecs import hookimpl`,
`from dpspec.mechanism import ...`), with the 0.1-era helpers it used (`dpspec.noise`,
`dpspec.cli_errors.friendly`). It must keep loading, with a DeprecationWarning per old import.

A row count with discrete Laplace noise of integer scale t = ceil(1/epsilon): pure (1/t)-DP under
add/remove-one, so at most epsilon (a test fixture, not a production mechanism).
"""

from __future__ import annotations

import math
from fractions import Fraction

import click
from dpspec.cli_errors import friendly
from dpspec.hookspecs import hookimpl
from dpspec.mechanism import Mechanism, NativeFlavor, ParameterSchema, ParamSpec, Release
from dpspec.noise import discrete_laplace


class LegacyCount(Mechanism):
    name, version = "legacy_count", "0.1.0"
    description = "The number of units of a table, plus discrete Laplace noise (a 0.1-era plugin)."
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose units are counted", required=True),
            ParamSpec("epsilon", "number", "pure DP budget", required=True, low=Fraction(1, 1000)),
        )
    )
    outputs = {"count": "the noisy count"}

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "symdiff", "pure")

    def induced_invariants(self, spec, params):
        return []

    def budget(self, spec, params, facts):
        from dpspec.budget import BudgetStatement, PureDP

        return BudgetStatement.fixed(PureDP(1 / _scale(params)))

    def run(self, spec, params, data, rng):
        import pandas as pd

        noise = int(discrete_laplace(_scale(params), 1, rng)[0])
        return Release(outputs={"count": pd.DataFrame({"count": [len(data[params["table"]]) + noise]})})


def _scale(params) -> int:
    return math.ceil(1 / Fraction(params["epsilon"]))


@hookimpl
def dpspec_mechanisms():
    return [LegacyCount()]


@hookimpl
def dpspec_cli(group):
    @group.command("legacy-hello")
    @friendly
    def hello():
        """A command added by a 0.1-era plugin."""
        click.echo("hello from dpspec-legacy01")
