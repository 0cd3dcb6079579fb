#!/usr/bin/env python3
"""`dpspec check` of bundled specs and `dpspec --help` against the floor `python -c "import lark, attrs, click"`.

    python benchmarks/bench_startup.py [--repeat 7]

Each command runs as a fresh process; the figure is the best of --repeat wall times (the
machine's load only ever adds time). Goal (issue 12): check within 3x the floor.

Both sides run with Python's bytecode cache, as an installed dpspec does: the floor's packages
come precompiled from pip, so PYTHONDONTWRITEBYTECODE (set on some build machines) is cleared
for the measured processes, and one untimed run writes dpspec's cache first. With the variable
set, every run recompiles dpspec's sources, which would time the compiler, not the start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import doc_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPSPEC = [sys.executable, "-c", "from dpspec.cli.main import main; main()"]


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def best(cmd, repeat: int) -> float:
    times = []
    subprocess.run(
        cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )  # warm the cache
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    doc_table.add_option(ap)
    args = ap.parse_args()
    floor = best([sys.executable, "-c", "import lark, attrs, click"], args.repeat)
    print(f"floor (import lark, attrs, click): {floor:.3f} s")
    cases = {"--help": ["--help"]}
    for spec in ("acs_ma_vision_rr.dps", "ma1940_swap.dps", "acs_national_topdown.dps", "acs_program/program.dps"):
        cases[f"check {spec}"] = ["check", os.path.join("specs", spec)]
    rows = [['`python -c "import lark, attrs, click"` (floor)', f"{floor:.3f}", "1.00"]]
    for name, extra in cases.items():
        t = best(DPSPEC + extra, args.repeat)
        print(f"{name:40s} {t:.3f} s  {t / floor:.2f}x the floor")
        rows.append([f"`dpspec {' '.join(extra)}`", f"{t:.3f}", f"{t / floor:.2f}"])
    doc_table.write(
        "bench_startup",
        "Start-up: dpspec check and --help",
        __doc__.split("\n\n")[0],
        ["command", "best wall time (s)", "x the floor"],
        rows,
        notes=[
            f"Best of {args.repeat} fresh processes each, with bytecode caches on both sides. Goal: "
            "check within 3x the floor."
        ],
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
