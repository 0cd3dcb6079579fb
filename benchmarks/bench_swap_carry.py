"""Swapping carried along to a linked table: households swapped, persons take their new county.

    python benchmarks/bench_swap_carry.py                            # 400k households, local and spark local[2]
    python benchmarks/bench_swap_carry.py --households 100000 --engines local
    python benchmarks/bench_swap_carry.py --old-code /tmp/old        # the same runs with another checkout first

A seeded synthetic population (`--households` households in 10 states of 10 counties each, 1 to
7 persons each, about 2.5 per household) is written once as two Parquet files, with a two-table
spec (`persons in households by hhid`, swap county within state x size at rate 5%). Each engine
compiles it in its own process (`dpspec.compile` and the release written as the command line
writes it), so the peak driver memory printed (ru_maxrss) is that run's alone; Spark's JVM and
workers are other processes and are not counted. The release files are hashed (SHA-256) so the
local and Spark lines can be compared: the same seed must give the same digests. With
`--old-code DIR` (a `git archive` of an earlier commit's dpspec/, plugins/ and grammar/), the
same runs are made first with that code on the import path: before the carry-along was an engine
join, that path read both tables into the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import doc_table

ROOT = Path(__file__).resolve().parents[1]
SEED = 2026

SPEC = """\
spec "carry-along benchmark"
domain d "synthetic households and their persons" {
  stage edited
  geography g { state > county }
  table households unit household {
    hhid   : int 1..1000000000
    state  : category
    county : category in state
    size   : int 1..20
    tenure : {owned, rented}
  }
  table persons unit person in households by hhid {
    hhid   : int 1..1000000000
    county : category
    age    : int 0..120
  }
}
data households from "households.parquet"
data persons from "persons.parquet"
invariants {
  count households by state, size, tenure, hhid
  count households by county, size
  count persons by hhid, age
}
unit households : hamming
premetric pure
mechanism swap {
  table: households
  match: state, size
  swap: county
  rate: 0.05
}
"""


def build(folder: Path, households: int) -> Path:
    """The population and its spec in `folder` (once per size): households sorted by hhid."""
    import numpy as np
    import pandas as pd

    spec = folder / "carry.dps"
    if spec.exists():
        return spec
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    state = rng.integers(1, 11, size=households)
    county = state * 100 + rng.integers(1, 11, size=households)
    size = rng.choice(np.arange(1, 8), p=[0.28, 0.35, 0.15, 0.12, 0.06, 0.03, 0.01], size=households)
    hh = pd.DataFrame(
        {
            "hhid": np.arange(1, households + 1),
            "state": [f"{s:02d}" for s in state],
            "county": [f"{c:04d}" for c in county],
            "size": size,
            "tenure": np.where(rng.random(households) < 0.65, "owned", "rented"),
        }
    )
    hh.to_parquet(folder / "households.parquet", index=False)
    rows = np.repeat(np.arange(households), size)
    persons = pd.DataFrame(
        {
            "hhid": hh["hhid"].to_numpy()[rows],
            "county": hh["county"].to_numpy()[rows],
            "age": rng.integers(0, 100, size=len(rows)),
        }
    )
    persons.to_parquet(folder / "persons.parquet", index=False)
    spec.write_text(SPEC)
    return spec


def one_run(spec: str, engine_name: str, master: str, out: str) -> dict:
    """In this process: compile on the engine, write the release (the engine still running, as
    the command line does), hash it; time and peak memory."""
    import dpspec
    from dpspec.engine import get_engine
    from dpspec.publish.output import write_result

    engine = (
        get_engine(engine_name, master, conf={"spark.driver.memory": "4g"})
        if engine_name == "spark"
        else get_engine(engine_name)
    )
    start = time.perf_counter()
    try:
        result = dpspec.compile(spec, seed=SEED, engine=engine)
        compiled = time.perf_counter() - start
        write_result(result, out)
    finally:
        engine.close()
    seconds = time.perf_counter() - start
    from bench_scale import file_digest  # this script's folder is on the path

    files = {name: file_digest(Path(out) / name) for name in ("households.csv", "persons.csv")}
    rows = {name: sum(1 for _ in open(Path(out) / name)) - 1 for name in files}
    return {
        "engine": engine_name,
        "seconds": round(seconds, 1),
        "compile_seconds": round(compiled, 1),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "digests": files,
        "rows": rows,
    }


def run_child(spec: Path, engine: str, master: str, out: Path, old_code: str | None) -> dict:
    env = dict(os.environ)
    if old_code:
        env["PYTHONPATH"] = os.pathsep.join([old_code, os.path.join(old_code, "plugins"), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        __file__,
        "--one",
        str(spec),
        "--engines",
        engine,
        "--spark-master",
        master,
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{engine} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--households", type=int, default=400_000)
    parser.add_argument("--engines", default="local,spark")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--data", default="/tmp/dpspec_bench_carry")
    parser.add_argument("--old-code", default=None, help="a checkout (dpspec/, plugins/) to run first, for comparison")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    doc_table.add_option(parser)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.one, args.engines, args.spark_master, args.out)))
        return
    folder = Path(args.data) / f"hh{args.households}"
    spec = build(folder, args.households)
    print(f"{args.households:,} households, persons in {spec.parent / 'persons.parquet'}")
    codes = [("before", args.old_code), ("after", None)] if args.old_code else [("after", None)]
    rows = []
    for label, code in codes:
        for engine in args.engines.split(","):
            out = Path(args.data) / f"out-hh{args.households}-{label}-{engine}"  # never beside the inputs
            result = run_child(spec, engine, args.spark_master, out, code)
            print(
                f"{label:6} {engine:5} {result['seconds']:8.1f} s (compile {result['compile_seconds']:.1f} s)  "
                f"peak driver {result['peak_mb']:6d} MB  rows {result['rows']}  digests {result['digests']}",
                flush=True,
            )
            rows.append(
                [
                    label,
                    engine,
                    f"{result['seconds']:.1f}",
                    f"{result['compile_seconds']:.1f}",
                    f"{result['peak_mb']:,}",
                    result["rows"],
                    result["digests"],
                ]
            )
    doc_table.write(
        "bench_swap_carry",
        "Swapping carried along to persons",
        __doc__.split("\n\n")[0],
        ["code", "engine", "seconds", "compile s", "peak driver MB", "rows", "digests"],
        rows,
        notes=[f"{args.households:,} households."],
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
