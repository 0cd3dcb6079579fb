"""The `tumult` mechanism: Tumult Analytics queries named by a Python entry point, evaluated in a
Session in a second Python. The Session's budget comes from the premetric, its protected change
from the unit, its KeySet from the declared keys; the user's code runs on compile only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
REGIONS = {"north", "south", "east", "west", "islands"}


def _installed() -> bool:
    from dpspec.contract import plugins

    return "tumult" in plugins.mechanisms()


pytestmark = pytest.mark.skipif(
    not _installed(), reason="the dpspec_tumult entry point is not installed in this environment (pip install -e .)"
)

QUERIES = """
MARK = {mark!r}
if MARK:
    open(MARK, "w").write("imported")


def make(source, keys):
    from tmlt.analytics import QueryBuilder

    return {{"headcount": QueryBuilder(source).groupby(keys).count()}}


def broken(source, keys):
    raise ValueError("no such column in my session")


def not_a_query(source, keys):
    return 42


def ungrouped(source, keys):
    from tmlt.analytics import QueryBuilder

    return QueryBuilder(source).count()
"""


def example(
    tmp_path,
    *,
    unit="symdiff",
    premetric="pure",
    budget="epsilon: 1",
    entry="q:make",
    mark="",
    change='protected_change: "AddOneRow()"',
):
    home = tmp_path / "in"  # outputs go to tmp_path/..., never among the inputs
    if home.exists():
        shutil.rmtree(home)
    shutil.copytree(ROOT / "specs" / "data" / "staff", home / "data")
    (home / "q.py").write_text(QUERIES.format(mark=mark))
    text = (ROOT / "specs" / "tumult_counts.dps").read_text()
    text = (
        text.replace("data/staff/", "data/")
        .replace("unit staff : symdiff", f"unit staff : {unit}")
        .replace("premetric pure", f"premetric {premetric}")
        .replace("epsilon: 1", budget)
        .replace('"tumult_staff_queries:make_queries"', f'"{entry}"')
        .replace('protected_change: "AddOneRow()"', change)
        .replace("budget epsilon <= 1\n", "")
    )
    spec = home / "s.dps"
    spec.write_text(text)
    return spec


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _line(spec: Path, needle: str) -> int:
    return next(n for n, t in enumerate(spec.read_text().splitlines(), 1) if needle in t)


def _tumult_python() -> str | None:
    from dpspec.api import MechanismError
    from dpspec_tumult import interpreter

    try:
        return interpreter.find(str(ROOT / "specs"))
    except MechanismError:
        return None


needs_tumult = pytest.mark.skipif(
    _tumult_python() is None, reason="no Tumult interpreter (.ci/run creates .venv-tumult; or set DPSPEC_TUMULT_PYTHON)"
)


@pytest.fixture(scope="session")
def tumult_release(tmp_path_factory):
    """The bundled example compiled once (one Spark JVM in the Tumult interpreter), for several asserts."""
    if _tumult_python() is None:
        pytest.skip("no Tumult interpreter (.ci/run creates .venv-tumult; or set DPSPEC_TUMULT_PYTHON)")
    out = tmp_path_factory.mktemp("tumult") / "out"
    result = run("compile", ROOT / "specs" / "tumult_counts.dps", "-o", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow  # Tumult Analytics and its Spark in the second interpreter
def test_the_bundled_example_releases_every_declared_region_for_each_query(tumult_release):
    import pandas as pd

    release = pd.read_csv(tumult_release / "release.csv")
    assert list(release.columns) == ["region", "query", "value"]
    for query in ("headcount", "total_pay"):
        assert set(release[release["query"] == query]["region"]) == REGIONS  # the islands too: declared, empty
    assert len(release) == 2 * len(REGIONS)
    counts = release[release["query"] == "headcount"].set_index("region")["value"]
    assert abs(counts["north"] - 786) < 60  # the true count; Laplace scale 2 at epsilon 0.5 (P(miss) < 1e-12)


@pytest.mark.slow  # Tumult Analytics and its Spark in the second interpreter
def test_the_sessions_own_accounting_is_reported_beside_dpspecs(tumult_release):
    report = json.loads((tumult_release / "report.json").read_text())
    section = next(s for s in report["sections"] if s["title"] == "Tumult Analytics session")
    assert section["data"]["session_budget"] == "PureDPBudget(epsilon=1)"
    assert section["data"]["spent"] == {
        "headcount": "PureDPBudget(epsilon=0.5)",
        "total_pay": "PureDPBudget(epsilon=0.5)",
    }
    assert section["data"]["remaining"] == "PureDPBudget(epsilon=0)"
    assert section["data"]["protected_change"] == "AddOneRow()"
    assert section["data"]["reproducible_by_seed"] is False
    md = (tumult_release / "report.md").read_text()
    assert "not reproducible by seed" in md and "epsilon = 1" in md


def test_check_budget_and_audit_never_run_the_users_code(tmp_path):
    mark = tmp_path / "imported.txt"  # outside the spec folder
    spec = example(tmp_path, mark=str(mark))
    for command in ("check", "budget", "audit"):
        assert run(command, spec).exit_code == 0, command
    assert not mark.exists()


@pytest.mark.parametrize(
    "changes,both,at",
    [
        ({"unit": "hamming"}, ("AddOneRow()", "staff : hamming", "AddMaxRows(2)"), "protected_change:"),
        (
            {"change": 'protected_change: "AddRowsWithID(region)"'},
            ("AddRowsWithID(region)", "staff : symdiff"),
            "protected_change:",
        ),
        ({"premetric": "zcdp"}, ("premetric zcdp", "RhoZCDPBudget", "PureDPBudget"), "epsilon:"),
        ({"budget": "rho: 1"}, ("premetric pure", "PureDPBudget", "RhoZCDPBudget"), "rho:"),
        (
            {"premetric": "approximate delta 1e-9"},
            ("premetric approximate", "an ApproxDPBudget", "PureDPBudget"),
            "epsilon:",
        ),
    ],
)
def test_a_mismatch_is_a_located_spec_error_naming_both_sides(tmp_path, changes, both, at):
    spec = example(tmp_path, **changes)
    for command in (("check", spec), ("compile", spec, "-o", tmp_path / "o")):
        result = run(*command)
        assert result.exit_code == 1, result.output
        assert f"s.dps:{_line(spec, at)}:" in result.output
        for needle in both:
            assert needle in result.output
    assert not (tmp_path / "o").exists()


def test_an_approximate_premetric_is_an_approxdpbudget_of_epsilon_and_delta(tmp_path):
    result = run("budget", example(tmp_path, premetric="approximate delta 1e-9", budget="epsilon: 1\n  delta: 1e-9"))
    assert result.exit_code == 0, result.output
    assert "ApproxDPBudget" in result.output and "delta = 1e-09" in result.output


def test_a_wider_protected_change_covers_the_unit_and_the_default_says_it_exactly(tmp_path):
    assert run("check", example(tmp_path, unit="hamming", change='protected_change: "AddMaxRows(3)"')).exit_code == 0
    result = run("budget", example(tmp_path, unit="hamming", change=""))
    assert result.exit_code == 0 and "AddMaxRows(2)" in result.output


def test_a_missing_interpreter_is_a_clear_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DPSPEC_TUMULT_PYTHON", str(tmp_path / "no-python"))
    result = run("compile", example(tmp_path), "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    assert "DPSPEC_TUMULT_PYTHON" in result.output and "pip install 'tmlt.analytics==0.21.*'" in result.output
    assert "internal error" not in result.output and not (tmp_path / "o").exists()


def test_without_the_variable_a_venv_beside_the_spec_or_above_is_found(tmp_path, monkeypatch):
    from dpspec.api import MechanismError
    from dpspec_tumult import interpreter

    monkeypatch.delenv("DPSPEC_TUMULT_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    with pytest.raises(MechanismError, match="python3.11 -m venv .venv-tumult"):
        interpreter.find(str(deep))
    python = tmp_path / "a" / ".venv-tumult" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert interpreter.find(str(deep)) == str(python)


@needs_tumult
@pytest.mark.slow
@pytest.mark.parametrize(
    "entry,needle",
    [
        ("q:broken", "raised ValueError: no such column in my session"),
        ("q:not_a_query", "returned int, not a Tumult Analytics Query"),
        ("q:missing", "has no function 'missing'"),
        ("q:ungrouped", "not grouped by the declared keys ['region']"),
    ],
)
def test_an_entry_point_that_fails_is_a_user_error_not_an_internal_one(tmp_path, monkeypatch, entry, needle):
    monkeypatch.setenv("DPSPEC_TUMULT_PYTHON", _tumult_python())  # the copy in tmp_path has no .venv-tumult above it
    result = run("compile", example(tmp_path, entry=entry), "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    assert needle in result.output and "internal error" not in result.output
    assert not (tmp_path / "o").exists()


HOUSEHOLDS = """spec "persons in households"

