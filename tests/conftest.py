"""Shared fixtures: a small valid spec and its data, written into a temporary directory."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

SMALL_SPEC = textwrap.dedent("""\
    spec "small"
    domain survey "a small survey" {
      stage edited
      geography geo { region > district }
      table people unit person {
        region   : category
        district : category in region
        age      : int 0..120
        smoker   : bool
        status   : {single, married, "N"}
      }
    }
    data people from "people.csv"
    invariants {
      count people
    }
    unit people : hamming
    premetric pure
    mechanism randomized_response { table: people  column: smoker  p: 3/4 }
    budget epsilon <= 1.1
    release {
      output responses
      output estimate
    }
    """)

SMALL_CSV = textwrap.dedent("""\
    region,district,age,smoker,status
    north,n1,34,true,single
    north,n1,51,false,married
    north,n2,17,false,N
    south,s1,70,true,married
    south,s1,45,false,single
    """)


@pytest.fixture
def small_spec(tmp_path):
    """Path to a valid spec whose data sits beside it, in tmp_path/in: outputs go beside that
    folder (tmp_path/out), since a compile refuses to write inside a folder holding an input."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "people.csv").write_text(SMALL_CSV)
    path = folder / "small.dps"
    path.write_text(SMALL_SPEC)
    return path


# ---- execution engines (issue 11) ----------------------------------------------------------
import sys  # noqa: E402

ENGINE_PLUGIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_plugin")
if ENGINE_PLUGIN not in sys.path:  # before any Spark session starts: its workers inherit sys.path
    sys.path.insert(0, ENGINE_PLUGIN)


@pytest.fixture(scope="session")
def spark_session():
    """One small Spark session (local[2], no UI, 2 shuffle partitions) for the whole test run."""
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    from dpspec.engine.spark import SparkEngine, find_java

    if find_java() is None:
        pytest.skip("no Java runtime for Spark: apt-get install openjdk-17-jre-headless")
    # A short-lived JVM: the client JIT and serial GC start faster; adaptive planning only adds
    # stages to jobs this small.
    fast = {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.sql.adaptive.enabled": "false",
    }
    engine = SparkEngine("local[2]", conf=fast)
    session = engine.session
    yield session
    engine.close()


@pytest.fixture
def counts_only_spark(spark_session, monkeypatch):
    """(a Spark engine that refuses to hand the driver a table or the outputs of row-level units
    (they may run, on the executors, if their outputs stay there), the number of rows of every
    frame Spark hands the driver): for tests that only aggregates reach the driver of a compile
    from engine-held tables."""
    from dpspec.engine.spark import SparkEngine

    class NoRows(SparkEngine):
        def to_pandas(self, table):
            raise AssertionError("the driver asked for the whole table")

        def map_groups(self, table, by, func, **kw):
            if kw.get("collect", True):
                raise AssertionError("the driver asked for the outputs of row-level units of work")
            return super().map_groups(table, by, func, **kw)

    DataFrame = type(spark_session.range(1))  # the session's own DataFrame class (classic or connect)
    collected = []
    to_pandas = DataFrame.toPandas

    def counting(self):
        out = to_pandas(self)
        collected.append(len(out))
        return out

    monkeypatch.setattr(DataFrame, "toPandas", counting)
    return NoRows(session=spark_session, partitions=3), collected


@pytest.fixture
def stratified_plugin():
    """The test mechanism `stratified_histogram` (tests/engine_plugin), registered for one test."""
    import dpspec_stratified

    from dpspec.contract import plugins

    pm = plugins.manager()
    pm.register(dpspec_stratified, name="test_stratified_histogram")
    plugins.mechanisms.cache_clear()
    yield dpspec_stratified
    pm.unregister(name="test_stratified_histogram")
    plugins.mechanisms.cache_clear()


STRATIFIED_SPEC = textwrap.dedent("""\
    spec "stratified"
    domain survey "synthetic strata" {
      stage edited
      table people unit person {
        region : {r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, r16, r17, r18, r19, r20, r21, r22, r23, r24}
        age    : int 0..120
        smoker : bool
      }
    }
    data people from "people.csv"
    unit people : symdiff
    premetric pure
    mechanism stratified_histogram { table: people  by: region  column: smoker  scale: 2 }
    budget epsilon <= 1
    release {
      output histogram
    }
    """)


