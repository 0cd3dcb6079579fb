"""A local CSV read twice instead of three times: the limit scan fused with the fingerprint.

    python benchmarks/bench_csv_read.py [COPIES] [--repeats R]

Builds a large CSV by repeating the bundled ACS national excerpt (`specs/data/acs_national/
acs_national_pl94.csv`, 545 KB) COPIES times (default 200: about 109 MB) in a temporary folder,
with a copy of `specs/acs_national_topdown.dps` pointing at it, and times `load_data` two ways:

- three reads (before): `load_table` with its own limit scan, then `source_sha256` streaming the
  file again for the fingerprint;
- two reads (now): `load_data`, whose limit scan hashes the same bytes.

Each way runs R times, interleaved with the floor, and the best time counts (the machine is
shared). Both must give the same fingerprint. The floor is pandas' C parser reading the same file
once with no checks and no hash: any load that parses the file does at least that. The file is in the page cache after the first read, so the saving
shown is the CPU of one pass (SHA-256 and the read copy); on a cold disk it is a pass of I/O too.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from dpspec.check.data import load_data, load_table, resolve_path  # noqa: E402
from dpspec.check.sources import source_sha256  # noqa: E402
from dpspec.language.parser import parse, read_source  # noqa: E402

import pandas as pd  # noqa: E402

SPEC = ROOT / "specs" / "acs_national_topdown.dps"
CSV = ROOT / "specs" / "data" / "acs_national" / "acs_national_pl94.csv"


def build(folder: Path, copies: int) -> Path:
    header, _, body = CSV.read_bytes().partition(b"\n")
    big = folder / "data" / "acs_national" / "acs_national_pl94.csv"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as out:
        out.write(header + b"\n")
        for _ in range(copies):
            out.write(body)
    spec = folder / SPEC.name
    shutil.copy(SPEC, spec)
    return spec


def three_reads(spec):
    frames, hashes = {}, {}
    for source in spec.data:
        frames[source.table] = load_table(spec, source)
        hashes[source.path] = source_sha256(resolve_path(spec, source))
    return frames, hashes


def best(fn, spec, repeats: int) -> tuple[float, dict]:
    times, hashes = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        _, hashes = fn(spec)
        times.append(time.perf_counter() - t0)
    return min(times), hashes


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("copies", nargs="?", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), args.copies)
        spec = parse(read_source(str(path)), str(path))
        size = (Path(tmp) / "data" / "acs_national" / "acs_national_pl94.csv").stat().st_size
        big = Path(tmp) / "data" / "acs_national" / "acs_national_pl94.csv"
        old, new, floor = [], [], []
        for _ in range(args.repeats):  # interleaved
            old.append(best(three_reads, spec, 1))
            new.append(best(load_data, spec, 1))
            floor.append(best(lambda _spec: (pd.read_csv(big, engine="c"), None), spec, 1))
        assert old[0][1] == new[0][1], "the fused fingerprint differs from the streamed one"
        t_old, t_new, t_floor = (min(t for t, _ in runs) for runs in (old, new, floor))
        print(f"CSV of {size / 1e6:.1f} MB ({args.copies} copies of the bundled ACS national excerpt)")
        print(f"  three reads (limit scan, pandas, fingerprint): {t_old:.2f} s")
        print(
            f"  two reads (limit scan hashing, pandas):        {t_new:.2f} s  ({t_old - t_new:.2f} s saved, "
            f"{100 * (t_old - t_new) / t_old:.0f}%)"
        )
        print(f"  floor (pandas' C parser alone):                {t_floor:.2f} s")
        print(
            f"  now: {size / 1e6 / t_new:.1f} MB/s, {t_new / t_floor:.2f}x the floor (before {t_old / t_floor:.2f}x); "
            f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
        )


if __name__ == "__main__":
    main()