domain d "made up" {
  stage edited
  table households unit household {
    hh_id : int 1..100
    tenure : {owned, rented}
  }
  table persons unit person in households by hh_id BOUND {
    hh_id : int 1..100
    sex : {f, m}
  }
}

unit households : RELATION
premetric pure

mechanism tumult {
  table: persons
  by: sex
  queries: "q:make"
  CHANGE
  epsilon: 1
}
"""


@pytest.mark.parametrize(
    "relation,bound,change,code,needle",
    [
        ("symdiff", "at most 3", "", 0, "protected change AddRowsWithID(hh_id)"),
        ("symdiff", "at most 3", 'protected_change: "AddMaxRows(3)"', 0, "protected change AddMaxRows(3)"),
        ("symdiff", "at most 3", 'protected_change: "AddOneRow()"', 1, "which needs AddRowsWithID(hh_id)"),
        ("hamming", "at most 3", "", 0, "protected change AddMaxRows(6)"),
        ("hamming", "", "", 1, "declare 'at most K' on the link"),
    ],
)
def test_a_unit_of_the_parent_table_is_every_row_of_one_id(tmp_path, relation, bound, change, code, needle):
    spec = tmp_path / "hh.dps"
    spec.write_text(HOUSEHOLDS.replace("RELATION", relation).replace("BOUND", bound).replace("CHANGE", change))
    result = run("budget", spec)
    assert result.exit_code == code, result.output
    assert needle in result.output


def test_the_runner_imports_tumult_spark_pandas_and_the_standard_library_only():
    """It runs in the second interpreter, where dpspec is not installed."""
    import ast
    import sys

    tree = ast.parse((ROOT / "plugins" / "dpspec_tumult" / "runner.py").read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert {"tmlt", "pyspark"} <= imported
    assert imported - {"tmlt", "pyspark", "pandas", "__future__"} <= set(sys.stdlib_module_names), imported
