"""The heavy mechanisms on the engine contract: the same seed gives byte-identical release files
on the local engine and on Spark (local[2]), under two partitionings.

Swapping runs one unit per stratum, TopDown one per parent node of a level, SafeTab one per
(geography level, group) cell block; every unit draws from its own keyed stream. The swap specs
and SafeTab-P are compared across engines in their own modules (see CASES).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # the heavy mechanisms' production specs, on Spark and locally

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"


def release_bytes(result, out: Path) -> dict[str, bytes]:
    from dpspec.publish.output import write_result

    write_result(result, str(out))
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}
    assert files, "the compile wrote no release file"
    return files


def spark_parquet_reads(monkeypatch) -> list[str]:
    """The paths SparkEngine.read_parquet is asked for from now on: a Parquet source reaching it
    is a table Spark holds (a CSV source is read by pandas on either engine)."""
    from dpspec.engine.spark import SparkEngine

    read: list[str] = []
    plain = SparkEngine.read_parquet
    monkeypatch.setattr(
        SparkEngine, "read_parquet", lambda self, path, columns=None: read.append(path) or plain(self, path, columns)
    )
    return read


def compile_on(spec: str, engine, seed: int = 2026):
    import dpspec

    return dpspec.compile(spec, seed=seed, engine=engine)


# The heavy mechanisms' specs no other module compares across engines this way.
# Left to their own modules, each compared there on Spark under several partitions: every bundled
# swap spec (tests/test_swap_engine_tables.py, from a Parquet file and a partitioned folder) and
# safetab_p_production (tests/test_cluster.py, on a standalone cluster against the local engine;
# SafeTab's partition counts in tests/test_safetab_partitions.py and test_safetab_spark_markers.py).
CASES = ["acs_national_topdown.dps", "safetab_h_production.dps", "sdhc_production_pr.dps"]
# compiled once more with the records in three partitions; SafeTab's tabulation over several
# partitions is tests/test_safetab_spark_markers.py's (each partition's share, one marker owner)
REPARTITIONED = ["acs_national_topdown.dps", "sdhc_production_pr.dps"]


def test_the_specs_left_out_here_are_compared_across_engines_elsewhere():
    """The cut above leaves no heavy mechanism's production spec uncompared: every bundled swap
    spec is a case of test_swap_engine_tables, safetab_p_production one of test_cluster."""
    import importlib.util

    from tests.test_swap_engine_tables import SWAP_SPECS

    script = importlib.util.spec_from_file_location("cluster_check", ROOT / "scripts" / "cluster_check.py")
    cluster_check = importlib.util.module_from_spec(script)
    script.loader.exec_module(cluster_check)
    assert {"ma1940_swap.dps", "ma1940_swap_fine.dps", "acs_ma2019_swap.dps"} <= set(SWAP_SPECS)
    assert "safetab_p_production.dps" in dict(cluster_check.TEST_CASES)
    assert not set(SWAP_SPECS) & set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_local_and_spark_release_the_same_bytes(tmp_path, spark_session, name):
    from dpspec.engine.spark import SparkEngine

    spec = str(SPECS / name)
    local = release_bytes(compile_on(spec, "local"), tmp_path / "local")
    on_spark = release_bytes(compile_on(spec, SparkEngine(session=spark_session)), tmp_path / "spark")
    assert on_spark.keys() == local.keys()
    for file in local:
        assert on_spark[file] == local[file], f"{name}: {file} differs between local and spark"
    if name in REPARTITIONED:
        repartitioned = SparkEngine(session=spark_session, partitions=3)
        assert release_bytes(compile_on(spec, repartitioned), tmp_path / "spark3") == local


@pytest.mark.parametrize("name", ["acs_ma2019_swap.dps", "acs_national_topdown.dps"])
def test_the_release_files_depend_on_the_seed(tmp_path, name):
    """So the byte comparisons above can fail: another seed gives other files."""
    spec = str(SPECS / name)
    one = release_bytes(compile_on(spec, "local"), tmp_path / "one")
    assert release_bytes(compile_on(spec, "local"), tmp_path / "again") == one
    assert release_bytes(compile_on(spec, "local", seed=2027), tmp_path / "other") != one


def test_spark_reports_progress_over_its_tasks(spark_session):
    """The bar moves on Spark too: from 0 to every task of the job (a task is a batch of units)."""
    from dpspec import progress
    from dpspec.engine import EngineRun
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine import people, shuffle_within

    seen = []
    with progress.reporting(lambda stage, done, total: seen.append((stage, done, total))):
        EngineRun(SparkEngine(session=spark_session, partitions=4), 5).map_groups(
            people(n=400), ["state"], shuffle_within, stage="swap"
        )
        EngineRun(SparkEngine(session=spark_session, partitions=3), 5).map_items(
            [(("node", i), i) for i in range(6)], lambda key, payload, rng: payload * 2, stage="nodes"
        )
    swap = [s for s in seen if s[0] == "swap"]
    nodes = [s for s in seen if s[0] == "nodes"]
    assert swap[0] == ("swap", 0, 1) and swap[-1][1] == swap[-1][2] >= 2
    assert nodes[0] == ("nodes", 0, 1) and nodes[-1] == ("nodes", 3, 3)  # three partitions
    assert all(done <= total for _, done, total in seen)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def test_a_killed_spark_compile_leaves_no_output_set(tmp_path, spark_session):
    """SIGKILL a `compile --engine spark` once its JVM is up (Spark starting or running the swap of
    1.1M households, which takes minutes here): no output set, no partial set."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-c",
        "from dpspec.cli.main import main; main()",
        "compile",
        str(SPECS / "ma1940_swap.dps"),
        "-o",
        str(out),
        "--seed",
        "1",
        "--engine",
        "spark",
        "--spark-master",
        "local[1]",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jvm = []
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not jvm and time.monotonic() < deadline:
            jvm = _children(proc.pid)
            time.sleep(0.2)
        assert jvm, "the compile never started Spark"
        time.sleep(4)
        assert proc.poll() is None, "the compile ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        for pid in jvm:  # the JVM this test's compile started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
    assert not out.exists()
    # no staged or half-written set either; only the target's lock file (an flock the kernel
    # released when the process died, by design left in place: dpspec.publish.output_set)
    assert [p.name for p in tmp_path.iterdir()] == [".out.dpspec-lock"]


