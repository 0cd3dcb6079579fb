"""TopDown benchmarks: the ACS national excerpt end to end, and synthetic states.

    python benchmarks/bench_topdown.py                     # excerpt, then a 1M-person state
    python benchmarks/bench_topdown.py --persons 100000    # a smaller state only
    python benchmarks/bench_topdown.py --skip-synthetic    # the excerpt only
    python benchmarks/bench_topdown.py --strategy dhc --skip-acs --persons 10000
                                                           # DHC persons against P.L. 94, same persons

Synthetic states run the 2020 production strategy read from specs/pl94_production_topdown.dps
(per-level query shares, the hhinstlevels recode, the passes, the structural zero nurse_nva_0
and the facility constraints hhgq_total_lb/ub on a generated facilities table). For each run it prints the wall time per
level (noise, solve), the solvers' share of node time, peak memory of the main process and of
the solver workers, time per block, and one line for the largest node solved in the main
process: the interior-point QP's time (Clarabel) and HiGHS's active-set QP time on the same
problem, and their ratio (``largest node: ... ratio R``). The noise line gives exact samples per
second and the ratio to drawing as many uniform integers with the same generator.
Targets: excerpt < 30 s; 1M persons with the production strategy < 2 min on 2 cores.

``--strategy dhc`` gives the same persons DHC variables (relgq, sex, single years of age;
scripts/make_dhc_synthetic.py) and the DHC spine's levels, runs the P.L. 94 strategy on them,
then the DHC persons strategy of specs/dhc_persons_production_topdown.dps (1,227,744 cells,
interleaved outer passes, its structural zeros) held with equal_to to that P.L. 94 release, as
production was; both through a local engine (each node draws its children's noise), neither on
the AIAN spine. It prints, per run, time per level split into noise and solve, peak memory, the
time per block and the DHC / P.L. 94 ratio (goal: within 10x, peak < 4 GB), and for the DHC run
where the time goes: noise, least squares, rounding, the rest, the root's node, and the I/O of
writing each run's microdata (the DHC specs do not release the noisy measurements).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from dpspec.check.checker import check  # noqa: E402
from dpspec.run.compiler import make_rng  # noqa: E402
from dpspec.run.noise import discrete_gaussian  # noqa: E402
from dpspec.language.parser import parse  # noqa: E402
from dpspec_topdown.params import passes as topdown_passes  # noqa: E402
from dpspec_topdown.params import tables as topdown_tables  # noqa: E402
from dpspec_topdown.estimation import postprocess  # noqa: E402
from dpspec_topdown.run.topdown import run_topdown  # noqa: E402
from dpspec_topdown.design import Design  # noqa: E402
from dpspec_topdown.run.context import Records, RunContext  # noqa: E402
from dpspec_topdown.params.constraints import facility_bounds, facility_constraints  # noqa: E402
from dpspec_topdown.synthetic import (  # noqa: E402
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_RHO,
    generate_facilities,
    generate_population,
)

import doc_table  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))

ROWS: list[list] = []  # one row per run, for the documentation's table
NOTES: list[str] = []

PRODUCTION_SPEC = ROOT / "specs" / "pl94_production_topdown.dps"
ACS_CSV = ROOT / "specs" / "data" / "acs_national" / "acs_national_pl94.csv"
ACS_VARIABLES = {"hhgq": [0, 1, 2], "votingage": [0, 1], "hispanic": [0, 1], "cenrace": list(range(7))}
ACS_QUERIES = [
    ((), Fraction(1, 5)),
    (("hhgq",), Fraction(1, 5)),
    (("votingage", "hispanic", "cenrace"), Fraction(2, 5)),
    (("hhgq", "votingage", "hispanic", "cenrace"), Fraction(1, 5)),
]
ACS_SHARES = {"nation": Fraction(1, 5), "state": Fraction(2, 5), "puma": Fraction(2, 5)}


def _peak_mb(res) -> tuple[float, float]:
    """Peak resident memory (MB) of this process and of the largest solver worker."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = max(
        (row.get("solver_peak_mb", 0.0) for row in res.timings["levels"].values() if row.get("parallel")), default=0.0
    )
    return own, workers


