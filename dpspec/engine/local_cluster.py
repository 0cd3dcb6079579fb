"""A Spark standalone cluster of separate processes on this machine (a master and workers on
127.0.0.1, started from the installed pyspark), and an engine connected to it.

It lives in the engine package, not in a script, because three places start one: the cluster
check (scripts/cluster_check.py), its tests (tests/test_cluster.py) and the scale benchmark
(benchmarks/bench_scale.py --start-local-cluster). Nothing is downloaded; every process it
starts is stopped, with its children, when the cluster stops.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dpspec.engine.spark import SparkEngine


def free_port() -> int:
    """A TCP port free on the loopback interface now (the master's and the web UIs')."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    """The installed pyspark's `spark-class` launcher (the cluster's JVMs start from it)."""
    found = importlib.util.find_spec("pyspark")
    if found is None or not found.origin:
        raise RuntimeError("pyspark is not installed: pip install -e '.[spark]'")
    return str(Path(found.origin).parent / "bin" / "spark-class")


class LocalCluster:
    """A Spark standalone master and `workers` workers, each its own JVM, bound to 127.0.0.1."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.workers, self.cores, self.memory = workers, cores, memory
        self.procs: list[subprocess.Popen] = []
        self.work = tempfile.mkdtemp(prefix="dpspec-cluster-")
        self.master = ""

    def _env(self) -> dict:
        env = dict(
            os.environ,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=self.work,
            SPARK_WORKER_DIR=self.work,
            PYSPARK_PYTHON=sys.executable,
            SPARK_NO_DAEMONIZE="1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        )
        env.pop("SPARK_HOME", None)  # the installed pyspark's own
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(os.path.join(self.work, f"{name}.log"), "wb")
        proc = subprocess.Popen(
            [spark_class(), *args], env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def _wait_for(self, name: str, pattern: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        path = os.path.join(self.work, f"{name}.log")
        while time.monotonic() < deadline:
            with open(path, "rb") as fh:
                if re.search(pattern.encode(), fh.read()):
                    return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        with open(path, "rb") as fh:
            tail = fh.read()[-2000:].decode("utf-8", "replace")
        raise RuntimeError(f"the Spark {name} did not start:\n{tail}")

    def start(self) -> "LocalCluster":
        port = free_port()
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
        )
        self._wait_for("master", r"I have been elected leader|Starting Spark master")
        self.master = f"spark://127.0.0.1:{port}"
        for i in range(self.workers):
            self._spawn(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    os.path.join(self.work, f"w{i}"),
                    self.master,
                ],
            )
        for i in range(self.workers):
            self._wait_for(f"worker{i}", r"Successfully registered with master")
        return self

    def executors(self) -> list[int]:
        """Process ids of the executor JVMs the workers launched (CoarseGrainedExecutorBackend)."""
        out = []
        for worker in self.procs[1:]:
            for pid in descendants(worker.pid):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        if b"CoarseGrainedExecutorBackend" in fh.read():
                            out.append(pid)
                except OSError:
                    pass
        return out

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the processes this harness started, and their children
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


def descendants(pid: int) -> list[int]:
    """Process ids of every descendant of `pid` (read from /proc)."""
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        kids = []
        try:  # every thread's children: a JVM starts processes from any of its threads
            for task in os.listdir(f"/proc/{here}/task"):
                with open(f"/proc/{here}/task/{task}/children") as fh:
                    kids += [int(p) for p in fh.read().split()]
        except OSError:
            pass
        out.extend(kids)
        todo.extend(kids)
    return out


def cluster_engine(master: str, conf: dict | None = None) -> SparkEngine:
    """A Spark engine on `master`: on the local cluster bound to the loopback interface, with
    two partitions and the driver's `sys.path` as the executors' PYTHONPATH; `conf` wins."""
    settings = {}
    if "127.0.0.1" in master:  # the local cluster: loopback only, and short-lived JVMs that start fast
        fast = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        settings = {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.extraJavaOptions": fast,
            "spark.executor.extraJavaOptions": fast,
            "spark.sql.adaptive.enabled": "false",
            "spark.executor.memory": "512m",
        }
    # two partitions: one task per executor of the local cluster, several per stage everywhere
    settings.update(
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.task.maxFailures": "4",
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
    )
    settings.update(conf or {})
    return SparkEngine(master, conf=settings, partitions=2)
