"""Scale: TopDown and swapping on a synthetic multi-state population, local engine vs Spark.

    python benchmarks/bench_scale.py                          # 1M and 10M persons, local and spark local[2]
    python benchmarks/bench_scale.py --persons 1000000        # one size
    python benchmarks/bench_scale.py --engines local --mechanisms swap
    python benchmarks/bench_scale.py --mechanisms topdown --write serial  # the release formatted by the driver alone
    python benchmarks/bench_scale.py --spark-master spark://HOST:7077 --engines spark --data /shared/dir  # a cluster
    python benchmarks/bench_scale.py --start-local-cluster --engines spark --mechanisms topdown dhc
                                                              # a standalone cluster of 2 workers on this machine

The population (`--states` states of P.L. 94 persons with block geography, dpspec_topdown's
synthetic generator, seeded) is written once per size as Parquet partitioned by state
(`--data`, default a directory under /tmp), and every run reads it back through the engine's
`read_parquet`. Each (mechanism, engine, size) runs in its own process, so the peak driver
memory printed (ru_maxrss) is that run's alone; Spark's executors are other processes (on a
cluster, other machines) and are not counted. Swapping exchanges the whole geography of
records within (state, votingage, hispanic) at rate 5% through the plugin's engine path (the
table read, swapped and released by the engine; the release streamed, sorted, to a CSV file
whose bytes are hashed); TopDown runs the 2020 production
strategy (specs/pl94_production_topdown.dps) over nation > state > county > tract > block
group > block. `dhc` runs the DHC persons production strategy
(specs/dhc_persons_production_topdown.dps: relgq x sex x age x hispanic x cenrace over nation >
state > county > place/MCD > tract subset group > tract subset > block group > block) on persons
given DHC variables consistent with their P.L. 94 ones (scripts/make_dhc_synthetic.py), held to a
P.L. 94 release of the same persons (that strategy run first on the engine, with production's
structural zeros, its release counted into the equal_to product), both timed; only its
microdata are streamed and written (its noisy measurements, 1.23 million cells of the detailed
query per geographic unit, are counted, not drawn again). Each run's release is hashed (TopDown's microdata and noisy measurements, both
streamed a chunk at a time as a compile writes them; the time to stream them is printed apart,
and the peak includes it), so the local and Spark lines can be compared by eye: the same seed
must give the same digests on both engines. Then both TopDown tables are published as
`dpspec compile` publishes them (an output set, staged then swapped in), the write timed on its
own: with `--write parts` (the default) each table's part files are written where the run's
units run (Spark's executors, the local pool) and joined by the driver, with `--write serial`
every chunk is formatted by the driver; the files' digests are printed. The last lines give how time
grows from the smallest to the largest size (the ratio of times against the ratio of persons).

`--start-local-cluster` starts a Spark standalone master and two workers (one core each) on
127.0.0.1 from the installed pyspark (dpspec.engine.local_cluster, as scripts/cluster_check.py
does), runs the Spark lines on it, and stops it: every node of a level is a task on one of the
two executor processes, and the release's part files are written by the executors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins"), str(ROOT / "benchmarks"), str(ROOT / "scripts")]

import doc_table  # noqa: E402

SEED = 2026
MATCH, SWAP, RATE = ["state", "votingage", "hispanic"], ["county", "tract", "blockgroup", "block"], "0.05"


DHC_COLUMNS = {"relgq": "str", "sex": "str", "age": "int64", "prim": "str", "tsg": "str", "tsubset": "str"}


def build(path: Path, n_persons: int, states: int, dhc: bool = False) -> None:
    """The population as Parquet partitioned by state (hive layout), state by state; with `dhc`,
    also the DHC variables (relgq, sex, age) and the DHC spine's levels (prim, tsg, tsubset)."""
    from dpspec_topdown.synthetic import generate_population
    from make_dhc_synthetic import dhc_from_pl94, spine_columns

    if (path / "_SUCCESS").exists():
        return
    path.mkdir(parents=True, exist_ok=True)
    per_state = n_persons // states
    for s in range(states):
        code = f"{s + 1:02d}"
        n = per_state + (n_persons - per_state * states if s == states - 1 else 0)
        frame = generate_population(n, max(300, n // 40), seed=SEED + s, state=code)
        if dhc:
            frame = spine_columns(dhc_from_pl94(frame, seed=SEED + 100 + s))
            frame = frame.assign(**{c: frame[c].astype(str) for c, kind in DHC_COLUMNS.items() if kind == "str"})
        part = path / f"state={code}"
        part.mkdir(exist_ok=True)
        frame.drop(columns="state").to_parquet(part / "part-0.parquet", index=False)
        del frame
    (path / "_SUCCESS").write_text("")


def file_digest(path: Path) -> str:
    """SHA-256 of a file read a megabyte at a time (a 10M-row release is not read whole)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


# Bytes of CSV per release row, measured: 4,567 MB for the 58.5 million rows of 1M persons
# (about 82 bytes a row); rounded up, so that the guard below errs on the side of refusing.
CSV_BYTES_PER_ROW = 90


def room_to_write(target: Path, rows: int) -> str | None:
    """Why the release cannot be written under `target`'s disk, or None: the parts are joined
    into each table's file and removed one by one, so the set needs about its own size free,
    plus a gigabyte for the rest of the machine (at 10M persons that is about 45 GB)."""
    import shutil

    need = rows * CSV_BYTES_PER_ROW + 2**30
    free = shutil.disk_usage(target.parent).free
    if need <= free:
        return None
    return f"needs about {need / 2**30:,.0f} GiB for {rows:,} rows of CSV, {free / 2**30:,.0f} GiB free under {target.parent}"


def write_phase(tables: dict, target: Path, mode: str) -> dict:
    """Both TopDown tables written as `dpspec compile` publishes them (an output set: staged,
    then swapped in), timed on its own: the files written, then the set flushed and swapped in.
    mode "parts": each table's parts written where the run's units run (the engine's executors,
    the local pool) and joined by the driver, as `compile` does; "serial": every chunk
    formatted by the driver, as before parts."""
    import contextlib
    import shutil

    from dpspec.publish.output_set import output_set, scratch_beside
    from dpspec.publish.table_csv import write_table_csv

    shutil.rmtree(target, ignore_errors=True)
    refused = room_to_write(target, sum(table.rows for table in tables.values()))
    if refused:  # a full disk midway would cost the whole run and leave the machine without room
        return {"write_skipped": refused}
    t0, cpu0, pool0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with output_set(str(target)) as staged:
        with scratch_beside(staged) if mode == "parts" else contextlib.nullcontext() as scratch:
            for name, table in tables.items():
                write_table_csv(table, os.path.join(staged, f"{name}.csv"), scratch)
        write, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    publish = time.perf_counter() - t0 - write
    pool1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the local pool's processes, once they ended
    pool_cpu = pool1.ru_utime + pool1.ru_stime - pool0.ru_utime - pool0.ru_stime
    digests = {f"{name}_csv": file_digest(target / f"{name}.csv") for name in tables}
    size = sum((target / f"{name}.csv").stat().st_size for name in tables)
    shutil.rmtree(target, ignore_errors=True)
    return {
        "write_seconds": write,
        "write_cpu_seconds": cpu,
        "write_pool_cpu_seconds": pool_cpu,
        "publish_seconds": publish,
        "csv_mb": size / 2**20,
        "load": os.getloadavg()[0],
        **digests,
    }


def one_run(mechanism: str, engine_name: str, master: str, data: str, write: str = "parts") -> dict:
    """One run in this process: read, run, hash the release; time and peak memory."""
    import pandas as pd

    from dpspec.engine import EngineRun, get_engine, new_run_key

    # Spark's driver JVM gets 4 GB: TopDown's node payloads pass through it (default 1 GB).
    conf = {"spark.driver.memory": "4g"}
    if engine_name == "spark" and master.startswith("spark://127.0.0.1"):  # the local cluster
        from dpspec.engine.local_cluster import cluster_engine

        engine = cluster_engine(master, {**conf, "spark.executor.memory": "2g"})
    elif engine_name == "spark":
        engine = get_engine(engine_name, master, conf=conf)
    else:
        engine = get_engine(engine_name)
    run = EngineRun(engine, new_run_key(SEED))
    t0 = time.perf_counter()
    try:
        if mechanism == "swap":
            # The plugin's engine path (`dpspec_swap.on_engine`): the engine reads the table,
            # swaps each stratum where it lives and streams the release, sorted, to a CSV file;
            # the driver holds per-stratum aggregates and one chunk of the release at a time.
            from dpspec.api import EngineTable
            from dpspec.publish.table_csv import write_table_csv
            from dpspec_swap import on_engine
            from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES

            kinds = {**{c: "str" for c in LEVELS}, **{c: "int64" for c in PL94_VARIABLES}}
            held_in = engine.cast(run.read_parquet(data, list(kinds)), kinds)
            n_persons = int(run.count(held_in, [])["count"].iloc[0])
            persons = EngineTable(held_in, "persons", data, n_persons, kinds, engine=engine)
            read = time.perf_counter() - t0
            phases, mark = {}, time.perf_counter()

            def phase(name):
                nonlocal mark
                now = time.perf_counter()
                phases[name], mark = round(now - mark, 1), now

            facts = on_engine.engine_stratification(persons, MATCH, [c for c in kinds if c not in MATCH])
            phase("facts")
            held = on_engine.swap_engine_table(run, persons, MATCH, SWAP, RATE)
            phase("units")
            figures = on_engine.run_figures(run, held, MATCH)
            phase("figures")
            release = on_engine.streamed_release(run, persons, held)
            target = Path(data).parent / f"swap-release-{engine_name}.csv"
            n_rows = write_table_csv(release, str(target))
            phase("stream")
            wall = time.perf_counter() - t0
            digest = file_digest(target)
            target.unlink()
            return {
                "mechanism": mechanism,
                "engine": engine_name,
                "persons": n_persons,
                "seconds": wall,
                "read_seconds": read,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "release": digest,
                "rows": int(n_rows),
                "measurements_mb": 0.0,
                "b": facts["b"],
                "swapped": figures["swapped_records"],
                "phases": phases,
            }
        elif mechanism == "topdown":
            # TopDown reads the table through the engine (`read_parquet`: on Spark it stays
            # there) and takes only its counts by geography and by block x histogram cell.
            from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES

            persons = run.read_parquet(data, LEVELS + list(PL94_VARIABLES))
            read = time.perf_counter() - t0
            res = pl94_topdown(run, persons)
            extra = {}
        else:
            # DHC persons: a P.L. 94 release of the same persons first (its product is what
            # the DHC run's equal_to holds it to), then the DHC persons strategy on the engine.
            from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES

            kinds = {**{c: "str" for c in LEVELS}, **{c: "int64" for c in PL94_VARIABLES}, **DHC_COLUMNS}
            held = engine.cast(run.read_parquet(data, list(kinds)), kinds)
            read = time.perf_counter() - t0
            t_pl = time.perf_counter()
            from bench_topdown import production_zeros

            pl = pl94_topdown(run, held, production_zeros())
            product = pl94_product_of(pl.microdata_table())
            pl_seconds = time.perf_counter() - t_pl
            t_dhc = time.perf_counter()
            res = dhc_topdown(run, engine.cast(held, {"hispanic": "str"}), product)
            extra = {"pl94_seconds": pl_seconds, "dhc_seconds": time.perf_counter() - t_dhc}
        extra["levels"] = level_timings(res)
        n_persons = int(res.confidential["nation"].sum())
        # both release tables are streamed: read a chunk at a time, as `dpspec compile` writes
        # them; the noisy measurements are re-drawn node by node, never whole
        micro, meas = res.microdata_table(), res.measurements_table()
        tables = {"microdata": micro.iter_chunks, "measurements": meas.iter_chunks}
        tables_of = {"persons": micro, "measurements": meas}
        dense_mb = meas.rows * 8 / 2**20  # what one int64 array of every noisy answer would take
        if mechanism == "dhc":  # the detailed query alone is 1.23M cells per unit: microdata only
            tables, tables_of = {"microdata": micro.iter_chunks}, {"persons": micro}
            extra["measurement_rows_not_streamed"] = int(meas.rows)
        wall = time.perf_counter() - t0
        digests, rows = {}, {}
        for name, chunks in tables.items():  # row hashes, chunk by chunk: the whole frame's digest
            h, n = hashlib.sha256(), 0
            for chunk in chunks():
                h.update(pd.util.hash_pandas_object(chunk, index=False).to_numpy().tobytes())
                n += len(chunk)
            digests[name], rows[name] = h.hexdigest()[:16], n
        stream = time.perf_counter() - t0 - wall
        written = write_phase(tables_of, Path(data).parent / f"topdown-release-{engine_name}", write)
    finally:
        engine.close()
    return {
        "mechanism": mechanism,
        "engine": engine_name,
        "persons": int(n_persons),
        "seconds": wall,
        "read_seconds": read,
        "stream_seconds": stream,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "release": digests["microdata"],
        "measurements": digests.get("measurements"),
        "rows": rows["microdata"],
        "measurement_rows": rows.get("measurements", 0),
        "measurements_mb": dense_mb,
        **written,
        **extra,
    }


def level_timings(res) -> dict:
    """Per geographic level: its nodes, its largest node's variables and the seconds spent."""
    keep = ("solve_seconds", "node_seconds", "qp_seconds", "rounding_seconds", "nodes", "max_variables")
    return {name: {k: round(v, 1) for k, v in lv.items() if k in keep} for name, lv in res.timings["levels"].items()}


def pl94_topdown(run, persons, zeros: dict | None = None):
    """The 2020 P.L. 94 production strategy over the engine's person table."""
    from bench_topdown import pl94_design
    from dpspec_topdown.run.context import RunContext
    from dpspec_topdown.run.topdown import run_topdown

    return run_topdown(persons, pl94_design(zeros), RunContext(None, engine=run))


def pl94_product_of(micro):
    """The P.L. 94 release's equal_to product, counted a chunk of its microdata at a time."""
    import pandas as pd
    from bench_topdown import PL94_FACTORS, _pl94_product

    parts = [_pl94_product(chunk) for chunk in micro.iter_chunks()]
    return pd.concat(parts).groupby(["block", *PL94_FACTORS], as_index=False)["count"].sum()


def dhc_topdown(run, persons, product):
    """The DHC persons production strategy, held to the P.L. 94 product at every block."""
    from bench_topdown import PL94_FACTORS, dhc_design
    from dpspec_topdown.run.context import Records, RunContext
    from dpspec_topdown.run.topdown import run_topdown

    records = Records(persons, equalities=[("pl94", PL94_FACTORS, product)])
    return run_topdown(records, dhc_design(), RunContext(None, engine=run))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument(
        "--dhc-persons",
        type=int,
        nargs="+",
        help="the sizes the dhc mechanism runs at (default: --persons); it takes about 1,000 s per million "
        "persons on 2 cores",
    )
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--engines", nargs="+", default=["local", "spark"], choices=["local", "spark"])
    ap.add_argument("--mechanisms", nargs="+", default=["swap", "topdown"], choices=["swap", "topdown", "dhc"])
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument(
        "--start-local-cluster",
        action="store_true",
        help="run the Spark lines on a standalone master and two one-core workers started on this machine",
    )
    ap.add_argument(
        "--data",
        default="/tmp/dpspec_bench_scale",
        help="where the Parquet populations are built and read (on a cluster: a shared filesystem)",
    )
    ap.add_argument(
        "--write",
        default="parts",
        choices=["parts", "serial"],
        help="TopDown's release files: parts written where the units run and joined (as compile does), "
        "or every chunk formatted by the driver (as before parts)",
    )
    ap.add_argument("--one", nargs=3, metavar=("MECHANISM", "ENGINE", "PATH"), help=argparse.SUPPRESS)
    doc_table.add_option(ap)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(*args.one[:2], args.spark_master, args.one[2], args.write)), flush=True)
        return
    if args.start_local_cluster:
        from dpspec.engine.local_cluster import LocalCluster

        with LocalCluster(workers=2, cores=1, memory="8g") as cluster:
            print(f"== a local standalone cluster: {cluster.master}, 2 workers of 1 core", flush=True)
            run_all(args, cluster.master)
        return
    run_all(args, args.spark_master)


