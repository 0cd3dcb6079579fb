"""SafeTab-P benchmark: a synthetic state of about 1M persons with places and AIAN/NH areas,
run end to end with the production parameters (specs/safetab_p_production.dps).

    python benchmarks/bench_safetab.py                    # ~1M persons (405,000 households)
    python benchmarks/bench_safetab.py --households 40000 # a smaller state
    python benchmarks/bench_safetab.py --from-parquet     # the records as a Parquet file the engine holds
    python benchmarks/bench_safetab.py --from-parquet --engine spark   # ... held by Spark (local[2])

Prints the wall (and CPU) time of the mechanism (flattening, tabulation, both stages, suppression,
long-form output), records per second, the peak resident memory of the process against the
input frame, and the ratio to a floor measured in the same run: one groupby-count of the
flattened (geography unit, group) rows the run tabulates plus the same keyed noise (every
(geography, group) cell's stream key, its ChaCha20 words and the table sampler's draws, for
the same cells and draw counts, under another run key). For comparison it also prints what
the same number of draws costs from a single generator (the pre-keying floor). Then the whole
compile as `dpspec compile` runs it on those records (check, budget, the mechanism, audit,
public and internal reports rendered).

SafeTab counts the records where they are: a frame in this process in one pass, an engine's
table by partitions (a county each) on the engine, whose shares the engine sums; the sums are
measured in batches of geography units, on the engine too, and the release streams back. The
benchmark prints how many distinct combinations of the columns it reads the state has (what the
driver held before the tabulation moved to the engine). By default the records are a pandas
frame in this process (a CSV source, or a caller's frame); with --from-parquet they are written
to a Parquet file that an engine reads, validates and holds (an EngineTable, what `dpspec
compile` does with a Parquet source), and the peak memory of this process is then measured from
there: the frame is dropped before the engine reads the file.
Target: under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import attrs
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

import dpspec  # noqa: E402
from dpspec.api import RunContext  # noqa: E402
from dpspec.check.checker import check  # noqa: E402
from dpspec.run.compiler import compile_spec, make_rng  # noqa: E402
from dpspec.engine.keyed_words import stream_keys  # noqa: E402
from dpspec.run.keyed_noise import keyed_discrete_gaussian  # noqa: E402
from dpspec.run.noise import discrete_gaussian  # noqa: E402
from dpspec.report import render_all  # noqa: E402
from dpspec_safetab import tabulate  # noqa: E402
from dpspec_safetab.iterations import encode_records, flatten  # noqa: E402
from dpspec_safetab.synthetic import population  # noqa: E402

import doc_table  # noqa: E402

SPEC = ROOT / "specs" / "safetab_p_production.dps"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--households", type=int, default=405_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--from-parquet", action="store_true", help="hand SafeTab an engine-held Parquet table")
    ap.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="the engine that holds the Parquet table (with --from-parquet)",
    )
    ap.add_argument("--spark-master", default="local[2]")
    doc_table.add_option(ap)
    args = ap.parse_args()

    codes = pd.read_parquet(ROOT / "specs" / "data" / "safetab" / "codes.parquet")["code"]
    t0 = time.perf_counter()
    households, persons = population(args.households, codes, seed=args.seed)
    gen = time.perf_counter() - t0
    geography = tempfile.TemporaryDirectory(prefix="bench_safetab_keys_")  # removed when main returns
    spec = dpspec.load(str(_spec_for(households, Path(geography.name))))
    del households
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    frame_mb = persons.memory_usage(deep=True).sum() / 2**20
    print(
        f"synthetic state: {len(persons):,} persons, {persons['county'].nunique()} counties, "
        f"{persons['tract'].nunique()} tracts, {persons['place'].nunique()} places, "
        f"{persons['aiannh'].nunique()} AIAN/NH areas (generated in {gen:.1f} s; frame {frame_mb:.0f} MB)"
    )

    columns = tabulate.read_columns(mech.design(spec, params), _inputs(mech, spec, params, persons))
    combos = int(persons.groupby(columns, dropna=False, observed=True).ngroups)
    print(
        f"distinct combinations of the columns SafeTab reads: {combos:,} for {len(persons):,} persons "
        f"({combos / len(persons):.0%})"
    )
    data, engine = {"persons": persons}, None
    if args.from_parquet:
        # kept until main returns (removed then, or at exit): Spark reads the file lazily, during the run
        folder = tempfile.TemporaryDirectory(prefix="bench_safetab_")
        path = Path(folder.name) / "persons.parquet"
        persons.to_parquet(path, index=False)
        data = persons = None  # the engine reads the file: the frame is not kept beside it
        gc.collect()
        data, engine, table_mb = _engine_held(str(path), spec, args.seed, args.engine, args.spark_master)
    draws = []  # (sigma², cell keys, draws per cell) of every noise call
    real_noise = tabulate.add_keyed_noise

    def counting_noise(counts, s2, run_key, keys):
        draws.append((s2, keys, counts.size // len(keys) if len(keys) else 0))
        return real_noise(counts, s2, run_key, keys)

    tabulate.add_keyed_noise = counting_noise
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    release = mech.run(spec, params, data, RunContext(make_rng(args.seed), engine=engine))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    tabulate.add_keyed_noise = real_noise
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.from_parquet:
        held = f"the engine's table {table_mb:.0f} MB" if table_mb is not None else "the table on Spark's executors"
        print(
            f"peak memory of this process (the driver) through the engine-held table: {peak_mb:,.0f} MB resident "
            f"({held}; the peak before the run, generating the state included, was {before_mb:,.0f} MB)"
        )
        if args.engine == "spark":  # the units ran on the executors: their draws are not seen from here
            print(
                f"SafeTab-P on Spark {args.spark_master}: {elapsed:.1f} s (driver CPU {cpu:.1f} s), "
                f"{len(release.outputs['counts']):,} published rows, streamed from the executors"
            )
            engine.engine.close()
            return
        persons = engine.to_pandas(data["persons"])  # for the floor and the whole compile below
    n_cells = sum(len(keys) for _, keys, _ in draws)
    n_noise = sum(len(keys) * per for _, keys, per in draws)
    rows = release.outputs["counts"]

    # the floor: the flattened rows of every (geography, iteration level) this run tabulated
    design = mech.design(spec, params)
    table = mech._iteration_table(spec, params)
    rec = encode_records(persons, params["race_codes"], params["ethnicity_code"], table, design.max_race_codes)
    geos, groups = [], []
    for cell in design.tables[0].cells:
        if cell.rho == 0:
            continue
        gran = design.granularity(cell.geo)
        sel = table.selection(cell.level, gran)
        r, g = flatten(rec, table, sel, 9)
        region = (
            np.zeros(len(persons), dtype=np.int64)
            if cell.geo == "nation"
            else pd.Categorical(persons[cell.geo]).codes.astype(np.int64)
        )
        ok = region[r] >= 0
        geos.append(region[r][ok] + 1_000_000 * len(geos))
        groups.append(g[ok])
    flat = pd.DataFrame({"geo": np.concatenate(geos), "group": np.concatenate(groups)})
    t0 = time.perf_counter()
    flat.groupby(["geo", "group"]).size()
    t_count = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s2, keys, per in draws:
        keyed_discrete_gaussian(s2, args.seed + 1, keys, per)
    t_noise = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _, keys, _ in draws:
        stream_keys(args.seed + 1, keys)
    t_keys = time.perf_counter() - t0
    t0 = time.perf_counter()
    discrete_gaussian(Fraction(9, 2) / Fraction(1431, 10000), n_noise, make_rng(1))
    t_one = time.perf_counter() - t0
    floor = t_count + t_noise
    print(
        f"SafeTab-P end to end: {elapsed:.1f} s (CPU {cpu:.1f} s: the figure to compare on a loaded machine) for "
        f"{len(persons):,} persons = {len(persons) / elapsed:,.0f} records/s; "
        f"{len(flat):,} flattened (unit, group) rows, {n_noise:,} noise draws in {n_cells:,} keyed (cell, stage) "
        f"streams, {len(rows):,} published rows"
    )
    if not args.from_parquet:
        print(f"peak memory: {peak_mb:,.0f} MB resident ({peak_mb / frame_mb:.1f}x the input frame)")
    print(
        f"floor: groupby-count {t_count:.1f} s + keyed noise {t_noise:.1f} s (of which {n_cells:,} SHA-256 stream "
        f"keys {t_keys:.1f} s) = {floor:.1f} s; ratio {elapsed / floor:.2f}x"
    )
    print(
        f"for comparison: the same {n_noise:,} draws from one generator take {t_one:.1f} s "
        f"(the floor before noise was keyed per cell: {t_count + t_one:.1f} s)"
    )
    t0 = time.perf_counter()
    result = compile_spec(spec, data={"persons": persons}, seed=args.seed, audit=True)
    files = render_all(result)
    whole = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"whole compile (check, budget, mechanism, audit, {len(files)} reports rendered): {whole:.1f} s = "
        f"{len(persons) / whole:,.0f} records/s; peak memory so far {peak_mb:,.0f} MB"
    )
    print("target < 60 s:", "met" if max(elapsed, whole) < 60 else "NOT met")
    where = f"from Parquet, {args.engine} engine" if args.from_parquet else "frame in this process"
    doc_table.write(
        "bench_safetab",
        "SafeTab-P on a synthetic state",
        __doc__.split("\n\n")[0],
        ["run", "persons", "wall s", "CPU s", "records/s", "floor s", "x the floor", "peak MB"],
        [
            [
                f"SafeTab-P mechanism ({where})",
                f"{len(persons):,}",
                f"{elapsed:.1f}",
                f"{cpu:.1f}",
                f"{len(persons) / elapsed:,.0f}",
                f"{floor:.1f}",
                f"{elapsed / floor:.2f}",
                "-",
            ],
            [
                "whole compile (check, budget, mechanism, audit, reports)",
                f"{len(persons):,}",
                f"{whole:.1f}",
                "-",
                f"{len(persons) / whole:,.0f}",
                "-",
                "-",
                f"{peak_mb:,.0f}",
            ],
        ],
        notes=[
            f"{len(flat):,} flattened (unit, group) rows, {n_noise:,} noise draws in {n_cells:,} keyed streams, "
            f"{len(rows):,} published rows.",
            f"Floor: groupby-count {t_count:.1f} s + keyed noise {t_noise:.1f} s (SHA-256 stream keys {t_keys:.1f} s); "
            f"the same draws from one generator {t_one:.1f} s.",
        ],
        enabled=not args.no_doc,
    )


def _spec_for(households: pd.DataFrame, folder: Path) -> Path:
    """The production spec declaring this synthetic state's units: its made-up geography (public by
    construction, as specs/data/safetab/build.py writes the bundled state's) as key files in
    `folder`, every other path of the spec made absolute. SafeTab measures the declared units only."""

    def write(columns, name):
        units = households[columns].dropna().drop_duplicates().sort_values(columns)
        units.to_csv(folder / name, index=False)

    write(["state", "county", "tract"], "geography.csv")
    write(["place"], "places.csv")
    write(["aiannh"], "aiannh.csv")
    text = SPEC.read_text(encoding="utf-8")
    for name in ("geography.csv", "places.csv", "aiannh.csv"):
        text = text.replace(f'"data/safetab/{name}"', f'"{folder / name}"')
    text = text.replace('"data/', f'"{SPEC.parent}/data/')
    path = folder / SPEC.name
    path.write_text(text, encoding="utf-8")
    return path


def _inputs(mech, spec, params, persons):
    from dpspec_safetab.plugin import _variables

    return tabulate.Inputs(
        persons,
        tuple(params["race_codes"]),
        params["ethnicity_code"],
        _variables(spec, params, mech.design(spec, params)),
    )


def _engine_held(path: str, spec, seed, name: str = "local", master: str = "local[2]"):
    """The Parquet file read by an engine as `dpspec compile` reads a Parquet source (validated,
    cast, held in the engine): (data, engine run, the table's size in MB, None on Spark)."""
    from dpspec.engine import EngineRun, get_engine, new_run_key
    from dpspec.engine.loading import load_engine_table

    source = attrs.evolve(spec.data[0], path=path)
    engine = get_engine(name, master=master if name == "spark" else None)
    t0 = time.perf_counter()
    table = load_engine_table(attrs.evolve(spec, data=(source,)), source, engine)
    print(f"read and validated by the {name} engine in {time.perf_counter() - t0:.1f} s")
    size = table.handle.memory_usage(deep=True).sum() / 2**20 if name == "local" else None
    return {"persons": table}, EngineRun(engine, new_run_key(seed)), size


if __name__ == "__main__":
    main()
