"""The Tumult Analytics side of the `tumult` mechanism: a standalone script run by the Tumult interpreter.

Tumult Analytics 0.21 needs pandas < 2 and pyspark < 3.6, which cannot share an environment with
dpspec, so dpspec runs this file with a second Python (`python runner.py REQUEST.json`). It imports
only Tumult, Spark, pandas and the standard library, never dpspec. The request names the table
dpspec wrote (a temporary Parquet file), the user's `module:function`, the privacy budget and the
protected change dpspec derived from the spec, and the declared keys; the answer (a JSON file) holds
each query's released rows and the Session's own accounting, or an error saying whose it is.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
import sys
import traceback
from fractions import Fraction
from importlib.metadata import version

try:  # an interpreter without Tumult still answers, as an install problem (main), not a traceback
    from pyspark.sql import SparkSession
    from tmlt.analytics import AddMaxRows, AddOneRow, AddRowsWithID, ApproxDPBudget, KeySet, PureDPBudget, Query
    from tmlt.analytics import RhoZCDPBudget, Session
    from tmlt.core.utils.exact_number import ExactNumber
except ImportError as exc:
    _MISSING = exc
else:
    _MISSING = None


class UserError(Exception):
    """The user's entry point failed or returned something that is not a Tumult query."""


def budget(request: dict, share: Fraction = Fraction(1)):
    """The Tumult privacy budget of the spec's premetric, times `share` (exact fractions)."""
    b = request["budget"]
    value = {k: ExactNumber(Fraction(v) * share) for k, v in b.items() if k != "kind"}
    if b["kind"] == "pure":
        return PureDPBudget(value["epsilon"])
    if b["kind"] == "zcdp":
        return RhoZCDPBudget(value["rho"])
    return ApproxDPBudget(value["epsilon"], value["delta"])


def protected_change(request: dict):
    """Tumult's protected change for the spec's unit, as dpspec derived it."""
    pc = request["protected_change"]
    if pc["kind"] == "add_one_row":
        return AddOneRow()
    if pc["kind"] == "add_max_rows":
        return AddMaxRows(int(pc["k"]))
    return AddRowsWithID(pc["column"])


def user_queries(request: dict, keys) -> dict:
    """Call the user's `module:function` (the module found in the spec's folder first) with the
    source id and the declared KeySet; it returns a Query, a list of them or a dict name -> Query."""
    module_name, _, func_name = request["entry"].partition(":")
    path = os.path.join(request["module_dir"], *module_name.split(".")) + ".py"
    sys.path.insert(0, request["module_dir"])
    try:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except Exception as exc:
        raise UserError(
            f"cannot import {module_name!r} (from {request['module_dir']} or the Tumult interpreter's "
            f"packages): {type(exc).__name__}: {exc}"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UserError(f"{module_name!r} has no function {func_name!r}")
    try:
        params = inspect.signature(func).parameters
        got = func(request["source_id"], keys) if len(params) >= 2 else func(keys) if len(params) == 1 else func()
    except Exception as exc:
        raise UserError(f"the entry point {request['entry']} raised {type(exc).__name__}: {exc}") from None
    if isinstance(got, Query):
        got = {"query": got}
    elif isinstance(got, (list, tuple)):
        got = {f"query{i + 1}": q for i, q in enumerate(got)}
    if not isinstance(got, dict) or not got or not all(isinstance(q, Query) for q in got.values()):
        what = (
            type(got).__name__
            if not isinstance(got, dict)
            else ", ".join(
                sorted({type(q).__name__ for q in got.values() if not isinstance(q, Query)}) or ["an empty dict"]
            )
        )
        raise UserError(
            f"the entry point {request['entry']} returned {what}, not a Tumult Analytics Query (a "
            "QueryBuilder's finished query), a list of them or a dict name -> Query"
        )
    return {str(k): q for k, q in got.items()}


def _plain(value):
    """A JSON value: Spark and numpy scalars as Python ones."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def run(request: dict) -> dict:
    if _MISSING is not None:
        raise _MISSING
    key_cols = request["keys"]["columns"]
    ints = [i for i, c in enumerate(key_cols) if request["columns"][c] == "int"]
    rows = [tuple(int(v) if i in ints else v for i, v in enumerate(row)) for row in request["keys"]["rows"]]
    keys = KeySet.from_tuples(rows, columns=key_cols) if key_cols else KeySet.from_dict({})
    queries = user_queries(request, keys)  # before Spark starts: a broken entry point fails in seconds

    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers unpickle Tumult's functions: this venv
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dpspec-tumult")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", os.path.join(os.path.dirname(request["data"]), "warehouse"))
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        frame = spark.read.parquet(request["data"])
        total = budget(request)
        session = Session.from_dataframe(
            privacy_budget=total,
            source_id=request["source_id"],
            dataframe=frame,
            protected_change=protected_change(request),
        )
        share = Fraction(1, len(queries))
        answers, spent = {}, {}
        for name, query in queries.items():
            try:
                result = session.evaluate(query, budget(request, share))
            except Exception as exc:  # Tumult refusing the user's query (wrong column, budget type, ...)
                raise UserError(f"Tumult Analytics refused query {name!r}: {type(exc).__name__}: {exc}") from None
            out = result.toPandas()
            answers[name] = {
                "columns": list(out.columns),
                "rows": [[_plain(v) for v in row] for row in out.itertuples(index=False, name=None)],
            }
            spent[name] = str(budget(request, share))
        return {
            "ok": True,
            "answers": answers,
            "session_budget": str(total),
            "spent": spent,
            "remaining": str(session.remaining_privacy_budget),
            "protected_change": repr(protected_change(request)),
            "versions": _versions(),
        }
    finally:
        spark.stop()


def _versions() -> dict:
    return {p: version(p) for p in ("tmlt.analytics", "tmlt.core", "pyspark", "pandas")}


def main(argv: list[str]) -> int:
    request_path, answer_path = argv[1], argv[2]
    with open(request_path) as f:
        request = json.load(f)
    try:
        answer = run(request)
    except UserError as exc:
        answer = {"ok": False, "kind": "user", "message": str(exc)}
    except ImportError as exc:
        answer = {"ok": False, "kind": "install", "message": f"{exc} (is Tumult Analytics 0.21 installed here?)"}
    except Exception as exc:
        answer = {
            "ok": False,
            "kind": "internal",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    with open(answer_path + ".part", "w") as f:
        json.dump(answer, f)
    os.replace(answer_path + ".part", answer_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
