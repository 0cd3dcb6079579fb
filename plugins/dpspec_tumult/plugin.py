"""The `tumult` mechanism: parameters, check, budget and run."""

from __future__ import annotations

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
    declared_keys,
    declared_values,
    located,
    LazyModule,
)

from . import change as ch, interpreter

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())

# The spec's premetric, the parameters that state its budget, and Tumult's budget type for it.
BUDGETS = {
    "pure": (("epsilon",), "PureDPBudget"),
    "zcdp": (("rho",), "RhoZCDPBudget"),
    "approximate": (("epsilon", "delta"), "ApproxDPBudget"),
}
KEY_KINDS = ("category", "enum", "int")
SEED_NOTE = (
    "Tumult Analytics draws its own noise and takes no seed: dpspec's --seed does not reach it, and the "
    "release is not reproducible by seed"
)


class TumultQuery(Mechanism):
    name = "tumult"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    version = "0.1.0"
    description = (
        "Tumult Analytics 0.21 queries returned by a Python entry point (module:function), evaluated in a "
        "Session on one table in a second Python interpreter; it runs the user's code, and only on compile."
    )
    proof = "Tumult Analytics' own accounting of the Session (the library's proofs: docs.tmlt.dev)"
    sampling = (
        "Tumult Core's samplers (its documentation says which are exact); not seedable, so the release is not "
        "reproducible by seed"
    )
    own_random_source = "Tumult Core's own generator, in the second Python interpreter"
    parameters = ParameterSchema(
        (
            ParamSpec(
                "table", "table", "the table the Session reads (its source id is the table's name)", required=True
            ),
            ParamSpec(
                "by",
                "columns",
                "the key columns: the queries get a KeySet of their declared values (none: an empty "
                "KeySet, a grand total)",
            ),
            ParamSpec(
                "queries",
                "string",
                "module:function returning a Tumult Query, a list of them or a dict name -> "
                "Query; called with (source id, KeySet) in the Tumult interpreter, only by compile",
                required=True,
            ),
            ParamSpec(
                "protected_change",
                "string",
                "the Session's protected change in Tumult's words (AddOneRow(), "
                "AddMaxRows(k), AddRowsWithID(column)); it must cover the spec's unit (default: the one that says "
                "the unit exactly)",
            ),
            ParamSpec(
                "epsilon",
                "number",
                "the Session's epsilon (premetric pure, or approximate with delta)",
                low=Fraction(0),
            ),
            ParamSpec(
                "delta", "number", "the Session's delta (premetric approximate)", low=Fraction(0), high=Fraction(1)
            ),
            ParamSpec("rho", "number", "the Session's zCDP rho (premetric zcdp)", low=Fraction(0)),
        )
    )
    outputs = {
        "release": "one row per declared cell and query: the key columns, 'query' (the entry point's name for "
        "it) and 'value' (Tumult's noisy answer)"
    }

    # ---- what the spec states ----
    def _premetric(self, spec) -> str | None:
        return spec.premetric.kind if spec.premetric is not None else None

    def _change(self, spec, params) -> tuple[ch.Change | None, list[Diagnostic]]:
        """The Session's protected change, or the located reasons it does not protect the spec's unit."""
        need = ch.needed(spec, params["table"])
        stated = params.get("protected_change")
        if isinstance(need, str):
            return None, [Diagnostic(f"tumult: {need}", path=("protected_change" if stated else "table",))]
        if stated is None:
            return ch.default(need), []
        change = ch.parse(stated)
        if change is None:
            return None, [
                Diagnostic(
                    f"tumult: protected_change {stated!r} is not AddOneRow(), AddMaxRows(k) or AddRowsWithID(column)",
                    path=("protected_change",),
                )
            ]
        if change.column is not None and spec.domain.table(params["table"]).column(change.column) is None:
            return None, [
                Diagnostic(
                    f"tumult: protected_change {change}: table '{params['table']}' has no column '{change.column}'",
                    path=("protected_change",),
                )
            ]
        if not ch.covers(change, need):
            return None, [
                Diagnostic(
                    f"tumult: protected_change {change} does not protect the spec's unit: {need.why}, "
                    f"which needs {ch.default(need)}",
                    path=("protected_change",),
                )
            ]
        return change, []

    def check(self, spec, params):
        """Only what the spec states: the entry point is not imported here (it is the user's code)."""
        problems = []
        table = spec.domain.table(params["table"])
        for c in params.get("by") or ():
            col = table.column(c)
            if col is None:
                problems.append(Diagnostic(f"tumult: table '{table.name}' has no column '{c}'", path=("by",)))
            elif col.type.kind not in KEY_KINDS or declared_values(spec, table.name, c) is None:
                problems.append(
                    Diagnostic(
                        f"tumult: column '{c}' keys the release, but its values are not declared "
                        "(a KeySet is built from declared values only, never from the data)",
                        path=("by",),
                    )
                )
        module, sep, func = params["queries"].partition(":")
        if not sep or not module or not func.isidentifier():
            problems.append(
                Diagnostic(f"tumult: queries {params['queries']!r} is not 'module:function'", path=("queries",))
            )
        premetric = self._premetric(spec)
        given = tuple(k for k in ("epsilon", "delta", "rho") if params.get(k) is not None)
        if premetric not in BUDGETS:
            problems.append(
                Diagnostic(
                    f"tumult: premetric {premetric}: a Tumult Session's budget is pure, approximate or zcdp",
                    *(spec.premetric.loc.line, spec.premetric.loc.column)
                    if spec.premetric is not None and spec.premetric.loc
                    else (None, None),
                )
            )
        else:
            want, tumult_type = BUDGETS[premetric]
            if given != want:
                wrong = next((k for k in given if k not in want), None)
                other = next((t for p, (w, t) in BUDGETS.items() if w == given), None)
                said = f"{', '.join(given)} states a {other}" if other else f"got {', '.join(given) or 'none'}"
                problems.append(
                    Diagnostic(
                        f"tumult: premetric {premetric} takes {'an' if tumult_type[0] == 'A' else 'a'} {tumult_type} ({' and '.join(want)}); "
                        f"{said}",
                        path=(wrong or (given[0] if given else "table"),),
                    )
                )
        problems.extend(self._change(spec, params)[1])
        return problems

    def flavor(self, spec, params):
        unit = spec.unit
        relation = unit.relation if unit is not None else "symdiff"
        premetric = self._premetric(spec)
        return NativeFlavor(
            unit.table if unit is not None else params["table"],
            relation,
            "approx" if premetric == "approximate" else premetric,
        )

    def output_keys(self, spec, params):
        return {"release": OutputKeys(params["table"], tuple(params.get("by") or ()))}

    def _stated(self, spec, params) -> dict:
        return {k: Fraction(params[k]) for k in BUDGETS[self._premetric(spec)][0]}

    # ---- the budget ----
    def budget(self, spec, params, facts):
        premetric = self._premetric(spec)
        values = {**self._stated(spec, params), "premetric": "approx" if premetric == "approximate" else premetric}
        change, _ = self._change(spec, params)
        return BudgetStatement.fixed(
            values,
            f"the stated budget: the Session is built with a {BUDGETS[premetric][1]} "
            f"of it and the protected change {change}, and Tumult's accountant refuses "
            "queries beyond it (the report prints the Session's own accounting)",
        )

    # ---- the run ----
    def run(self, spec, params, data, ctx):
        change, problems = self._change(spec, params)
        if problems:
            raise SpecError(located(spec, problems), spec.path, spec.text)
        python = interpreter.find(spec.base_dir)
        table = spec.domain.table(params["table"])
        by = list(params.get("by") or ())
        kinds = {c.name: c.type.kind for c in table.columns}
        frame = data[params["table"]]
        # Spark's types for the spec's: ints as longs, categories as strings; a nullable column keeps its nulls
        frame = pd.DataFrame(
            {
                c: frame[c].astype("Int64")
                if kinds.get(c) == "int"
                else frame[c].astype("string")
                if kinds.get(c) in ("category", "enum")
                else frame[c]
                for c in frame.columns
            }
        )
        keys = declared_keys(spec, table.name, by) if by else pd.DataFrame()
        premetric = self._premetric(spec)
        request = {
            "source_id": table.name,
            "columns": kinds,
            "module_dir": spec.base_dir,
            "entry": params["queries"],
            "budget": {
                "kind": "approx" if premetric == "approximate" else premetric,
                **{k: str(v) for k, v in self._stated(spec, params).items()},
            },
            "protected_change": change.request(),
            "keys": {"columns": by, "rows": [list(r) for r in keys.itertuples(index=False, name=None)]},
        }
        answer = interpreter.run(python, request, frame)
        parts = []
        for name, got in answer["answers"].items():
            out = pd.DataFrame(got["rows"], columns=got["columns"])
            missing = [c for c in by if c not in out.columns]
            values = [c for c in out.columns if c not in by]
            if missing or not values:
                raise MechanismError(
                    f"tumult: query {name!r} answered with columns {list(out.columns)}, not grouped by "
                    f"the declared keys {by} (group by the KeySet the entry point is given)"
                )
            for v in values:
                part = out[by].copy()
                part["query"] = name if len(values) == 1 else f"{name}.{v}"
                part["value"] = out[v]
                parts.append(part)
        release = pd.concat(parts, ignore_index=True)
        if release["value"].isna().any():
            raise MechanismError("tumult: an answer holds no value (NaN): nothing is released")
        spent = answer["spent"]
        return Release(
            outputs={"release": release},
            facts={
                "tumult_session_budget": answer["session_budget"],
                "tumult_spent": spent,
                "tumult_spent_text": "; ".join(f"{k}: {v}" for k, v in spent.items()),
                "tumult_remaining": answer["remaining"],
                "tumult_protected_change": str(change),
                "tumult_unit": ch.needed(spec, table.name).why,
                "tumult_versions": answer["versions"],
                "tumult_seed": SEED_NOTE,
            },
        )
