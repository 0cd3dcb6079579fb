"""TopDown's rounding LPs: HiGHS as TopDown called it, HiGHS tuned, and the min-cost flow, timed on every captured LP.

    python benchmarks/bench_topdown_rounding.py                  # capture 10k persons, then time
    python benchmarks/bench_topdown_rounding.py --reuse DIR      # time LPs captured before

The same 10,000 synthetic persons as `bench_topdown.py --strategy dhc` run the bundled P.L. 94
strategy and then the DHC persons strategy held to that release, one node at a time in one
process, with DPSPEC_TOPDOWN_ROUND_CAPTURE set, so every rounding LP handed to a solver is
written to .npz (dpspec_topdown/estimation/network.py; never part of a release): the LP as
solved, after columns alike in rows and cost were merged. Each LP is then solved, in a forked
process of its own (its time, the memory it added at its peak), by: HiGHS as TopDown called it
before the flow, and still calls it for an LP that is no network (dual simplex after presolve,
one thread); HiGHS tuned (presolve off; presolve off with no
scaling; the primal simplex), all through the same call; and the min-cost flow (OR-Tools'
SimpleMinCostFlow on the network the LP's rows make, the network's detection and building
included in its time). The objective gap is to HiGHS's optimum at feasibility tolerances of
1e-10 (relative: divided by max(1, |optimum|)); "vertex" says how many of the LP's columns
take another value than by HiGHS as before (another optimal vertex: a tie, which moves a
release). Each row gives the time, the throughput (columns per second) and the ratio to the
fastest of the three shown; the notes give every configuration's total.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins"), str(ROOT / "benchmarks"), str(ROOT / "scripts")]

import doc_table  # noqa: E402
from dpspec_topdown.estimation import highs, network  # noqa: E402

TIGHT = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}
TODAY = "highs (as before)"
FLOW = "min-cost flow"
HIGHS_CONFIGS = {
    TODAY: {},
    "highs, presolve off": {"presolve": "off"},
    "highs, presolve off, no scaling": {"presolve": "off", "simplex_scale_strategy": 0},
    "highs, primal simplex": {"simplex_strategy": 4},
}
CONFIGS = [*HIGHS_CONFIGS, FLOW]


def _vm(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return float(line.split()[1]) / 1024
    return 0.0


def _solve(p: dict, config: str):
    """(status, d, seconds) of one configuration on one captured LP."""
    t0 = time.perf_counter()
    if config == FLOW:
        status, d, _ = network.solve_flow(p["cost"], p["upper"], p["a"], p["lo"], p["hi"], p["cell_side"])
    else:
        s, d, _ = highs._highs(
            p["cost"], np.zeros(p["cost"].size), p["upper"], p["a"], p["lo"], p["hi"], options=HIGHS_CONFIGS[config]
        )
        status = "optimal" if d is not None else str(s)
    return status, d, time.perf_counter() - t0


def _one(path: str, config: str, out: str) -> None:
    """In a forked child: one LP, one configuration; the result to ``out``."""
    p = network.load(path)
    base = _vm("VmRSS:")
    status, d, seconds = _solve(p, config)
    peak = _vm("VmHWM:") - base
    np.savez(out, d=np.zeros(0) if d is None else d, ok=d is not None, seconds=seconds, status=status, peak=peak)


def run_one(path: Path, config: str) -> dict:
    import multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.npz")
        child = mp.get_context("fork").Process(target=_one, args=(str(path), config, out))
        child.start()
        child.join()
        if not os.path.exists(out):
            return {"ok": False, "d": None, "seconds": 0.0, "status": f"crashed ({child.exitcode})", "peak": 0.0}
        with np.load(out) as z:
            return {
                "ok": bool(z["ok"]),
                "d": z["d"] if bool(z["ok"]) else None,
                "seconds": float(z["seconds"]),
                "status": str(z["status"]),
                "peak": float(z["peak"]),
            }


def captured(where: Path) -> list[tuple[str, str, Path]]:
    """(run, level, file) of every captured LP, by run, level and size."""
    out = []
    for run in ("pl94", "dhc"):
        files = []
        for f in (where / run).glob("*--round-*.npz"):
            with np.load(f) as z:
                files.append((f.name.split("--")[0], int(z["cost"].size), f.name, f))
        out += [(run, level, f) for level, _, _, f in sorted(files)]
    return out


def measure(lps, configs) -> list[dict]:
    """Every LP by every configuration; each printed as it is measured."""
    summary = []
    for run, level, path in lps:
        p = network.load(str(path))
        cost = p["cost"]
        _, ref, _ = highs._highs(cost, np.zeros(cost.size), p["upper"], p["a"], p["lo"], p["hi"], options=TIGHT)
        best = float(cost @ ref)
        is_network = network.network_form(cost, p["upper"], p["a"], p["lo"], p["hi"], p["cell_side"]) is not None
        results = {c: run_one(path, c) for c in configs}
        today = results[TODAY]["d"]
        for r in results.values():
            r["gap"] = (float(cost @ r["d"]) - best) / max(1.0, abs(best)) if r["ok"] else float("nan")
            r["vertex"] = int(np.sum(np.rint(r["d"]) != np.rint(today))) if r["ok"] and today is not None else -1
        n, m = cost.size, p["a"].shape[0]
        summary.append(
            {
                "run": run,
                "level": level,
                "file": path.name,
                "columns": n,
                "rows": m,
                "network": is_network,
                "optimum": best,
                "results": {
                    c: {k: r[k] for k in ("ok", "seconds", "gap", "vertex", "peak", "status")}
                    for c, r in results.items()
                },
            }
        )
        print(f"\n== {run} {level} {path.name}: {n:,} columns, {m:,} rows, {p['a'].nnz:,} nnz, network {is_network}")
        for line in _rows(summary[-1:], configs):
            print("  " + " | ".join(line[4:]), flush=True)
    return summary


def _totals(summary, configs) -> dict:
    tot = {}
    for c in configs:
        rs = [s["results"][c] for s in summary]
        ok = [r for r in rs if r["ok"]]
        tot[c] = {
            "seconds": sum(r["seconds"] for r in rs),
            "optimal": len(ok),
            "worst gap": max((abs(r["gap"]) for r in ok), default=float("nan")),
            "changed": sum(r["vertex"] != 0 for r in ok),
            "peak": max((r["peak"] for r in rs), default=0.0),
        }
    return tot


def _notes(summary, configs, tuned) -> list[str]:
    tot = _totals(summary, configs)
    fastest = min(t["seconds"] for t in tot.values())
    cols = sum(s["columns"] for s in summary)
    notes = [
        f"{len(summary)} rounding LPs captured, {sum(s['columns'] for s in summary):,} columns in all; "
        f"{sum(s['network'] for s in summary)} of them a network matrix (all +1, cell side and child side laminar)"
    ]
    for c, t in tot.items():
        notes.append(
            f"{c}: {t['seconds']:.3f} s in all ({cols / t['seconds']:,.0f} columns/s, {t['seconds'] / fastest:.2f}x "
            f"the fastest total), optimal on {t['optimal']} of {len(summary)}, worst |objective gap| "
            f"{t['worst gap']:.1e}, another vertex than HiGHS as before on {t['changed']}, largest peak {t['peak']:,.1f} MB"
        )
    notes.append(f"the tuned HiGHS shown in the table: {tuned} (the HiGHS configuration of the least total time)")
    return notes


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=int, default=10_000)
    ap.add_argument("--reuse", type=Path, default=None, help="time the LPs captured in DIR before")
    ap.add_argument("--keep", type=Path, default=None, help="capture into DIR (kept), not a temporary one")
    ap.add_argument("--summary", type=Path, default=None, help="also write the figures as JSON")
    doc_table.add_option(ap)
    args = ap.parse_args(argv)
    import bench_topdown_nodes

    t0 = time.perf_counter()
    network.solve_flow(np.zeros(1), np.ones(1), np.ones((1, 1)), [0.0], [1.0], [False])  # the solver imported once
    with tempfile.TemporaryDirectory() as tmp:
        where = args.reuse or args.keep or Path(tmp)
        if args.reuse is None:
            bench_topdown_nodes.capture(args.persons, where, env=network.CAPTURE_ENV, prefix="round-")
        lps = captured(where)
        print(f"{len(lps)} rounding LPs captured in {where}", flush=True)
        summary = measure(lps, CONFIGS)
    tot = _totals(summary, CONFIGS)
    tuned = min((c for c in HIGHS_CONFIGS if c != TODAY), key=lambda c: tot[c]["seconds"])
    shown = [TODAY, tuned, FLOW]
    rows = _rows(summary, shown)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nbenchmark wall {wall:.0f} s; peak memory of this process {peak:,.0f} MB (each solve's own peak is in its row)"
    )
    notes = _notes(summary, CONFIGS, tuned)
    for n in notes:
        print(n)
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1))
    doc_table.write(
        "bench_topdown_rounding",
        "TopDown: the rounding LPs by HiGHS, HiGHS tuned and a min-cost flow",
        __doc__.split("\n\n", 2)[2].strip(),
        [
            "run",
            "level",
            "columns",
            "rows",
            "solver",
            "seconds",
            "columns/s",
            "to fastest",
            "objective gap",
            "vertex",
            "peak MB",
            "status",
        ],
        rows,
        notes=notes,
        enabled=not args.no_doc,
    )


def _rows(summary, shown) -> list[list]:
    """The table: per LP the configurations shown, the ratio to the fastest of them."""
    rows = []
    for s in summary:
        res = s["results"]
        fastest = min((res[c]["seconds"] for c in shown if res[c]["ok"]), default=float("nan"))
        for c in shown:
            r = res[c]
            rows.append(
                [
                    s["run"],
                    s["level"],
                    f"{s['columns']:,}",
                    f"{s['rows']:,}",
                    c,
                    f"{r['seconds']:.4f}",
                    f"{s['columns'] / r['seconds']:,.0f}" if r["ok"] and r["seconds"] > 0 else "-",
                    f"{r['seconds'] / fastest:.2f}x" if r["ok"] else "-",
                    f"{r['gap']:.1e}" if r["ok"] else "-",
                    ("same" if r["vertex"] == 0 else f"{r['vertex']:,} differ") if r["ok"] else "-",
                    f"{r['peak']:,.1f}",
                    "optimal" if r["ok"] else r["status"],
                ]
            )
    return rows


if __name__ == "__main__":
    main()
