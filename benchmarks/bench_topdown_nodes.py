"""TopDown's node least squares: every installable QP solver timed on the captured node problems.

    python benchmarks/bench_topdown_nodes.py                      # capture 10k persons, then time
    python benchmarks/bench_topdown_nodes.py --reuse DIR          # time nodes captured before

The same 10,000 synthetic persons as `bench_topdown.py --strategy dhc` run the bundled P.L. 94
strategy and then the DHC persons strategy held to that release, one node at a time in one
process, with DPSPEC_TOPDOWN_CAPTURE set, so every fit of every node is written to .npz
(dpspec_topdown/estimation/qp_choice.py; never part of a release); so does P.L. 94 alone on
1,000,000 persons (run pl94-1000000, `--pl94-persons`), whose later passes hold each county or
tract to its first-pass total in fits of 3,000-15,000 variables that the 10k run does not reach.
Per run and level the largest fit and
the one of median size are then solved, each in a forked process of its own (its time, the
memory it added at its peak, a time limit of 20 s), by every solver configuration installed
here: Clarabel as TopDown configures it (direct solve method "auto", which gave qdldl's answers
bit for bit on the small nodes checked and faer's on an 18k-variable DHC block node) and with
each of its direct solve methods named, PIQP, PDLP (OR-Tools' first-order method), proxsuite,
OSQP (alone at its looser tolerance and as proxsuite's warm start), HiGHS's QP, and an interior
point whose Newton step is a CHOLMOD Cholesky of the normal equations (scikit-sparse). Each row
gives the time, the throughput (variables per second), the ratio to the fastest configuration
that met the accuracy on that node, the primal violation against what the rounding absorbs,
the objective gap to the best objective found and the largest difference from the cells of
Clarabel as configured (what the releases pinned so far were made from).
The accuracy a configuration must meet to count ("ok"): every row and bound within
qp.violation_limit (1e-5 x (1 + the largest finite row bound)), what the rounding absorbs; and
an objective within GAP_LIMIT (1e-6, relative to 1 + |best|) of the best objective found within
that violation. For a byte-identical release the cells must moreover agree with Clarabel's
closely enough that no margin crosses the 1e-6 floor/ceiling tolerance (_INT_TOL): where the
optimum is not unique (cells the fit does not pin down) another solver may pick another optimal
point, so the column against Clarabel is not an accuracy. The notes give per node the fastest
configuration and the ratio of the one the rule (qp_choice.rule, TopDown's default: RULE's size
bands, and grid's test below GRID_UP_TO variables) chooses.
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
from dpspec_topdown.estimation import qp_choice  # noqa: E402
from dpspec_topdown.estimation.qp import conic_form, violation_limit  # noqa: E402

TIME_LIMIT = 20.0
# The objective gap an answer may have to count as accurate: (objective - the best objective of a
# configuration within the violation limit) / (1 + |best|). 100x Clarabel's termination gap
# (1e-8): every interior point here meets it; OSQP's 1e-5 answers often do not.
GAP_LIMIT = 1e-6
# the configuration that times each solver the rule (qp_choice.RULE) may name
RULE_CONFIG = {
    "clarabel": "clarabel (auto)",
    "piqp": "piqp",
    "pdlp": "pdlp",
    "proxsuite": "proxsuite",
    "cholmod": "cholmod ipm",
}


# --- capture -----------------------------------------------------------------------------


def _tagging_progress(where: Path, prefix: str = "node-"):
    """A run_topdown progress callback that names each new capture file by its level."""
    seen: set[str] = set()

    def progress(level, done, total):
        for f in sorted(where.glob(f"{prefix}*.npz")):
            if f.name not in seen:
                f.rename(where / f"{level}--{f.name}")
        seen.update(f.name for f in where.glob("*.npz"))

    return progress


def _persons(n_persons: int):
    """The benchmark's synthetic persons: P.L. 94 blocks with DHC variables and the DHC spine."""
    from dpspec_topdown.synthetic import generate_population
    from make_dhc_synthetic import dhc_from_pl94, spine_columns

    n_blocks = max(10, int(n_persons * 0.025))
    return spine_columns(dhc_from_pl94(generate_population(n_persons, n_blocks, seed=1), seed=2))