def test_each_swap_stratum_draws_from_its_own_stream():
    """A stratum's swap depends on its own rows and key only: removing another stratum, or
    reordering the table's strata, leaves its exchanges as they were (with one shared
    generator, every later stratum's draws would move)."""
    import numpy as np

    from dpspec.engine import EngineRun, LocalEngine
    from dpspec_swap.algorithm import swap_records_on
    from tests.test_engine import people

    frame = people(n=3000).assign(county=lambda f: np.arange(len(f)) % 17)
    run = EngineRun(LocalEngine(), 11)

    def exchanges(table):
        result = swap_records_on(run, table.reset_index(drop=True), ["state"], ["county"], "1/5")
        ids = table["id"].to_numpy()
        moved = result.source != np.arange(len(table))
        return {(s, a, b) for s, a, b in zip(table["state"].to_numpy()[moved], ids[moved], ids[result.source[moved]])}

    frame = frame.assign(id=np.arange(len(frame)))
    full = exchanges(frame)
    states = sorted(frame["state"].unique())
    kept = frame[frame["state"] != states[0]]
    assert exchanges(kept) == {e for e in full if e[0] != states[0]}
    assert {e for e in full if e[0] == states[0]}  # the removed stratum did swap
    reordered = pd.concat([frame[frame["state"] == s] for s in reversed(states)])
    assert exchanges(reordered) == full
