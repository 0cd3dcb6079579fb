"""The cost of keyed per-unit streams: how many unit generators per second, and at what premium.

    python benchmarks/bench_streams.py [N] [--draws D]

For N unit keys (default 100,000 keys shaped like TopDown's (level, geocode) and swapping's
(state, size) strata) it times building each unit's generator with `dpspec.engine.streams.
unit_rng` (canonical key encoding, SHA-256, a ChaCha20 generator) and drawing D numbers from it
(default 0: the per-key overhead alone), against creating the same number of plain ChaCha20
generators from consecutive integer keys (no hashing, no encoding) and drawing the same, and
against `dpspec.run.compiler.make_rng(seed)` (ChaCha20 seeded through numpy's SeedSequence, the
project's run generator). Each variant runs R times, interleaved, and the best time counts (the
machine is shared). The ratio is the premium keyed streams cost over the cheapest possible
per-unit generator; the absolute keys/s bounds how many units a second a mechanism can start.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from randomgen import ChaCha

import doc_table

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from dpspec.run.compiler import make_rng  # noqa: E402
from dpspec.engine.streams import unit_rng  # noqa: E402


def keys(n: int) -> list:
    half = n // 2
    nodes = [("topdown level 6", ("25", f"{i:011d}")) for i in range(half)]
    strata = [("swap", (f"{i % 56:02d}", i // 56)) for i in range(n - half)]
    return nodes + strata


def seconds(make, items, draws) -> float:
    t0 = time.perf_counter()
    for item in items:
        gen = make(item)
        if draws:
            gen.integers(0, 1 << 62, draws)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("--draws", type=int, default=0, help="numbers drawn from each generator")
    parser.add_argument("--repeat", type=int, default=3)
    doc_table.add_option(parser)
    args = parser.parse_args(argv)
    items = keys(args.n)
    run_key = 2026
    variants = {
        "keyed: encode + SHA-256 + ChaCha20": (lambda k: unit_rng(run_key, k), items),
        "plain: ChaCha20(key=i)": (lambda i: np.random.Generator(ChaCha(key=i, counter=0, rounds=20)), range(args.n)),
        "make_rng(i): SeedSequence + ChaCha20": (make_rng, range(args.n)),
    }
    best = {name: float("inf") for name in variants}
    for _ in range(args.repeat):
        for name, (make, inputs) in variants.items():
            best[name] = min(best[name], seconds(make, inputs, args.draws))
    print(f"{args.n:,} unit keys, {args.draws} draws each, best of {args.repeat}")
    for name, t in best.items():
        print(f"  {name:<40} {args.n / t:>12,.0f} keys/s  ({t:.2f} s)")
    keyed, plain, seeded = best.values()
    print(f"  ratio keyed / plain: {keyed / plain:.2f}x;  keyed / make_rng: {keyed / seeded:.2f}x")
    rows = [[name, f"{args.n / t:,.0f}", f"{t:.2f}", f"{t / plain:.2f}"] for name, t in best.items()]
    doc_table.write(
        "bench_streams",
        "Keyed per-unit random streams",
        __doc__.split("\n\n")[0],
        ["generator", "keys/s", "seconds", "x plain ChaCha20 (the floor)"],
        rows,
        notes=[f"{args.n:,} unit keys, {args.draws} draws each, best of {args.repeat}."],
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