def _run_captured(records, design, where: Path, env: str, prefix: str):
    """run_topdown with every fit captured into ``where``, one node at a time in one process."""
    from dpspec.engine import local_engine_run
    from dpspec.run.compiler import make_rng
    from dpspec_topdown.run.context import RunContext
    from dpspec_topdown.run.topdown import run_topdown

    where.mkdir(parents=True, exist_ok=True)
    os.environ[env] = str(where)
    try:
        progress = _tagging_progress(where, prefix)
        return run_topdown(
            records, design, RunContext(make_rng(1), engine=local_engine_run(1), progress=progress, workers=1)
        )
    finally:
        os.environ.pop(env)


def capture(
    n_persons: int, where: Path, env: str = qp_choice.CAPTURE_ENV, prefix: str = "node-", pl94_persons=()
) -> None:
    """The P.L. 94 and DHC persons runs of bench_topdown.bench_dhc, every fit captured (or, with
    ``env`` and ``prefix`` another capture's, every problem that one writes); with
    ``pl94_persons``, P.L. 94 alone at each of those sizes too (run "pl94-N"), whose later passes
    are held to the first in fits larger than any at 10k persons."""
    from dpspec_topdown.run.context import Records

    import bench_topdown as bt

    persons = _persons(n_persons)
    zeros, bounds = bt.production_constraints(persons)
    t0 = time.perf_counter()
    pl = _run_captured(Records(persons, bounds=bounds), bt.pl94_design(zeros), where / "pl94", env, prefix)
    print(f"captured P.L. 94 ({n_persons:,} persons) in {time.perf_counter() - t0:.1f} s", flush=True)
    variables = bt.dhc_strategy()[0]
    product = bt._pl94_product(pl.microdata)
    held = Records(bt.in_categories(persons, variables), equalities=[("pl94", bt.PL94_FACTORS, product)])
    t0 = time.perf_counter()
    _run_captured(held, bt.dhc_design(), where / "dhc", env, prefix)
    print(f"captured DHC persons ({n_persons:,} persons) in {time.perf_counter() - t0:.1f} s", flush=True)
    for n in pl94_persons:
        larger = _persons(n)
        zeros, bounds = bt.production_constraints(larger)
        t0 = time.perf_counter()
        _run_captured(Records(larger, bounds=bounds), bt.pl94_design(zeros), where / f"pl94-{n}", env, prefix)
        print(f"captured P.L. 94 ({n:,} persons) in {time.perf_counter() - t0:.1f} s", flush=True)