def write_stratified_case(directory, rows: int = 3000, seed: int = 7):
    """The spec above and a seeded synthetic table of `rows` persons in 25 regions, in
    `directory`/in (outputs go beside that folder, never inside a folder holding an input)."""
    import numpy as np
    import pandas as pd

    gen = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "region": np.char.add("r", gen.integers(0, 25, rows).astype(str)),
            "age": gen.integers(0, 121, rows),
            "smoker": gen.random(rows) < 0.3,
        }
    )
    directory = os.path.join(directory, "in")
    os.makedirs(directory, exist_ok=True)
    frame.to_csv(os.path.join(directory, "people.csv"), index=False)
    path = os.path.join(directory, "stratified.dps")
    with open(path, "w") as fh:
        fh.write(STRATIFIED_SPEC)
    return path


def beside(folder, name: str = "out"):
    """A path next to `folder`, not inside it: a compile refuses to write inside a folder that
    holds one of its inputs, and tests keep their inputs in tmp_path."""
    return folder.parent / f"{folder.name}-{name}"


def edited_spec(text: str, name: str, replace: dict | None = None, parse=None):
    """The spec `text` parsed (by `parse`, default the language's) after each `old -> new` edit,
    every `old` required to be present (an edit that silently misses would test the unedited spec)."""
    if parse is None:
        from dpspec.language.parser import parse

    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, name)


# ---- the fast tier (`pytest -m "not slow"`) and the parallel run --------------------------
# A test is in the slow tier when it carries `@pytest.mark.slow` (or its module a `pytestmark`),
# each with its reason: what it starts (a cluster, a wheel built and installed, a browser, an
# editor, a kernel, pre-commit) or the seconds it computes. One kind is marked here, by what it
# uses, so a new test of the kind joins without a decorator: a test on a Spark session (a test
# parametrised over engines is slow on its "spark" side). CI runs both tiers.
SPARK_FIXTURES = {"spark_session", "counts_only_spark", "cluster"}


def _on_spark(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool(SPARK_FIXTURES & set(getattr(item, "fixturenames", ()))) or "spark" in params.values()


def pytest_collection_modifyitems(config, items):
    # The cluster tests connect to a standalone master, which Spark allows only before any other
    # session starts in this process (the session-scoped local one): they run first.
    items.sort(key=lambda item: 0 if "test_cluster.py" in item.nodeid else 1)
    for item in items:
        if _on_spark(item):
            item.add_marker(pytest.mark.slow)


# ---- the bytecode cache ---------------------------------------------------------------------
# A machine that sets PYTHONDONTWRITEBYTECODE (to keep checkouts free of .pyc files) makes every
# test process rewrite and compile the 200 test modules again (9 of the 13 s a worker spends
# collecting) and every `dpspec` process a test starts compile what it imports (0.5 s instead of
# 0.3 s for a `check`). The compiled files go instead to a folder of the user's own, outside the
# checkout (Python's pycache prefix, which the processes the tests start inherit), so the
# checkout stays free of them and they are compiled once. A prefix already chosen is kept.
if sys.dont_write_bytecode and not sys.pycache_prefix:
    _cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    sys.pycache_prefix = os.path.join(_cache, "dpspec-tests", "pycache")
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# ---- the parallel run (pytest-xdist) --------------------------------------------------------
# The scheduler is ours (xdist's `--dist loadgroup` cannot name a group with pytest 9: xdist 3.8
# renames a node by an attribute pytest 9 no longer reads). Its units of work:
# - the tests that start Spark in their process, two units, each with a JVM of its own: the
#   cluster's tests (tests/test_cluster.py), which must connect to their standalone master before
#   any other Spark session starts in their process, and the tests on the local session. They
#   are found by reading the test modules: a test that names a Spark fixture, the word "spark" in
#   quotes, or a fixture or helper of its module that does, so a new Spark test joins without an
#   edit here;
# - the docs' console blocks, one unit (they share one copy of the checkout, and a block may use
#   what an earlier one wrote);
# - every other module, one unit each (its module-scoped fixtures, a compiled release or a
#   built wheel, are made once, not once per worker).
# The cluster's unit goes first and the local session's second, so they start at once on two
# workers (and on one worker, the cluster before the session); then the longest unit goes first,
# by the durations of the last run (kept in pytest's cache, .pytest_cache, after every run; a
# test with no recorded duration counts half a second), so the workers finish together. A fresh
# clone has no cache: there a unit none of whose tests the cache has timed counts the seconds
# tests/unit_durations.json gives it (written by scripts/record_unit_durations.py from a run).
TESTS = os.path.dirname(os.path.abspath(__file__))
_STARTS_SPARK = re.compile(r"\b(?:%s)\b|\"spark\"" % "|".join(sorted(SPARK_FIXTURES)))
DOCS_COMMANDS = "tests/test_docs_commands.py"
CLUSTER_TESTS = "tests/test_cluster.py"
FIRST_UNITS = ("cluster", "spark")  # assigned before any other, in this order
DURATIONS_KEY = "dpspec/durations"
UNTIMED = 0.5  # seconds assumed for a test the cache has not timed
UNIT_DURATIONS = os.path.join(TESTS, "unit_durations.json")  # {unit: seconds}, for a fresh clone


def unit_seconds(nodeids, timed: dict, bundled: dict, unit: str) -> float:
    """How long a unit is expected to take: the cache's durations of its tests, or, when the cache
    has timed none of them, the bundled figure for the unit."""
    if unit in bundled and not any(n in timed for n in nodeids):
        return bundled[unit]
    return sum(timed.get(n, UNTIMED) for n in nodeids)


def unit_totals(timed: dict, spark: dict[str, set[str]]) -> dict[str, float]:
    """{unit: seconds} from per-test durations, as tests/unit_durations.json holds them."""
    totals: dict[str, float] = {}
    for nodeid, seconds in timed.items():
        unit = _unit(nodeid, spark)
        totals[unit] = totals.get(unit, 0.0) + seconds
    return {unit: round(seconds, 1) for unit, seconds in sorted(totals.items())}


def _spark_functions(source: str) -> set[str]:
    """Names of the module's functions (tests, fixtures, helpers) that start Spark or use what
    does: their text names a Spark fixture, "spark" in quotes, or another such function."""
    import ast

    tree = ast.parse(source)
    functions = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = ast.get_source_segment(source, node) or ""
            for deco in node.decorator_list:
                functions[node.name] += "\n" + (ast.get_source_segment(source, deco) or "")
    spark = {name for name, text in functions.items() if _STARTS_SPARK.search(text)}
    while True:
        uses = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(spark)))) if spark else None
        more = {name for name, text in functions.items() if name not in spark and uses and uses.search(text)}
        if not more:
            return spark
        spark |= more