def _accuracy(res, persons: pd.DataFrame) -> str:
    """Mean absolute error of unit totals per explicit level (persons per published unit: a
    unit the spine split is the sum of its parts)."""
    parts = []
    for level in res.hierarchy.levels:
        if level.implicit:
            continue
        codes = level.codes if level.labels is None else level.labels
        got = (
            pd.Series(np.asarray(res.histograms[level.name].sum(axis=1)).ravel())
            .groupby(np.asarray(codes).astype(str))
            .sum()
        )
        truth = persons.groupby(persons[level.name].astype(str), observed=True).size().reindex(got.index, fill_value=0)
        got, truth = got.to_numpy(), truth.to_numpy()
        parts.append(f"{level.name} {np.abs(got - truth).mean():.2f}")
    return "mean |error| of unit totals: " + ", ".join(parts)


def _report(title: str, res, wall: float, n_persons: int, persons: pd.DataFrame | None = None) -> None:
    t = res.timings
    print(f"\n== {title}: {n_persons:,} persons, {res.schema.n_cells:,} cells, {t['workers']} worker(s)")
    print(
        f"{'level':<11}{'units':>8}{'nodes':>7}{'noise s':>9}{'solve s':>9}{'solver s':>9}"
        f"{'max vars':>9}{'milp':>6}{'capped':>7}"
    )
    for level, row in t["levels"].items():
        print(
            f"{level:<11}{row['units']:>8}{row.get('nodes', 0):>7}{row['noise_seconds']:>9.2f}"
            f"{row.get('solve_seconds', 0):>9.2f}"
            f"{row.get('qp_seconds', 0) + row.get('rounding_seconds', 0):>9.2f}"
            f"{row.get('max_variables', 0):>9}{row.get('milp_nodes', 0):>6}{row.get('qp_capped_nodes', 0):>7}"
        )
    own, kids = _peak_mb(res)
    ROWS.append(
        [
            title,
            f"{n_persons:,}",
            f"{res.schema.n_cells:,}",
            t["workers"],
            f"{wall:.1f}",
            f"{t['solver_share']:.0%}",
            f"{own:,.0f}",
            f"{kids:,.0f}",
        ]
    )
    print(
        f"total {wall:.1f} s (engine {t['total_seconds']:.1f} s); solvers' share of node time "
        f"{t['solver_share']:.0%}; peak memory {own:,.0f} MB main, {kids:,.0f} MB largest worker "
        "(0: no pool)"
    )
    print(f"rho declared {res.total_rho} = {float(res.total_rho):.4f}; spent {float(res.rho_spent):.6f}")
    if persons is not None:
        print(_accuracy(res, persons))


def _noise_lower_bound(n: int = 4_000_000) -> None:
    rng = make_rng(0)  # the project's ChaCha20 generator, as in a real run
    for s2 in (Fraction(100), Fraction(2487929, 2048)):  # the latter: production's nation cenrace
        discrete_gaussian(s2, 10, rng)  # build the table once, as a run does per sigma²
        t0 = time.perf_counter()
        discrete_gaussian(s2, n, rng)
        exact = time.perf_counter() - t0
        t0 = time.perf_counter()
        rng.integers(0, 20, size=n)
        bound = time.perf_counter() - t0
        line = (
            f"noise: {n / exact / 1e6:.2f} M exact samples/s at sigma²={float(s2):.6g}; "
            f"{exact / bound:.1f}x the time to draw as many uniform integers"
        )
        print("== " + line)
        NOTES.append(line)


def production_strategy():
    """(level shares, per-level strategy, recodes, rho, passes) as the production spec states them."""
    spec = parse(PRODUCTION_SPEC.read_text(), str(PRODUCTION_SPEC))
    params = check(spec).params
    schema = topdown_tables._schema(spec, params)
    strategy = topdown_tables._strategy(params, topdown_tables._levels(spec), list(schema.names))
    passes = topdown_passes._passes(params, list(schema.names))
    return params["levels"], strategy, schema.recodes, params["rho"], passes