def select(where: Path, per_level: int) -> list[tuple[str, str, Path]]:
    """(run, level, file): per run and level the largest fit and the one of median size."""
    chosen = []
    runs = sorted((d.name for d in where.iterdir() if d.is_dir()), key=lambda r: (r != "pl94", r != "dhc", len(r), r))
    for run in runs:
        by_level: dict[str, list] = {}
        for f in sorted((where / run).glob("*--node-*.npz")):
            level = f.name.split("--")[0]
            with np.load(f) as z:
                by_level.setdefault(level, []).append((int(z["hess"].size), f))
        for level, fits in by_level.items():
            fits.sort(key=lambda t: (t[0], t[1].name))
            picks = [fits[-1]] + ([fits[len(fits) // 2]] if per_level > 1 and len(fits) > 1 else [])
            for n, f in dict.fromkeys(picks):
                chosen.append((run, level, f))
    return chosen


# --- the solvers -------------------------------------------------------------------------


def _highs(problem, form):
    from dpspec_topdown.estimation import highs

    status, x, sec = highs._highs(
        problem.cost,
        problem.lower,
        problem.upper,
        problem.a,
        problem.lo,
        problem.hi,
        hess=problem.hess,
        options={"dual_feasibility_tolerance": 1e-5, "time_limit": TIME_LIMIT},
    )
    return x is not None, x, sec, str(status)


CONFIGS = {
    "clarabel (auto)": lambda p, f: qp_choice.solve_clarabel_method(p, f, "auto"),  # TopDown's configuration
    "clarabel qdldl": lambda p, f: qp_choice.solve_clarabel_method(p, f, "qdldl"),
    "clarabel faer": lambda p, f: qp_choice.solve_clarabel_method(p, f, "faer"),
    "piqp": lambda p, f: qp_choice.solve_piqp(p, f),
    "pdlp": lambda p, f: qp_choice.solve_pdlp(p, f),
    "proxsuite": lambda p, f: qp_choice.solve_proxsuite(p, f),
    "osqp (1e-5)": lambda p, f: qp_choice.solve_osqp(p, f),
    "osqp -> proxsuite": lambda p, f: qp_choice.solve_osqp_proxsuite(p, f),
    "highs qp": _highs,
    "cholmod ipm": lambda p, f: qp_choice.solve_cholmod_ipm(p, f),
}


def _vm(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return float(line.split()[1]) / 1024
    return 0.0


# every solver's modules, imported once before the children are forked so that no solve's time
# includes an import (with --reuse nothing else imports them in this process)
SOLVER_MODULES = (
    "clarabel",
    "dpspec_topdown.estimation.piqp_baseline",  # PIQP as TopDown loads it: its baseline build
    "ortools.pdlp.python.pdlp",
    "ortools.pdlp.solvers_pb2",
    "ortools.pdlp.solve_log_pb2",
    "proxsuite",
    "osqp",
    "highspy",
    "sksparse.cholmod",
)


def import_solvers() -> None:
    import importlib

    for name in SOLVER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # reported per row as "not installed"


def _one(path: str, config: str, out: str) -> None:
    """In a forked child: solve one captured node with one configuration, write the result."""
    problem = qp_choice.load(path)
    form = conic_form(problem)
    base = _vm("VmRSS:")
    try:
        ok, x, seconds, status = CONFIGS[config](problem, form)
    except ImportError as exc:
        ok, x, seconds, status = False, None, 0.0, f"not installed ({exc.name})"
    except Exception as exc:  # a solver that raises is reported, not fatal to the benchmark
        ok, x, seconds, status = False, None, 0.0, f"error: {type(exc).__name__}: {exc}"[:120]
    peak = _vm("VmHWM:") - base
    np.savez(out, ok=ok, x=np.zeros(0) if x is None else x, seconds=seconds, status=str(status), peak=peak)


def run_one(path: Path, config: str) -> dict:
    """One (node, configuration) in a forked child (its own peak, a time limit)."""
    import multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.npz")
        t0 = time.perf_counter()
        child = mp.get_context("fork").Process(target=_one, args=(str(path), config, out))
        child.start()
        child.join(TIME_LIMIT + 5)  # the limit, and a few seconds to set up and report
        if child.is_alive():
            child.kill()
            child.join()
            return {"ok": False, "x": None, "seconds": time.perf_counter() - t0, "status": "time limit", "peak": 0.0}
        if not os.path.exists(out):
            return {"ok": False, "x": None, "seconds": 0.0, "status": f"crashed ({child.exitcode})", "peak": 0.0}
        with np.load(out) as z:
            return {
                "ok": bool(z["ok"]),
                "x": z["x"] if z["x"].size else None,
                "seconds": float(z["seconds"]),
                "status": str(z["status"]),
                "peak": float(z["peak"]),
            }


def measure(nodes, configs) -> tuple[list, list]:
    rows, summary = [], []
    for run, level, path in nodes:
        problem = qp_choice.load(str(path))
        form = conic_form(problem)
        limit = violation_limit(problem)
        results = {c: run_one(path, c) for c in configs}
        for r in results.values():
            r["viol"] = problem.violation(r["x"]) if r["x"] is not None else float("inf")
            r["obj"] = problem.objective(r["x"]) if r["x"] is not None else float("inf")
            r["feasible"] = r["ok"] and r["viol"] <= limit
        best_obj = min((r["obj"] for r in results.values() if r["feasible"]), default=float("nan"))
        for r in results.values():
            r["gap"] = (r["obj"] - best_obj) / (1 + abs(best_obj)) if r["x"] is not None else float("nan")
            r["good"] = r["feasible"] and r["gap"] <= GAP_LIMIT
        good = {c: r for c, r in results.items() if r["good"]}
        fastest = min((r["seconds"] for r in good.values()), default=float("nan"))
        ref = results.get("clarabel (auto)", {}).get("x")
        shape = (
            f"{problem.n_var:,} var ({form.cols.size:,} as stated), {problem.a.shape[0]:,} rows, {problem.a.nnz:,} nnz"
        )
        print(f"\n== {run} {level} {path.name}: {shape}; violation limit {limit:.1e}", flush=True)
        for c, r in results.items():
            gap = r["gap"]
            dx = (
                float(np.max(np.abs(r["x"][: problem.n_x] - ref[: problem.n_x]), initial=0.0))
                if r["x"] is not None and ref is not None
                else float("nan")
            )
            ratio = r["seconds"] / fastest if r["good"] else float("nan")
            line = [
                run,
                level,
                f"{problem.n_var:,}",
                c,
                f"{r['seconds']:.3f}",
                f"{problem.n_var / r['seconds']:,.0f}" if r["seconds"] > 0 and r["good"] else "-",
                f"{ratio:.2f}x" if r["good"] else "-",
                f"{r['viol']:.1e}",
                f"{gap:.1e}",
                f"{dx:.1e}",
                f"{r['peak']:,.0f}",
                "ok" if r["good"] else ("objective gap" if r["feasible"] else r["status"]),
            ]
            print("  " + " | ".join(line[3:]), flush=True)
            rows.append(line)
        summary.append(
            {
                "run": run,
                "level": level,
                "n_var": problem.n_var,
                "n_stated": int(form.cols.size),
                "rows": int(problem.a.shape[0]),
                "nnz": int(problem.a.nnz),
                "stated_rows": int(form.a.shape[0]),
                "stated_nnz": int(form.a.nnz + form.p.nnz),
                "file": str(path),
                "rule": qp_choice.rule(form, problem),
                "times": {c: (r["seconds"] if r["good"] else None) for c, r in results.items()},
                "seconds": {c: r["seconds"] for c, r in results.items()},
                "violation": {c: r["viol"] for c, r in results.items()},
                "gap": {c: r["gap"] for c, r in results.items()},
                "dx": {
                    c: (
                        float(np.max(np.abs(r["x"][: problem.n_x] - ref[: problem.n_x]), initial=0.0))
                        if r["x"] is not None and ref is not None
                        else None
                    )
                    for c, r in results.items()
                },
            }
        )
    return rows, summary


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=int, default=10_000)
    ap.add_argument(
        "--pl94-persons",
        type=int,
        nargs="*",
        default=[1_000_000],
        help="also capture P.L. 94 alone at these sizes (default 1M: its later passes' grids, about 40 s)",
    )
    ap.add_argument("--reuse", type=Path, default=None, help="time the nodes captured in DIR before")
    ap.add_argument("--keep", type=Path, default=None, help="capture into DIR (kept), not a temporary one")
    ap.add_argument("--per-level", type=int, default=2, help="fits per run and level: the largest, the median")
    ap.add_argument("--solvers", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--summary", type=Path, default=None, help="also write the figures as JSON")
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT, help="seconds per solve (default 20)")
    doc_table.add_option(ap)
    args = ap.parse_args(argv)
    globals()["TIME_LIMIT"] = args.time_limit
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.reuse or args.keep or Path(tmp)
        if args.reuse is None:
            capture(args.persons, where, pl94_persons=args.pl94_persons)
        nodes = select(where, args.per_level)
        print(f"{len(nodes)} nodes selected from {where}", flush=True)
        import_solvers()
        rows, summary = measure(nodes, args.solvers)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nbenchmark wall {wall:.0f} s; peak memory of this process {peak:,.0f} MB "
        f"(each solve's own peak is in its row)"
    )
    notes = _notes(summary)
    for n in notes:
        print(n)
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1))
    doc_table.write(
        "bench_topdown_nodes",
        "TopDown: every QP solver on the captured node problems",
        __doc__.split("\n\n", 2)[2].strip(),
        [
            "run",
            "level",
            "variables",
            "solver",
            "seconds",
            "variables/s",
            "to fastest",
            "violation",
            "objective gap",
            "max |x - Clarabel|",
            "peak MB",
            "accuracy",
        ],
        rows,
        notes=notes,
        enabled=not args.no_doc,
    )


def _notes(summary) -> list[str]:
    """Per node the fastest configuration and Clarabel's ratio to it; the rule's outcome."""
    notes = []
    for s in summary:
        times = {c: t for c, t in s["times"].items() if t is not None}
        if not times:
            notes.append(f"{s['run']} {s['level']} ({s['n_var']:,} variables): no solver met the accuracy")
            continue
        best = min(times, key=times.get)
        clar = min((t for c, t in times.items() if c.startswith("clarabel")), default=float("nan"))
        chosen = RULE_CONFIG.get(s["rule"], s["rule"])
        took = times.get(chosen)
        outcome = f"{took / times[best]:.2f}x" if took is not None else "did not meet the accuracy here"
        notes.append(
            f"{s['run']} {s['level']} ({s['n_var']:,} variables, {s['n_stated']:,} as Clarabel "
            f"is handed it, {s['stated_rows']:,} cone rows): fastest {best} {times[best]:.3f} s; best "
            f"Clarabel {clar:.3f} s ({clar / times[best]:.2f}x); the rule's choice {chosen}: {outcome}"
        )
    return notes


if __name__ == "__main__":
    main()
