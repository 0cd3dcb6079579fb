"""`dpspec sweep SPEC --vary NAME=VALUES ...`: a spec over a grid of its mechanism's parameters.

Writes one output set (`dpspec.publish.report_set`): sweep.csv, expected-error.csv and the
public report (budget and expected error), and with --runs the internal report and
realized-errors-internal.csv (errors against the confidential data). Exit 1 when the grid or a
point's spec is refused, or when a point failed (the others are still written).
"""

from __future__ import annotations

import os
import sys

import click

from dpspec.cli.terminal import echo
from dpspec.cli.engine import engine_option, master_option, engine_for
from dpspec.cli.errors import friendly
from dpspec.progress import StderrBar, reporting
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_parser = LazyModule("dpspec.language.parser", "_parser", globals())
_input_guard = LazyModule("dpspec.publish.input_guard", "_input_guard", globals())
_report_set = LazyModule("dpspec.publish.report_set", "_report_set", globals())
grid_mod = LazyModule("dpspec.sweep.grid", "grid_mod", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow, markupsafe with this module
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
report = LazyModule("dpspec.sweep.report", "report", globals())
_runner = LazyModule("dpspec.sweep.runner", "_runner", globals())


@click.command("sweep")
@click.argument("file", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option(
    "--vary",
    "vary",
    multiple=True,
    required=True,
    metavar="NAME=VALUES",
    help="a mechanism parameter and its values: 0.01,0.05 (a list), 0.1:0.5:0.1 (a range), "
    "log:1e-3:1:7 (a log-range), 1/20 or 5% (exact). Several --vary form a product grid. "
    "Nested names: queries.state.total, tables.t1.rho.nation.level2.",
)
@click.option(
    "--balance",
    "balance",
    multiple=True,
    metavar="NAME",
    help="set this share at every point so that its block sums to exactly 1 (e.g. levels.PUMA)",
)
@click.option(
    "--runs",
    type=click.IntRange(0, 10_000),
    default=0,
    show_default=True,
    help="runs of the mechanism per point, measured against the confidential data (internal report)",
)
@click.option(
    "-o",
    "--output",
    "outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="output directory (default: out/<spec name>-sweep)",
)
@click.option("--seed", type=int, default=None, help="make the runs reproducible (a sweep is never a release)")
@click.option(
    "--off-by",
    "off_by",
    type=click.FloatRange(0),
    default=5,
    show_default=True,
    help="a cell counts as 'off' when its realized error exceeds this many units",
)
@click.option("--delta", type=float, default=1e-10, show_default=True, help="delta of the common currency")
@click.option(
    "--conversion",
    type=click.Choice(["bs16", "cks20"]),
    default="cks20",
    show_default=True,
    help="zCDP to approximate DP conversion for the common currency",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="largest grid run without --yes [default: 100]")
@click.option("--yes", is_flag=True, help="run a grid larger than --limit")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="local processes running the points as units of work (each reads the data once)",
)
@click.option(
    "--units",
    type=click.Choice(["points", "mechanism"]),
    default="points",
    show_default=True,
    help="on Spark, the units of work: points (every point and run a task, each on one executor) or "
    "mechanism (points one by one, each run's mechanism spread over the cluster, for data no "
    "executor can hold)",
)
@engine_option
@master_option
@friendly
def sweep_cmd(
    file,
    vary,
    balance,
    runs,
    outdir,
    seed,
    off_by,
    delta,
    conversion,
    limit,
    yes,
    workers,
    units,
    engine_name,
    spark_master,
):
    """Run SPEC over a grid of mechanism parameters: budget, expected error and (--runs) realized error."""
    if not 0 < delta < 1:
        raise click.BadParameter("delta must lie strictly between 0 and 1", param_hint="--delta")
    spec = _parser.parse(_parser.read_source(file), file)
    axes = [grid_mod.parse_axis(v) for v in vary]
    grid_mod.check_size(grid_mod.size(axes), max(runs, 1), limit or grid_mod.DEFAULT_LIMIT, yes)  # before building it
    points = grid_mod.product(axes)
    outdir = outdir or os.path.join("out", os.path.splitext(os.path.basename(file))[0] + "-sweep")
    _input_guard.check_output_target(outdir, _input_guard.input_paths(spec))
    _output_set.refuse_release_folder(outdir, "sweep", itself=False)
    echo(f"sweeping {file}: {len(points)} point(s)" + (f" x {runs} run(s)" if runs else "") + " ...", err=True)
    with _output_set.claimed_target(outdir, "sweep"):
        with reporting(StderrBar()), engine_for(engine_name, spark_master) as engine:
            sweep = _runner.run_sweep(
                spec,
                axes,
                points,
                runs=runs,
                engine=engine,
                seed=seed,
                off_by=off_by,
                delta=delta,
                method=conversion,
                balance=balance,
                workers=workers,
                units=units,
            )
        written = _report_set.write_report_set(
            outdir,
            "sweep",
            report.files(sweep),
            {
                "spec": _report_set.spec_entry(spec),
                "data": {os.path.basename(k.rstrip("/")): {"sha256": v} for k, v in sweep.data_hashes.items()},
                "grid": {a.name: [str(v) for v in a.values] for a in axes},
                "runs": runs,
                "seed_policy": "known seed (not for publication)" if seed is not None else "fresh entropy",
            },
        )
    for p in sweep.points:
        if p.status != "ok":
            state = f"FAILED: {p.error}"
        elif p.bounds_hold is False:  # ran, but the spec's declared bound does not hold at this point
            state = "EXCEEDED: a declared budget bound does not hold"
        else:
            state = "ok"
        budget = p.budget_text or "-"
        common = f"; epsilon {p.common['epsilon']:.4g} at delta {p.common['delta']:g}" if p.common else ""
        echo(f"point {p.index} ({p.label()}): {budget}{common}  [{state}]")
    for kind, name in written.items():
        echo(f"wrote {os.path.join(outdir, name)}")
    if any(p.status != "ok" for p in sweep.points):
        echo(
            "error: some points failed; their parameters and messages are listed above and in the internal report",
            err=True,
        )
        sys.exit(1)