def production_zeros(spec=None, params=None) -> dict:
    """The production spec's structural zeros (nurse_nva_0), in the generator's integer codes."""
    if spec is None:
        spec = parse(PRODUCTION_SPEC.read_text(), str(PRODUCTION_SPEC))
        params = check(spec).params
    variables = topdown_tables._variables(spec, params)  # categories as the spec writes them
    return {
        name: {var: [int(v) for v in values] for var, values in cells.items()}
        for name, cells in topdown_tables._structural_zeros(params, variables).items()
    }


def production_constraints(persons: pd.DataFrame):
    """(structural zeros, bounds) as the production spec states them, on generated facilities."""
    spec = parse(PRODUCTION_SPEC.read_text(), str(PRODUCTION_SPEC))
    params = check(spec).params
    variables = topdown_tables._variables(spec, params)
    facilities = generate_facilities(persons, seed=1)
    bounds = []
    for c in facility_constraints(spec, params, variables):
        c = {**c, "occupied": [int(v) for v in c["occupied"]]}  # the generator's integer codes
        bounds.append((c["name"], (c["of"],), *facility_bounds(c, facilities, PL94_VARIABLES[c["of"]])))
    return production_zeros(spec, params), bounds


class _Capture:
    """Keeps the largest node QP built in this process (the levels solved without a pool)."""

    def __init__(self):
        self.problem = None
        self._build = postprocess.build_node_qp

    def __enter__(self):
        def build(task, queries, variables=None):
            problem = self._build(task, queries, variables)
            if self.problem is None or problem.n_var > self.problem.n_var:
                self.problem = problem
            return problem

        postprocess.build_node_qp = build
        return self

    def __exit__(self, *exc):
        postprocess.build_node_qp = self._build


def _largest_node_line(problem, res) -> str:
    biggest = max(row.get("max_variables", 0) for row in res.timings["levels"].values())
    x_ip, _, ip, used, _ = postprocess.solve_qp(problem, "clarabel")
    x_as, _, active, _, _ = postprocess.solve_qp(problem, "highs")
    gap = abs(problem.objective(x_ip) - problem.objective(x_as)) / (1 + abs(problem.objective(x_as)))
    return (
        f"largest node: {problem.n_var:,} variables, {problem.a.shape[0]:,} rows "
        f"(largest in the run: {biggest:,}); {used} {ip:.2f} s, HiGHS active-set {active:.2f} s, "
        f"objectives agree to {gap:.1e}; ratio {active / ip:.1f}"
    )


def bench_acs(workers: int | None) -> None:
    persons = pd.read_csv(ACS_CSV, dtype={"state": str, "puma": str})
    t0 = time.perf_counter()
    res = run_topdown(
        persons,
        Design(
            ["nation", "state", "puma"],
            ACS_VARIABLES,
            {lv: ACS_QUERIES for lv in ACS_SHARES},
            PRODUCTION_RHO,
            ACS_SHARES,
            "hamming",
            [("state", ())],
        ),
        RunContext(np.random.default_rng(2019), workers=workers),
    )
    _report("ACS national excerpt (nation > state > PUMA)", res, time.perf_counter() - t0, len(persons), persons)


def _progress(start: list):
    """A progress callback: a level's finished nodes, at most every 30 s, timed from start[0]."""
    last = [0.0]

    def progress(level, done, total):
        now = time.perf_counter()
        if done == total or now - last[0] > 30:
            last[0] = now
            print(f"  [{now - start[0]:7.1f} s] {level}: {done}/{total} nodes", flush=True)

    return progress