def _spark_tests() -> dict[str, set[str]]:
    """{module path: names of its test functions that start Spark}."""
    out = {}
    for name in sorted(os.listdir(TESTS)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(TESTS, name), encoding="utf-8") as fh:
                source = fh.read()
            if _STARTS_SPARK.search(source):
                tests = {f for f in _spark_functions(source) if f.startswith("test")}
                if tests:
                    out[f"tests/{name}"] = tests
    return out


def _unit(nodeid: str, spark: dict[str, set[str]]) -> str:
    module, _, rest = nodeid.partition("::")
    function = rest.split("::")[-1].split("[")[0]
    if function in spark.get(module, ()):
        return "cluster" if module == CLUSTER_TESTS else "spark"
    if module == DOCS_COMMANDS:
        return "docs_commands"
    return module


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # another --dist was asked for: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    spark = _spark_tests()
    cache = getattr(config, "cache", None)
    timed = cache.get(DURATIONS_KEY, {}) if cache is not None else {}
    bundled = {}
    if os.path.exists(UNIT_DURATIONS):
        with open(UNIT_DURATIONS, encoding="utf-8") as fh:
            bundled = json.load(fh)

    class LongestFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _unit(nodeid, spark)

        def _assign_work_unit(self, node):
            first = [unit for unit in FIRST_UNITS if unit in self.workqueue]
            if first:
                nxt = first[0]
            else:
                nxt = max(self.workqueue, key=lambda unit: unit_seconds(self.workqueue[unit], timed, bundled, unit))
            self.workqueue.move_to_end(nxt, last=False)
            super()._assign_work_unit(node)

    return LongestFirst(config, log)


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if not hasattr(report, "node") and os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker's own report: the controller records it as it arrives
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _durations:
        return
    timed = cache.get(DURATIONS_KEY, {})
    timed.update({nodeid: round(seconds, 3) for nodeid, seconds in _durations.items()})
    cache.set(DURATIONS_KEY, timed)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the default in pyproject.toml): one worker more than there are CPUs for the suite
    or a folder, none when only files or tests are named (`pytest tests/test_fmt.py` runs in this
    process, as it always did: starting workers costs more than one file gains). The extra worker
    takes up the time the others spend waiting on what a test starts (a `dpspec` subprocess, a
    JVM, a browser): with one worker per CPU the whole suite kept the two cores 70% busy."""
    args = [a.split("::")[0] for a in config.args]
    if args and all(os.path.isfile(a) for a in args):
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus + 1