def per_level(levels: dict) -> str:
    """'state 3 nodes 1.2 s (largest 8,064 variables), ...': a level's nodes and its seconds."""
    return ", ".join(
        f"{name} {int(lv.get('nodes', 0)):,} nodes {lv.get('solve_seconds', 0):.1f} s"
        + (f" (largest {int(lv['max_variables']):,} variables)" if lv.get("max_variables") else "")
        for name, lv in levels.items()
    )


def failure(stderr: str, data: Path, mech: str, eng: str) -> str:
    """A failed run's cause for the console (the lines that name an error: a Java stack trace
    ends with no cause in it), its whole stderr kept beside the data, since a cluster's own logs
    go with it."""
    log = data.with_name(f"{data.name}.{mech}-{eng}.stderr.log")
    log.write_text(stderr, encoding="utf-8")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    named = [line for line in lines if re.search(r"(Error|Exception|Failed)\b", line)][:3]
    return " | ".join(named or lines[-1:]) + f" (stderr: {log})"


def run_all(args, master: str) -> None:
    """Every (size, mechanism, engine) in its own process, its line printed, the doc table written."""
    rows = []
    sizes = {m: set(args.dhc_persons or args.persons) if m == "dhc" else set(args.persons) for m in args.mechanisms}
    for n in sorted(set().union(*sizes.values())):
        for mech in args.mechanisms:
            if n not in sizes[mech]:
                continue
            path = Path(args.data) / f"{'dhc_' if mech == 'dhc' else ''}persons_{n}_{args.states}states"
            t0 = time.perf_counter()
            build(path, n, args.states, dhc=mech == "dhc")
            print(
                f"== {n:,} persons in {args.states} states: {path} ({time.perf_counter() - t0:.1f} s to build)",
                flush=True,
            )
            for eng in args.engines:
                cmd = [sys.executable, __file__, "--one", mech, eng, str(path), "--spark-master", master]
                cmd += ["--write", args.write]
                done = subprocess.run(
                    cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}
                )
                if done.returncode != 0:
                    print(f"{mech:8s} {eng:6s} {n:>11,}  FAILED: {failure(done.stderr, path, mech, eng)}", flush=True)
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(
                    f"{mech:8s} {eng:6s} {n:>11,} persons  {row['seconds']:8.1f} s (read {row['read_seconds']:.1f} s)  "
                    f"peak driver {row['peak_mb']:8.0f} MB  release {row['release']}"
                    + (
                        f"  (b = {row['b']:,}, {row['swapped']:,} swapped; seconds {row['phases']})"
                        if "b" in row
                        else ""
                    )
                    + (
                        f"  measurements {row['measurements']} ({row['measurement_rows']:,} rows streamed in "
                        f"{row['stream_seconds']:.1f} s with the microdata; {row['measurements_mb']:.0f} MB as one "
                        f"dense array, never made)"
                        if row.get("measurements")
                        else ""
                    )
                    + (
                        f"  P.L. 94 first {row['pl94_seconds']:.1f} s, DHC {row['dhc_seconds']:.1f} s"
                        if "dhc_seconds" in row
                        else ""
                    )
                    + (f"; per level {per_level(row['levels'])}" if row.get("levels") else "")
                    + (f"  write skipped: {row['write_skipped']}" if "write_skipped" in row else "")
                    + (
                        f"  write {row['write_seconds']:.1f} s (driver CPU {row.get('write_cpu_seconds', 0):.1f} s, "
                        f"pool CPU {row.get('write_pool_cpu_seconds', 0):.1f} s; load {row.get('load', 0):.1f}) "
                        f"+ flush and swap {row['publish_seconds']:.1f} s "
                        f"({row['csv_mb']:,.0f} MB of CSV; files {row['persons_csv']} {row.get('measurements_csv', '-')})"
                        if "write_seconds" in row
                        else ""
                    ),
                    flush=True,
                )
    sizes = sorted({r["persons"] for r in rows})
    growth = []
    for mech in args.mechanisms:
        for eng in args.engines:
            t = {r["persons"]: r["seconds"] for r in rows if r["mechanism"] == mech and r["engine"] == eng}
            if len(sizes) > 1 and sizes[0] in t and sizes[-1] in t:
                growth.append(
                    f"growth {mech} on {eng}: x{t[sizes[-1]] / t[sizes[0]]:.1f} time for "
                    f"x{sizes[-1] / sizes[0]:.0f} persons"
                )
                print(growth[-1], flush=True)
    dhc = [
        f"{r['persons']:,} persons, DHC on {r['engine']}: P.L. 94 release first {r['pl94_seconds']:.1f} s, then "
        f"the DHC persons strategy {r['dhc_seconds']:.1f} s ({r['dhc_seconds'] / r['pl94_seconds']:.1f}x); per level "
        + per_level(r["levels"])
        for r in rows
        if "dhc_seconds" in r
    ]
    levels = [
        f"{r['persons']:,} persons, {r['mechanism']} on {r['engine']}, per level: {per_level(r['levels'])}"
        for r in rows
        if r.get("levels") and "dhc_seconds" not in r
    ]
    doc_table.write(
        "bench_scale_cluster" if args.start_local_cluster else "bench_scale",
        "Scale: swapping and TopDown, local engine and Spark"
        + (", on a local standalone cluster" if args.start_local_cluster else ""),
        __doc__.split("\n\n")[0],
        [
            "mechanism",
            "engine",
            "persons",
            "seconds",
            "read s",
            "peak driver MB",
            "release digest",
            "measurements digest",
            "write s",
            "CSV MB",
        ],
        [
            [
                r["mechanism"],
                r["engine"],
                f"{r['persons']:,}",
                f"{r['seconds']:.1f}",
                f"{r['read_seconds']:.1f}",
                f"{r['peak_mb']:,.0f}",
                r["release"],
                r.get("measurements") or "-",
                f"{r['write_seconds']:.1f}" if "write_seconds" in r else "-",
                f"{r['csv_mb']:,.0f}" if "csv_mb" in r else "-",
            ]
            for r in rows
        ],
        notes=[
            f"{args.states} states; Spark master {master}"
            + (" (a local standalone cluster)" if args.start_local_cluster else "")
            + "."
        ]
        + growth
        + dhc
        + levels
        + [
            f"{r['persons']:,} persons, {r['mechanism']}: write skipped, {r['write_skipped']}"
            for r in rows
            if "write_skipped" in r
        ],
        enabled=not args.no_doc and bool(rows),
    )


if __name__ == "__main__":
    main()