def bench_synthetic(
    n_persons: int, n_blocks: int, workers: int | None, compare: bool = True, spine: bool = False
) -> None:
    t0 = time.perf_counter()
    persons = generate_population(n_persons, n_blocks, seed=1)
    gen = time.perf_counter() - t0
    progress = _progress([t0])
    zeros, bounds = production_constraints(persons)
    t1 = time.perf_counter()
    with _Capture() as capture:
        res = run_topdown(
            Records(persons, bounds=bounds),
            pl94_design(zeros),
            RunContext(make_rng(1), progress=progress, workers=workers),
        )
    wall = time.perf_counter() - t1
    blocks = persons["block"].nunique()
    _report(
        f"synthetic state, production strategy ({blocks:,} populated blocks; generated in {gen:.1f} s)",
        res,
        wall,
        n_persons,
        persons,
    )
    print(f"time per block: {wall / blocks * 1e3:.2f} ms ({blocks:,} blocks, {wall:.1f} s)")
    NOTES.append(f"{n_persons:,} persons: time per block {wall / blocks * 1e3:.2f} ms ({blocks:,} blocks)")
    if compare and capture.problem is not None:
        line = _largest_node_line(capture.problem, res)
        print(line, flush=True)
        NOTES.append(f"{n_persons:,} persons: {line}")
    if spine:
        bench_spine(persons, workers, wall)


