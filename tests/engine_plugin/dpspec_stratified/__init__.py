"""A test mechanism that uses the execution-engine contract, as a third-party plugin would.

For every stratum (the rows sharing the values of `by`) it releases the histogram of `column`
with discrete Laplace noise of integer scale `scale`, drawn from the stratum's own keyed
stream. It exists to prove that a plugin written against `dpspec.engine` gets the same release
on every engine and partitioning; it is a test fixture, not a production mechanism. Its cells are
the declared values of `column` in every stratum; its strata are the groups the engine finds, so a
declared stratum nobody is in would be missing, and the compiler's key check would stop the run
(a real mechanism releases every declared stratum).
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pandas as pd

from dpspec.api import (
    Mechanism,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    Release,
    declared_values,
    discrete_laplace,
    hookimpl,
)


def noisy_histogram(key, rows: pd.DataFrame, rng, by, column, values, scale, fail_on=None) -> pd.DataFrame:
    """One unit of work: the stratum's histogram of `column` over its declared values, each cell
    (empty ones too) plus its own noise."""
    if fail_on is not None and key == (fail_on,):
        raise RuntimeError("this stratum was told to fail")  # for the failure tests
    counts = rows[column].astype(str).value_counts(sort=False).reindex(values, fill_value=0)
    noise = discrete_laplace(scale, len(counts), rng)
    out = {name: [value] * len(counts) for name, value in zip(by, key)}
    out[column] = counts.index.to_numpy()
    out["count"] = counts.to_numpy(dtype=np.int64) + np.asarray(noise, dtype=np.int64)
    return pd.DataFrame(out)


class StratifiedHistogram(Mechanism):
    name = "stratified_histogram"
    version = "0.1.0"
    description = "Per-stratum noisy histograms, computed through the execution engine."
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table", required=True),
            ParamSpec("by", "columns", "the stratum key", required=True),
            ParamSpec("column", "column", "the column tabulated in each stratum", required=True),
            ParamSpec(
                "scale",
                "int",
                "integer scale of the discrete Laplace noise",
                required=True,
                low=Fraction(1),
                high=Fraction(1000),
            ),
            ParamSpec("fail_on", "string", "a stratum whose unit of work raises (to test failure handling)"),
            ParamSpec("fail_scale", "int", "a scale at which the run raises (a failing point of a sweep)"),
        )
    )
    outputs = {"histogram": "noisy counts by stratum and value", "strata": "the number of strata"}
    run_context = True  # run(spec, params, data, ctx): ctx.engine is the engine run (API 1.6)
    uses_engine = True

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "symdiff", "pure")

    def output_keys(self, spec, params):
        return {"histogram": OutputKeys(params["table"], (*params["by"], params["column"]))}

    def budget(self, spec, params, facts):
        from dpspec.api import BudgetStatement, PureDP

        return BudgetStatement.fixed(PureDP(1 / params["scale"]))  # one row moves one cell by one

    def run(self, spec, params, data, ctx):
        if params.get("fail_scale") is not None and params["fail_scale"] == params["scale"]:
            raise RuntimeError(f"told to fail at scale {params['scale']}")
        table, by, column = data[params["table"]], list(params["by"]), params["column"]
        values = [str(v) for v in declared_values(spec, params["table"], column)]
        unit = functools.partial(
            noisy_histogram, by=by, column=column, values=values, scale=params["scale"], fail_on=params.get("fail_on")
        )
        schema = {**{c: "str" for c in by}, column: "str", "count": "int64"}
        histogram = ctx.engine.map_groups(table, by, unit, stage="stratified histogram", schema=schema)
        strata = len(ctx.engine.count(table, by))
        return Release(outputs={"histogram": histogram, "strata": pd.DataFrame({"strata": [strata]})})


@hookimpl
def dpspec_mechanisms():
    return [StratifiedHistogram()]
