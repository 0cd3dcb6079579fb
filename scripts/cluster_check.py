#!/usr/bin/env python3
"""Check dpspec on a Spark cluster: the same release as the local engine, through lost executors
and a lost driver.

    python scripts/cluster_check.py --start-local-cluster            # a master and 2 workers here
    python scripts/cluster_check.py --master spark://HOST:7077 [--conf spark.executor.memory=2g ...]

For each mechanism that runs on engines (swap, TopDown, SafeTab) a bundled spec is compiled with
one seed on the local engine and on the cluster, and every release file is compared byte for
byte: noise is keyed per unit of work, so where a unit runs must not matter. Then
(`--start-local-cluster` only, where the executors' processes are visible) an executor is
SIGKILLed while the swap job runs: Spark reruns its tasks elsewhere and the release must still be
byte-identical. Last, a `dpspec compile` driver is SIGKILLed mid-run into a folder holding a
previous output set: nothing may be published and the previous set must be intact.

The local cluster is started from the installed pyspark (its `spark-class`; nothing is
downloaded), on the loopback interface only, and stopped at the end. Against a real cluster the
executors must have Python, numpy, pandas, pyarrow, scipy and dpspec (with its plugins) installed,
the same versions as the driver (see docs/guides/cluster.md). Exit status: 0 when every check
passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
sys.path.insert(0, str(ROOT))

from dpspec.engine.local_cluster import LocalCluster, cluster_engine, descendants  # noqa: E402

# (spec, keep every k-th row of its data, as Parquet when k > 1): small enough for a loaded
# two-core machine. The swap case reads its CSV (a table on the driver, strata swapped on the
# executors); the executor-kill case reads Parquet, so the table itself lives on the executors.
CASES = [("acs_ma2019_swap.dps", 1), ("acs_national_topdown.dps", 1), ("safetab_p_production.dps", 1)]
KILL_CASE = ("ma1940_swap.dps", 10)  # a swap job long enough to lose an executor in its middle
# The test module's cases: the kill case already compares a swap release byte for byte (after a
# lost executor), so the swap spec of CASES is left to the script, which an operator runs in full.
TEST_CASES = [case for case in CASES if "swap" not in case[0]]


def cut_spec(folder: Path, name: str, every: int) -> str:
    """The bundled spec with each data source cut to every `every`-th row (Parquet), in `folder`."""
    import pandas as pd

    text = (SPECS / name).read_text()
    if every == 1:
        return str(SPECS / name)
    folder.mkdir(parents=True, exist_ok=True)

    def cut(match):
        table, source = match.group(1), SPECS / match.group(2)
        frame = pd.read_parquet(source) if source.suffix == ".parquet" else pd.read_csv(source, dtype=str)
        target = folder / f"{table}.parquet"
        frame.iloc[::every].reset_index(drop=True).to_parquet(target)
        return f'data {table} from "{target}"'

    path = folder / name
    text = re.sub(r'^data (\w+) from "([^"]+)"', cut, text, flags=re.M)
    # the spec's other files (SafeTab's code tables) stay where they are, named absolutely
    path.write_text(re.sub(r'"(data/[^"]+)"', lambda m: f'"{SPECS / m.group(1)}"', text))
    return str(path)


def release_files(spec: str, engine, out: Path, seed: int = 2026) -> dict[str, bytes]:
    """Compile and publish; {file: bytes} of the release tables (the CSVs of the output set)."""
    import dpspec
    from dpspec.publish.output import write_result

    write_result(dpspec.compile(spec, seed=seed, engine=engine), str(out))
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def compare(name: str, every: int, engine, work: Path, kill=None) -> list[str]:
    """Problems (empty when none): the release of `name` on `engine` against the local engine's.
    `kill()` runs in a thread during the cluster compile (to lose an executor mid-job)."""
    import threading

    spec = cut_spec(work / "in", name, every)
    local = release_files(spec, "local", work / f"{name}-local")
    thread = threading.Thread(target=kill, daemon=True) if kill else None
    if thread:
        thread.start()
    remote = release_files(spec, engine, work / f"{name}-cluster")
    if thread:
        thread.join(timeout=120)
    if not local:
        return [f"{name}: the local compile wrote no release file"]
    if remote.keys() != local.keys():
        return [f"{name}: the cluster wrote {sorted(remote)}, the local engine {sorted(local)}"]
    return [f"{name}: {f} differs between the cluster and the local engine" for f in local if remote[f] != local[f]]


def executor_killer(cluster: LocalCluster, killed: list, timeout: float = 120):
    """A function that waits until an executor runs Python tasks, then SIGKILLs that executor."""

    def kill():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in cluster.executors():
                if any(_is_python(kid) for kid in descendants(pid)):  # a task is running on it
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    return
            time.sleep(0.05)

    return kill


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"python" in fh.read()
    except OSError:
        return False


def driver_kill(master: str, work: Path, conf: dict | None = None, after: float = 6.0) -> list[str]:
    """Publish a set, then SIGKILL a second `dpspec compile` on the cluster into the same folder
    once its Spark job runs: the folder must still hold the first set, whole."""
    from dpspec.publish.output_set import verify_set

    spec = cut_spec(work / "in-driver", KILL_CASE[0], 1)  # all 1.1M households: minutes on Spark, never done in seconds
    out = work / "driver-out"
    release_files(cut_spec(work / "in-previous", KILL_CASE[0], 50), "local", out, seed=1)  # a small previous set
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    args = [
        sys.executable,
        "-m",
        "dpspec.cli",
        "compile",
        spec,
        "-o",
        str(out),
        "--seed",
        "2",
        "--engine",
        "spark",
        "--spark-master",
        master,
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    log = open(work / "driver.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)  # until the driver's JVM is up
        time.sleep(after)
        if proc.poll() is not None:
            said = [
                line for line in (work / "driver.log").read_text(errors="replace").splitlines() if "WARN" not in line
            ]
            return [f"the driver ended (status {proc.returncode}) before it could be killed: " + " | ".join(said[-5:])]
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    problems = []
    if {p.name: p.read_bytes() for p in out.iterdir()} != before:
        problems.append("killing the driver changed the previous output set")
    problems += [f"previous set: {p}" for p in verify_set(str(out))]
    staged = [p.name for p in work.iterdir() if ".dpspec-new-" in p.name]
    if staged:
        problems.append(f"a staged set was left behind: {staged} (the next compile removes it)")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--master", help="a running cluster's master URL (spark://HOST:PORT, yarn, k8s://...)")
    where.add_argument("--start-local-cluster", action="store_true", help="start a master and workers on 127.0.0.1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the driver")
    ap.add_argument("--skip-driver-kill", action="store_true")
    args = ap.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    problems: list[str] = []
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(LocalCluster(args.workers)) if args.start_local_cluster else None
        master = cluster.master if cluster else args.master
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dpspec-cluster-check-")))
        engine = cluster_engine(master, conf)
        stack.callback(engine.close)
        for name, every in CASES:
            start = time.time()
            found = compare(name, every, engine, work)
            problems += found
            print(f"{name}: {'identical' if not found else 'DIFFERENT'} ({time.time() - start:.0f} s)", flush=True)
        if cluster:
            killed: list = []
            found = compare(*KILL_CASE, engine, work, kill=executor_killer(cluster, killed))
            if not killed:
                found.append("no executor was seen running a task, so none was killed")
            problems += found
            print(
                f"{KILL_CASE[0]} with an executor SIGKILLed mid-job: "
                f"{'identical' if not found else 'FAILED'} (killed {killed})",
                flush=True,
            )
        else:
            print("executor kill: skipped (start a local cluster to see its executors' processes)")
        if not args.skip_driver_kill:
            found = driver_kill(master, work, conf)
            problems += found
            print(f"driver SIGKILLed mid-compile: {'previous set intact' if not found else 'FAILED'}", flush=True)
    for p in problems:
        print("problem:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
