"""The suite's scheduler (tests/conftest.py) orders units by their expected seconds; on a fresh
clone, with no pytest cache, it takes them from tests/unit_durations.json."""

from __future__ import annotations

import json
import os

from tests.conftest import CLUSTER_TESTS, FIRST_UNITS, UNIT_DURATIONS, _spark_tests, _unit, unit_seconds, unit_totals


def test_a_unit_the_cache_never_timed_takes_the_bundled_figure():
    ids = ["tests/test_a.py::test_x", "tests/test_a.py::test_y"]
    assert unit_seconds(ids, {}, {"tests/test_a.py": 40.0}, "tests/test_a.py") == 40.0
    assert unit_seconds(ids, {ids[0]: 3.0}, {"tests/test_a.py": 40.0}, "tests/test_a.py") == 3.5  # the cache wins
    assert unit_seconds(ids, {}, {}, "tests/test_a.py") == 1.0  # untimed tests: half a second each


def test_unit_totals_sum_per_unit():
    engine = {"tests/test_s.py": {"test_on_engine"}}  # as _spark_tests finds them
    timed = {
        "tests/test_s.py::test_on_engine[a]": 2.0,
        "tests/test_s.py::test_plain": 1.0,
        "tests/test_s.py::test_on_engine[b]": 3.0,
    }
    assert unit_totals(timed, engine) == {FIRST_UNITS[1]: 5.0, "tests/test_s.py": 1.0}


def test_the_bundled_durations_name_the_units_the_scheduler_makes():
    """The two Spark units and the docs' commands are in the file, and every module it names
    exists (a renamed module would fall back to half a second a test)."""
    bundled = json.loads(open(UNIT_DURATIONS, encoding="utf-8").read())
    assert {*FIRST_UNITS, "docs_commands"} <= set(bundled)
    assert _unit(f"{CLUSTER_TESTS}::test_an_executor_killed_mid_job_changes_nothing", _spark_tests()) == FIRST_UNITS[0]
    root = os.path.dirname(os.path.dirname(UNIT_DURATIONS))
    missing = [u for u in bundled if u.startswith("tests/") and not os.path.exists(os.path.join(root, u))]
    assert not missing, (
        f"tests/unit_durations.json names modules that are gone: {missing}; run scripts/record_unit_durations.py"
    )
