"""The `opendp` mechanism: parameters, check, budget and run."""
from __future__ import annotations

import math
from fractions import Fraction

from dpspec.api import (BudgetStatement, Diagnostic, Mechanism, MechanismError, NativeFlavor, OutputKeys, ParamSpec,
                        ParameterSchema, Release, SpecError)

from . import measurement as om

_STATED = {"pure": ("epsilon",), "zcdp": ("rho",), "approx": ("epsilon", "delta")}


class OpenDPMeasurement(Mechanism):
    name = "opendp"
    version = "0.1.0"
    description = ("An OpenDP measurement returned by a Python entry point (module:function), run on one column; "
                   "it runs the user's code, and only on compile.")
    proof = "OpenDP's privacy map for the measurement (the library's own proofs: docs.opendp.org)"
    sampling = "OpenDP's own samplers (the library's documentation says which are exact)"
    parameters = ParameterSchema((
        ParamSpec("table", "table", "the table whose units the measurement protects", required=True),
        ParamSpec("column", "column", "the column handed to the measurement as a vector", required=True),
        ParamSpec("measurement", "string", "module:function returning an OpenDP Measurement (the module is looked "
                  "up beside the spec first); called only by compile", required=True),
        ParamSpec("epsilon", "number", "the stated epsilon (pure, or approximate with delta)", low=Fraction(0)),
        ParamSpec("delta", "number", "the stated delta", low=Fraction(0), high=Fraction(1)),
        ParamSpec("rho", "number", "the stated zCDP rho", low=Fraction(0)),
    ))
    outputs = {"release": "the measurement's output: one row per value it returns (column 'value')"}

    def _premetric(self, spec) -> str | None:
        return spec.premetric.kind if spec.premetric is not None else None

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
            problems.append(Diagnostic(f"column '{col.name}' is {col.type.kind}: OpenDP's vector domains hold "
                                       "ints, floats, strings or booleans"))
        module, sep, func = params["measurement"].partition(":")
        if not sep or not module or not func.isidentifier():
            problems.append(Diagnostic(f"measurement {params['measurement']!r} is not 'module:function'"))
        premetric = self._premetric(spec)
        want = _STATED.get(premetric)
        if want is None:
            problems.append(Diagnostic(f"premetric {premetric}: the opendp mechanism states pure, approx or zcdp budgets"))
        else:
            given = tuple(k for k in ("epsilon", "delta", "rho") if params.get(k) is not None)
            if given != want:
                problems.append(Diagnostic(f"state the budget the measurement must meet in the premetric {premetric}: "
                                           f"{' and '.join(want)} (got {', '.join(given) or 'none'})"))
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
        notes = ["the stated budget; compile checks OpenDP's privacy map of the measurement against it and refuses "
                 "to release when the library claims more"]
        if facts.get("opendp_claim"):
            notes.append(f"OpenDP's privacy map at d_in = {facts['opendp_d_in']}: {facts['opendp_claim']}")
        return BudgetStatement.fixed(values, "; ".join(notes))

    def opendp_script(self, spec, params):
        """The user's own entry point, imported from beside the spec; d_in as the compile sets it."""
        import os

        module, _, func = params["measurement"].partition(":")
        relation = self._relation(spec, params)
        return ("import sys\n"
                f"sys.path.insert(0, {os.path.abspath(spec.base_dir)!r})  # the spec's folder: its pipeline module\n"
                f"from {module} import {func}\n"
                f"measurement = {func}()\n"
                "_metric = str(measurement.input_metric)\n"
                f"d_in = 2 if {relation!r} == 'hamming' and _metric in ('SymmetricDistance()', 'InsertDeleteDistance()') "
                "else 1")

    def _located(self, spec, message):
        param = spec.mechanism.params.get("measurement")
        loc = param.loc if param is not None and param.loc else spec.mechanism.loc
        return SpecError([Diagnostic(message, *((loc.line, loc.column) if loc else (None, None)))], spec.path, spec.text)

    def run(self, spec, params, data, rng):
        import pandas as pd

        meas = om.load(params["measurement"], spec.base_dir)
        col = spec.domain.table(params["table"]).column(params["column"])
        relation = self._relation(spec, params)
        metric = om.METRICS.get(str(meas.input_metric))
        if metric is None or (metric != relation and not (metric == "symdiff" and relation == "hamming")):
            raise self._located(spec, f"the measurement's input metric {meas.input_metric} does not measure the spec's "
                                      f"unit ({params['table']} : {relation})")
        atom = om.element_type(meas)
        if atom not in om.ATOMS[col.type.kind]:
            raise self._located(spec, f"the measurement's input domain {meas.input_domain} does not hold column "
                                      f"'{col.name}' ({col.type.kind}: a vector of {' or '.join(om.ATOMS[col.type.kind])})")
        d_in = 2 if metric == "symdiff" and relation == "hamming" else 1  # one change is a removal and an addition
        premetric = self._premetric(spec)
        if om.MEASURES.get(str(meas.output_measure)) != premetric:
            raise self._located(spec, f"the measurement's privacy measure {meas.output_measure} is not the spec's "
                                      f"premetric ({premetric})")
        claim = om.claim(meas, d_in, premetric)
        stated = {k: float(params[k]) for k in _STATED[premetric]}
        over = [k for k in stated if claim[k] > stated[k] * (1 + 1e-12) or math.isnan(claim[k])]
        if over:
            raise MechanismError(f"opendp: the library's privacy map gives {claim} at d_in = {d_in}, above the stated "
                                 f"{stated}: nothing is released")
        values = data[params["table"]][params["column"]]
        cast = {"int": int, "float": float, "bool": bool}.get(col.type.kind, str)
        try:
            out = meas([cast(v) for v in values.tolist()])
        except Exception as exc:
            raise MechanismError(f"opendp: the measurement failed on the data: {exc}") from None
        rows = out if isinstance(out, (list, tuple)) else [out]
        shown = ", ".join(f"{k} = {v:.6g}" for k, v in claim.items())
        return Release(outputs={"release": pd.DataFrame({"value": list(rows)})},
                       facts={"opendp_claim": shown, "opendp_d_in": d_in,
                              "opendp_seed": "OpenDP draws its own noise from the OS; dpspec's --seed does not reach it"})