def bench_spine(persons: pd.DataFrame, workers: int | None, plain_wall: float) -> None:
    """The same persons and design on production's spine: a synthetic AIAN area (a tenth of the
    tracts, half their block groups) splitting the state and everything below it, block groups
    split by the group-quarters types present, single-child geounits bypassed."""
    from dpspec_topdown.geography.spine import gq_signatures
    from dpspec_topdown.synthetic import aian_blocks

    zeros, bounds = production_constraints(persons)
    n_tracts = max(1, persons["tract"].nunique() // 10)
    persons = persons.assign(
        aian=persons["block"].astype(str).isin(aian_blocks(persons, 2024, n_tracts)).astype(np.int64)
    )
    facilities = generate_facilities(persons, seed=1)
    counts = facilities.groupby(["block", "gqtype"]).size().rename("count").reset_index()
    signature = gq_signatures(counts, "block", "gqtype", list(range(1, 8)))
    t0 = time.perf_counter()
    res = run_topdown(
        Records(persons, bounds=bounds, gq_signature=signature),
        pl94_design(zeros, aian=("state", "aian"), bypass=["county", "tract", "blockgroup"]),
        RunContext(make_rng(1), workers=workers),
    )
    wall = time.perf_counter() - t0
    units = {lv.name: lv.n_units for lv in res.hierarchy.levels}
    bypassed = {name: int((cls < 0).sum()) for name, (cls, _, _) in res.budget_classes.items()}
    _report(
        "the same state on production's spine (AIAN split, GQ block groups, bypass)", res, wall, len(persons), persons
    )
    print(
        f"spine: {units} geounits; bypassed {bypassed}; {wall:.1f} s against {plain_wall:.1f} s "
        f"on the tabulation hierarchy ({wall / plain_wall:.2f}x)",
        flush=True,
    )


DHC_SPEC = ROOT / "specs" / "dhc_persons_production_topdown.dps"
DHC_LEVELS = ["nation", "state", "county", "prim", "tsg", "tsubset", "blockgroup", "block"]
PL94_FACTORS = ("hhgq8lev", "votingage", "hispanic", "cenrace")


def dhc_strategy():
    """(variables, level shares, strategy, recodes, rho, passes, structural zeros) as the DHC
    persons production spec states them."""
    spec = parse(DHC_SPEC.read_text(), str(DHC_SPEC))
    params = check(spec).params
    variables = topdown_tables._variables(spec, params)
    schema = topdown_tables._schema(spec, params)
    strategy = topdown_tables._strategy(params, topdown_tables._levels(spec), list(schema.names))
    return (
        variables,
        params["levels"],
        strategy,
        schema.recodes,
        params["rho"],
        topdown_passes._passes(params, list(schema.names)),
        topdown_tables._structural_zeros(params, variables),
    )


def pl94_design(zeros: dict | None = None, **extra) -> Design:
    """The P.L. 94 production design over nation > state > county > tract > block group > block
    (`extra`: the spine's aian and bypass, for the spine comparison)."""
    shares, strategy, recodes, rho, passes = production_strategy()
    return _design(["nation"] + LEVELS, PL94_VARIABLES, shares, strategy, recodes, rho, passes, zeros, **extra)


def dhc_design() -> Design:
    """The DHC persons production design, as its spec states it."""
    variables, shares, strategy, recodes, rho, passes, zeros = dhc_strategy()
    return _design(DHC_LEVELS, variables, shares, strategy, recodes, rho, passes, zeros)


def _design(levels, variables, shares, strategy, recodes, rho, passes, zeros, **extra) -> Design:
    """A production design: hamming distance, invariant state totals."""
    return Design(
        levels,
        variables,
        strategy,
        rho,
        shares,
        "hamming",
        [("state", ())],
        recodes=recodes,
        passes=passes,
        structural_zeros=zeros,
        **extra,
    )


def in_categories(persons: pd.DataFrame, variables: dict) -> pd.DataFrame:
    """The persons' variables in the spec's categories: an enum's are text ({0, 1, ...}), an int
    range's integers."""
    return persons.assign(
        **{c: persons[c].astype(str if isinstance(cats[0], str) else np.int64) for c, cats in variables.items()}
    )


def _pl94_product(micro: pd.DataFrame) -> pd.DataFrame:
    """A P.L. 94 release as the DHC run's equal_to product: block x hhgq8lev x votingage x
    hispanic x cenrace counts, in the DHC recodes' labels."""
    from make_dhc_synthetic import HHGQ8_LABELS

    frame = pd.DataFrame(
        {
            "block": micro["block"].astype(str),
            "hhgq8lev": np.array(HHGQ8_LABELS, dtype=object)[micro["hhgq"].astype(int).to_numpy()],
            "votingage": np.where(micro["votingage"].astype(int) == 1, "voting", "nonvoting"),
            "hispanic": micro["hispanic"].astype(int),
            "cenrace": micro["cenrace"].astype(int),
        }
    )
    return frame.groupby(["block", *PL94_FACTORS]).size().rename("count").reset_index()


def bench_dhc(n_persons: int, n_blocks: int, workers: int | None) -> None:
    """The P.L. 94 and the DHC persons strategies on the same persons (see the module doc)."""
    from dpspec.engine import local_engine_run
    from make_dhc_synthetic import dhc_from_pl94, spine_columns

    t0 = time.perf_counter()
    persons = spine_columns(dhc_from_pl94(generate_population(n_persons, n_blocks, seed=1), seed=2))
    print(f"\n== generated {n_persons:,} persons with DHC variables in {time.perf_counter() - t0:.1f} s", flush=True)
    blocks = persons["block"].nunique()
    clock = [0.0]
    progress = _progress(clock)
    zeros, bounds = production_constraints(persons)
    t1 = clock[0] = time.perf_counter()
    pl = run_topdown(
        Records(persons, bounds=bounds),
        pl94_design(zeros),
        RunContext(make_rng(1), engine=local_engine_run(1), progress=progress, workers=workers),
    )
    pl_wall = time.perf_counter() - t1
    _report(f"P.L. 94 persons strategy ({blocks:,} populated blocks)", pl, pl_wall, n_persons)
    pl_peak = _peak_mb(pl)[0]

    variables = dhc_strategy()[0]
    product = _pl94_product(pl.microdata)
    t1 = clock[0] = time.perf_counter()
    persons = in_categories(persons, variables)
    res = run_topdown(
        Records(persons, equalities=[("pl94", PL94_FACTORS, product)]),
        dhc_design(),
        RunContext(make_rng(1), engine=local_engine_run(2), progress=progress, workers=workers),
    )
    wall = time.perf_counter() - t1
    _report(f"DHC persons strategy, held to that P.L. 94 release ({blocks:,} populated blocks)", res, wall, n_persons)
    pl_io, dhc_io = _write_seconds(pl), _write_seconds(res)
    levels = res.timings["levels"]
    noise = sum(r.get("noise_seconds", 0.0) for r in levels.values())
    qp = sum(r.get("qp_seconds", 0.0) for r in levels.values())
    rounding = sum(r.get("rounding_seconds", 0.0) for r in levels.values())
    node = sum(r.get("node_seconds", 0.0) for r in levels.values())
    root = next(iter(levels))
    own, kids = _peak_mb(res)
    lines = [
        f"{n_persons:,} persons: DHC {wall:.1f} s against P.L. 94 {pl_wall:.1f} s ({wall / pl_wall:.1f}x); "
        f"per block {wall / blocks * 1e3:.0f} ms against {pl_wall / blocks * 1e3:.0f} ms ({blocks:,} blocks)",
        f"{n_persons:,} persons, DHC, where the time goes (summed over nodes, {node:.1f} s of node time in "
        f"{res.timings['workers']} worker(s)): noise {noise:.1f} s (drawn where the fits read it), least squares "
        f"{qp:.1f} s, rounding {rounding:.1f} s, the rest (building the problems) {node - noise - qp - rounding:.1f} s; "
        f"the root's node alone {levels[root].get('node_seconds', 0.0):.1f} s "
        f"({levels[root].get('max_variables', 0):,} variables); per level after the root "
        f"{(wall - levels[root].get('solve_seconds', 0.0)) / blocks * 1e3:.0f} ms per block",
        f"{n_persons:,} persons, DHC, per level (wall s, share of the run; nodes; the largest fit's variables): "
        + "; ".join(
            f"{name} {row.get('solve_seconds', 0.0):.1f} s, {row.get('solve_seconds', 0.0) / wall:.0%}; "
            f"{row.get('nodes', 0):,}; {row.get('max_variables', 0):,}"
            for name, row in levels.items()
        ),
        f"{n_persons:,} persons: I/O, writing the protected microdata as CSV: DHC {dhc_io:.1f} s, "
        f"P.L. 94 {pl_io:.1f} s (not in the run times above)",
        f"{n_persons:,} persons: peak memory {own:,.0f} MB main, {kids:,.0f} MB largest solver worker "
        f"(P.L. 94 run alone {pl_peak:,.0f} MB main)",
    ]
    for line in lines:
        print(line, flush=True)
        NOTES.append(line)


def _write_seconds(res) -> float:
    """Seconds to write the protected microdata as `dpspec compile` writes it (CSV, streamed)."""
    import tempfile

    from dpspec.publish.table_csv import write_table_csv

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        write_table_csv(res.microdata_table(), str(Path(d) / "persons.csv"))
        return time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=int, nargs="*", default=[1_000_000])
    ap.add_argument("--blocks-per-person", type=float, default=0.025)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--skip-acs", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-highs", action="store_true", help="do not time HiGHS on the largest node")
    ap.add_argument("--spine", action="store_true", help="run the synthetic state again on production's spine")
    ap.add_argument(
        "--strategy",
        choices=["pl94", "dhc"],
        default="pl94",
        help="dhc: the DHC persons strategy against P.L. 94 on the same persons",
    )
    doc_table.add_option(ap)
    args = ap.parse_args(argv)
    print(f"cores available: {len(os.sched_getaffinity(0))}")
    _noise_lower_bound()
    if not args.skip_acs:
        bench_acs(args.workers)
    if not args.skip_synthetic and args.strategy == "dhc":
        for n in args.persons:
            bench_dhc(n, max(10, int(n * args.blocks_per_person)), args.workers)
    elif not args.skip_synthetic:
        for n in args.persons:
            bench_synthetic(n, max(10, int(n * args.blocks_per_person)), args.workers, not args.skip_highs, args.spine)
    if args.strategy == "dhc":
        doc_table.write(
            "bench_topdown_dhc",
            "TopDown: the DHC persons strategy against P.L. 94 on the same persons",
            __doc__.split("\n\n")[-1].strip(),
            ["run", "persons", "cells", "workers", "wall s", "solvers' share", "peak MB main", "peak MB worker"],
            ROWS,
            notes=NOTES,
            enabled=not args.no_doc,
        )
        return
    doc_table.write(
        "bench_topdown",
        "TopDown: the ACS excerpt and synthetic states",
        __doc__.split("\n\n")[0],
        ["run", "persons", "cells", "workers", "wall s", "solvers' share", "peak MB main", "peak MB worker"],
        ROWS,
        notes=NOTES,
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
