"""The `opendp` mechanism: parameters, check, budget and run."""

from __future__ import annotations

import math
import os
from fractions import Fraction

from dpspec.api import (
    BudgetStatement,
    Diagnostic,
    Mechanism,
    MechanismError,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    Release,
    SpecError,
    located,
    LazyModule,
)

from . import measurement as om

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())

_STATED = {"pure": ("epsilon",), "zcdp": ("rho",), "approx": ("epsilon", "delta")}


class OpenDPMeasurement(Mechanism):
    name = "opendp"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    version = "0.1.0"
    description = (
        "An OpenDP measurement or Context query returned by a Python entry point (module:function), run "
        "on one column; it runs the user's code, and only on compile."
    )
    proof = "OpenDP's privacy map for the measurement (the library's own proofs: docs.opendp.org)"
    sampling = "OpenDP's own samplers (the library's documentation says which are exact)"
    own_random_source = "OpenDP's own generator (operating-system entropy)"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table whose units the measurement protects", required=True),
            ParamSpec("column", "column", "the column handed to the measurement as a vector", required=True),
            ParamSpec(
                "measurement",
                "string",
                "module:function returning an OpenDP Measurement, or (given the column's "
                "values) a Context query to release (the module is looked up beside the spec first); called only by "
                "compile",
                required=True,
            ),
            ParamSpec("epsilon", "number", "the stated epsilon (pure, or approximate with delta)", low=Fraction(0)),
            ParamSpec("delta", "number", "the stated delta", low=Fraction(0), high=Fraction(1)),
            ParamSpec("rho", "number", "the stated zCDP rho", low=Fraction(0)),
        )
    )
    outputs = {"release": "the measurement's output: one row per value it returns (column 'value')"}

    def _premetric(self, spec) -> str | None:
        """The premetric in OpenDP's and the budget's word ('approx' for the spec's 'approximate')."""
        kind = spec.premetric.kind if spec.premetric is not None else None
        return "approx" if kind == "approximate" else kind

    def _relation(self, spec, params) -> str | None:
        unit = spec.unit
        return unit.relation if unit is not None and unit.table == params["table"] else None

    def check(self, spec, params):
        """Only what the spec states: the entry point is not imported here (it is the user's code)."""
        problems = []
        table = spec.domain.table(params["table"])
        col = table.column(params["column"])
        if col is None:
            return [Diagnostic(f"table '{table.name}' has no column '{params['column']}'")]
        if col.type.kind not in om.ATOMS:
            problems.append(
                Diagnostic(
                    f"column '{col.name}' is {col.type.kind}: OpenDP's vector domains hold "
                    "ints, floats, strings or booleans"
                )
            )
        module, sep, func = params["measurement"].partition(":")
        if not sep or not module or not func.isidentifier():
            problems.append(Diagnostic(f"measurement {params['measurement']!r} is not 'module:function'"))
        premetric = self._premetric(spec)
        want = _STATED.get(premetric)
        if want is None:
            problems.append(
                Diagnostic(f"premetric {premetric}: the opendp mechanism states pure, approx or zcdp budgets")
            )
        else:
            given = tuple(k for k in ("epsilon", "delta", "rho") if params.get(k) is not None)
            if given != want:
                problems.append(
                    Diagnostic(
                        f"state the budget the measurement must meet in the premetric {premetric}: "
                        f"{' and '.join(want)} (got {', '.join(given) or 'none'})"
                    )
                )
        if self._relation(spec, params) not in ("hamming", "symdiff"):
            problems.append(Diagnostic(f"the unit of table '{table.name}' must be hamming or symdiff"))
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], self._relation(spec, params), self._premetric(spec))

    def output_keys(self, spec, params):
        """The output is the measurement's value, keyed by nothing the records hold (its length is the
        measurement's: a user pipeline that keys by found values is the user's to state)."""
        return {"release": OutputKeys(params["table"])}

    def budget(self, spec, params, facts):
        premetric = self._premetric(spec)
        values = {k: Fraction(params[k]) for k in _STATED[premetric]}
        values["premetric"] = premetric
        notes = [
            "the stated budget; compile checks OpenDP's privacy map of the measurement against it and refuses "
            "to release when the library claims more"
        ]
        if facts.get("opendp_claim"):
            notes.append(f"OpenDP's privacy map at d_in = {facts['opendp_d_in']}: {facts['opendp_claim']}")
        return BudgetStatement.fixed(values, "; ".join(notes))

    def opendp_script(self, spec, params):
        """The user's own entry point, imported from beside the spec; d_in as the compile sets it."""
        module, _, func = params["measurement"].partition(":")
        relation = self._relation(spec, params)
        return (
            "import inspect\n"
            "import sys\n"
            f"sys.path.insert(0, {os.path.abspath(spec.base_dir)!r})  # the spec's folder: its pipeline module\n"
            f"from {module} import {func}\n"
            "# an entry point that takes the column's values builds an OpenDP Context on them: here it gets none\n"
            "# (a privacy map does not read the data) and its query is resolved into the measurement it releases\n"
            f"made = {func}([]) if inspect.signature({func}).parameters else {func}()\n"
            "measurement = made.resolve() if hasattr(made, 'resolve') else made\n"
            "_metric = str(measurement.input_metric)\n"
            f"d_in = 2 if {relation!r} == 'hamming' and _metric in ('SymmetricDistance()', 'InsertDeleteDistance()') "
            "else 1"
        )

    def _located(self, spec, message):
        """A SpecError at the `measurement` setting (the entry point the problem is in)."""
        return SpecError(located(spec, [Diagnostic(message, path=("measurement",))]), spec.path, spec.text)

    def _space_problem(self, spec, params, meas, what: str) -> SpecError | None:
        """A located SpecError when `meas` (the measurement, or a Context's accountant) does not read
        the column under the spec's unit with the premetric's measure; None when it does."""
        col = spec.domain.table(params["table"]).column(params["column"])
        relation = self._relation(spec, params)
        metric = om.METRICS.get(str(meas.input_metric))
        if metric is None or (metric != relation and not (metric == "symdiff" and relation == "hamming")):
            return self._located(
                spec,
                f"{what}'s input metric {meas.input_metric} does not measure the spec's "
                f"unit ({params['table']} : {relation})",
            )
        atom = om.element_type(meas)
        if atom not in om.ATOMS[col.type.kind]:
            return self._located(
                spec,
                f"{what}'s input domain {meas.input_domain} does not hold column "
                f"'{col.name}' ({col.type.kind}: a vector of {' or '.join(om.ATOMS[col.type.kind])})",
            )
        premetric = self._premetric(spec)
        if om.MEASURES.get(str(meas.output_measure)) != premetric:
            return self._located(
                spec,
                f"{what}'s privacy measure {meas.output_measure} is not the spec's premetric ({spec.premetric.kind})",
            )
        return None

    def run(self, spec, params, data, ctx):
        col = spec.domain.table(params["table"]).column(params["column"])
        cast = {"int": int, "float": float, "bool": bool}.get(col.type.kind, str)
        values = [cast(v) for v in data[params["table"]][params["column"]].tolist()]
        loaded = om.load(params["measurement"], spec.base_dir, values)
        meas, context = loaded.measurement, loaded.context
        relation = self._relation(spec, params)
        for what, checked in (("the Context", getattr(context, "accountant", None)), ("the measurement", meas)):
            if checked is not None and (problem := self._space_problem(spec, params, checked, what)) is not None:
                raise problem
        metric = om.METRICS[str(meas.input_metric)]
        d_in = 2 if metric == "symdiff" and relation == "hamming" else 1  # one change is a removal and an addition
        premetric = self._premetric(spec)
        facts = {}
        if context is not None:
            if not isinstance(context.d_in, (int, float)) or context.d_in < d_in:
                raise self._located(
                    spec,
                    f"the Context's privacy unit is d_in = {context.d_in}, less than the spec's "
                    f"unit ({params['table']} : {relation}) in {meas.input_metric}: d_in = {d_in}",
                )
            # the Context's whole privacy loss (every query released through it), not only this one's
            claim = om.claim(context.accountant, d_in, premetric, "the Context")
        else:
            claim = om.claim(meas, d_in, premetric)
        stated = {k: float(params[k]) for k in _STATED[premetric]}
        over = [k for k in stated if claim[k] > stated[k] * (1 + 1e-12) or math.isnan(claim[k])]
        if over:
            raise MechanismError(
                f"opendp: the library's privacy map gives {claim} at d_in = {d_in}, above the stated "
                f"{stated}: nothing is released"
            )
        try:
            out = loaded.query.release() if context is not None else meas(values)
        except Exception as exc:
            raise MechanismError(f"opendp: the measurement failed on the data: {exc}") from None
        if context is not None:
            facts["opendp_context"] = (
                f"a Context of {context.accountant.output_measure} for d_in = {context.d_in}; "
                f"spent {context.current_privacy_loss()}, remaining "
                f"{context.remaining_privacy_loss()}"
            )
        rows = out if isinstance(out, (list, tuple)) else [out]
        shown = ", ".join(f"{k} = {v:.6g}" for k, v in claim.items())
        return Release(
            outputs={"release": pd.DataFrame({"value": list(rows)})},
            facts={
                "opendp_claim": shown,
                "opendp_d_in": d_in,
                **facts,
                "opendp_seed": "OpenDP draws its own noise from the OS; dpspec's --seed does not reach it",
            },
        )
