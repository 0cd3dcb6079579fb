"""The local engine's canonical row order at scale: `LocalEngine.stream` and `map_groups`.

    python benchmarks/bench_engine_order.py [N] [--repeat R] [--blocks B] [--plain-text]

Builds N rows (default 1,000,000; fixed seed) shaped like a person table read from Parquet
(text codes as categoricals, as `LocalEngine.read_parquet` gives them): state (51 codes), county
(about 3,000), block (B per county, default 30: about 92,000), race (63 codes, 5% missing), sex,
plus an int64 age and a bool. --plain-text holds block as plain text (one string per row, as a
pandas-loaded frame may) instead of a categorical. Times (wall clock and this process's CPU time, each the best of R: the machine is shared):

- stream: every chunk of `LocalEngine.stream` (sorted by every column, the default);
- map_groups: `LocalEngine.map_groups` by state with a unit that returns its row count (the
  whole table sorted by state then every column, decoded, split into 51 units).

and prints a SHA-256 of what each hands out (every chunk; every unit's rows), so two versions
of the engine can be checked to give byte-identical rows in the same order.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from dpspec.engine import LocalEngine  # noqa: E402

import doc_table  # noqa: E402


def population(n: int, blocks: int = 30, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    states = np.array([f"{i:02d}" for i in range(1, 57) if i not in (3, 7, 14, 43, 52)])
    state = rng.integers(0, len(states), n)
    county = rng.integers(0, 60, n)
    block = rng.integers(0, blocks, n)
    race = pd.Categorical(np.char.zfill(rng.integers(1, 64, n).astype(str), 2))
    race[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "state": pd.Categorical(states[state]),
            "county": pd.Categorical(np.char.add(states[state], np.char.zfill(county.astype(str), 3))),
            "block": pd.Categorical(
                np.char.add(
                    np.char.add(states[state], np.char.zfill(county.astype(str), 3)),
                    np.char.zfill(block.astype(str), 4),
                )
            ),
            "race": race,
            "sex": pd.Categorical(rng.choice(["1", "2"], n)),
            "age": rng.integers(0, 116, n),
            "hispanic": rng.random(n) < 0.18,
        }
    )


def digest_rows(h, frame: pd.DataFrame) -> None:
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    h.update(",".join(f"{c}:{frame[c].dtype}" for c in frame.columns).encode())


def run_stream(engine, table, h=None) -> int:
    rows = 0
    for chunk in engine.stream(table):
        rows += len(chunk)
        if h is not None:
            digest_rows(h, chunk)
    return rows


def run_map(engine, table, h=None) -> int:
    def unit(key, rows, rng):
        if h is not None:
            digest_rows(h, rows)
        return pd.DataFrame({"n": [len(rows)]})

    out = engine.map_groups(table, ["state"], unit, run_key=1, stage="bench", schema={"n": "int64"})
    return int(out["n"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--plain-text", action="store_true")
    doc_table.add_option(parser)
    args = parser.parse_args()
    table = population(args.n, args.blocks)
    if args.plain_text:
        table["block"] = table["block"].astype(object)
    engine = LocalEngine()
    print(f"{args.n:,} rows; distinct: " + ", ".join(f"{c} {table[c].nunique()}" for c in table.columns))
    rows = []
    for name, run in (("stream", run_stream), ("map_groups", run_map)):
        best = cpu = float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            assert run(engine, table) == args.n
            best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        h = hashlib.sha256()
        run(engine, table, h)
        print(
            f"{name:>10}: {best:6.2f} s wall, {cpu:6.2f} s CPU (best of {args.repeat})  rows sha256 {h.hexdigest()[:16]}"
        )
        rows.append([name, f"{args.n:,}", f"{best:.2f}", f"{cpu:.2f}", h.hexdigest()[:16]])
    doc_table.write(
        "bench_engine_order",
        "Local engine: canonical row order",
        __doc__.split("\n\n")[0],
        ["operation", "rows", "wall s (best)", "CPU s (best)", "rows sha256"],
        rows,
        notes=[
            f"Best of {args.repeat}; {args.blocks} blocks" + (", block as plain text" if args.plain_text else "") + "."
        ],
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
