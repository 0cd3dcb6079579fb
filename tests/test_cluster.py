"""A real Spark cluster (issue 29): a standalone master and two workers, each its own process,
started from the installed pyspark on 127.0.0.1 (scripts/cluster_check.py, which an operator
points at a real cluster). The same seed gives byte-identical release files on the cluster and
on the local engine for swap, TopDown and SafeTab; an executor SIGKILLed mid-job changes
nothing (Spark reruns its tasks, which draw the same keyed noise); a SIGKILLed driver publishes
nothing and leaves the previous output set whole. One cluster for the module; the swap
mechanism's byte identity is checked by the executor-kill case (ma1940_swap from Parquet), so
the script's CSV swap case (acs_ma2019_swap) runs from the script only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("cluster_check", ROOT / "scripts" / "cluster_check.py")
cluster_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cluster_check)

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(900)]  # starts a master and two workers


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    from dpspec.engine.spark import find_java

    if find_java() is None:
        pytest.skip("no Java runtime for Spark: apt-get install openjdk-17-jre-headless")
    with cluster_check.LocalCluster(workers=2) as running:
        engine = cluster_check.cluster_engine(running.master)
        try:
            yield running, engine
        finally:
            engine.close()


@pytest.mark.parametrize("name,every", cluster_check.TEST_CASES, ids=[c[0] for c in cluster_check.TEST_CASES])
def test_the_cluster_releases_the_local_engines_bytes(cluster, tmp_path, name, every):
    running, engine = cluster
    assert cluster_check.compare(name, every, engine, tmp_path) == []
    assert len(running.executors()) == 2  # the work ran on two executor processes, one per worker


def test_an_executor_killed_mid_job_changes_nothing(cluster, tmp_path):
    """Also the swap mechanism's byte-identity case: its release is compared with the local engine's."""
    running, engine = cluster
    killed: list = []
    problems = cluster_check.compare(
        *cluster_check.KILL_CASE, engine, tmp_path, kill=cluster_check.executor_killer(running, killed)
    )
    assert killed, "no executor was seen running a task"
    assert problems == []


def test_a_killed_driver_publishes_nothing_and_keeps_the_previous_set(cluster, tmp_path):
    running, _ = cluster
    assert cluster_check.driver_kill(running.master, tmp_path) == []
