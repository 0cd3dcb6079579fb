"""`dpspec infer SPEC RELEASE_DIR --target ...`: posterior inference on a compiled release."""

from __future__ import annotations

import json
import os

import click

from dpspec.cli.terminal import echo
from dpspec.cli.errors import friendly
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_input_guard = LazyModule("dpspec.publish.input_guard", "_input_guard", globals())
_parser = LazyModule("dpspec.language.parser", "_parser", globals())
_schemas = LazyModule("dpspec.schemas", "_schemas", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow, jinja2, markupsafe with this module
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_inference = LazyModule("dpspec.inference", "_inference", globals())
_power = LazyModule("dpspec.inference.power", "_power", globals())
_report = LazyModule("dpspec.inference.report", "_report", globals())


def _text(result) -> str:
    data = result.to_json()
    lines = [
        f"{data['spec']}: posterior of {data['target']}" + (" (rates)" if result.rate else ""),
        f"prior: {data['prior']}",
    ]
    if data["method"] == "rejection":
        lines.append(
            f"method: exact rejection sampling (Algorithm 1); acceptance rate {data['acceptance_rate']:.4g} "
            f"({data['proposals']:,} proposals, {data['draws']:,} draws)"
        )
    else:
        lines.append(
            f"method: importance sampling (Algorithm 2); effective sample size {data['effective_sample_size']:.1f} "
            f"of {data['proposals']:,} proposals (exact rejection's estimated acceptance rate "
            f"{'at most ' if result.acceptance_is_bound else ''}10^{data['log10_acceptance_rate_estimate']:.1f})"
        )
    lines += [f"note: {n}" for n in data["notes"]]
    width = max(len(c["cell"]) for c in data["cells"])
    lines.append(
        f"{'cell':<{width}}  {'mean':>10}  {'median':>8}  {'90% interval':>21}  {'95% interval':>21}  {'post-proc.':>10}"
    )
    for c in data["cells"]:

        def f(v):
            return "—" if v is None else f"{v:.4g}"

        lines.append(
            f"{c['cell']:<{width}}  {f(c['mean']):>10}  {f(c['median']):>8}  "
            f"{'[' + f(c['q05']) + ', ' + f(c['q95']) + ']':>21}  {'[' + f(c['q025']) + ', ' + f(c['q975']) + ']':>21}  "
            f"{f(c['post_processed']):>10}"
        )
    con = data["contractions"]
    if con.get("checked"):
        lines.append(
            f"post-processing contracted {len(con['zeros'])} cell(s) to 0 and {len(con['bounds'])} to their upper "
            "bound where the 95% interval holds other values"
        )
    for u in data["left_out"]:
        lines.append(f"left out: {u}")
    if result.power is not None:
        lines += _power_text(result.power)
    return "\n".join(lines)


def _power_text(p: dict) -> list[str]:
    side = ">" if p["direction"] == "greater" else "<"
    return [
        f"power ({p['theorem']}): the level-{p['level']:g} test of {p['column']} {p['cell']}'s count = {p['null']:,} "
        f"against {side} {p['null']:,}, at {p['alternative']:,}",
        f"  on the release Y:          power {p['power_release']:.6f} (size {p['size_release']:.6f}); "
        f"Y = {p['released']:,}, rejected with probability {p['reject_probability_release']:.4g}",
        f"  on f(Y) = min(Y, {p['total']:,}):  power {p['power_post_processed']:.6f} "
        f"(size {p['size_post_processed']:.6f}); f(Y) = {p['post_processed_value']:,}, rejected with probability "
        f"{p['reject_probability_post_processed']:.4g}",
        f"  f is the post-processing with Z: {p['post_processing']}",
        f"  {p['note']}",
    ]


def _check_outdir(outdir: str, spec, release_dir: str, prior: str | None) -> None:
    """Refuse an output folder that is, holds or sits inside an input: spec, data, prior, release."""
    inputs = _input_guard.input_paths(spec)
    if prior and not prior.startswith("dirichlet-multinomial"):  # a prior CSV, as make_prior finds it
        inputs += [p for p in {prior, os.path.join(spec.base_dir, prior)} if os.path.isfile(p)]
    _input_guard.check_output_target(outdir, inputs, folders=[release_dir])
    _output_set.refuse_release_folder(
        outdir, "infer", itself=False
    )  # never a set inside another set; the folder itself: claimed_target


@click.command("infer")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("release_dir", type=click.Path(file_okay=False))
@click.option("--target", required=True, help='A count query, e.g. "count persons by PUMA, HISP".')
@click.option("--rate", is_flag=True, help="Report each cell as a share of its row (all target columns but the last).")
@click.option(
    "--prior",
    default=None,
    help="dirichlet-multinomial[:A] (default A = 1) or a CSV of the target's columns and alpha.",
)
@click.option("--draws", type=int, default=2000, show_default=True, help="Posterior draws to produce.")
@click.option(
    "--method",
    type=click.Choice(["rejection", "importance"]),
    default="rejection",
    show_default=True,
    help="Exact rejection (falls back to importance sampling when too costly) or importance sampling.",
)
@click.option("--seed", type=int, default=None, help="Seed the sampler (reproducible draws).")
@click.option(
    "--power",
    "power_request",
    default=None,
    metavar="CELL:H0:H1",
    help="Also report seed 2's Theorem 15 on one released cell: the power at count H1 of the level test of "
    "count H0, from the release and from the release post-processed with Z.",
)
@click.option("--level", type=float, default=0.05, show_default=True, help="With --power: the test's level.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "-o",
    "--output",
    "outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write report.html, report.md, result.json, draws.csv and manifest.json here, as one set.",
)
@friendly
def infer_cmd(spec, release_dir, target, rate, prior, draws, method, seed, power_request, level, as_json, outdir):
    """Posterior of TARGET given the release in RELEASE_DIR and the spec's public information."""
    parsed = _parser.parse(_parser.read_source(spec), spec)
    if outdir:  # before sampling: the reports never land in, over or around an input or the release
        _check_outdir(outdir, parsed, release_dir, prior)
    with _output_set.claimed_target(
        outdir, "infer"
    ):  # locked for the whole run; the set is swapped in whole at the end
        if power_request is None and level != 0.05:
            raise click.UsageError("--level goes with --power")
        found = None
        if power_request is not None:  # before sampling: a refusal comes at once
            found = _power.power(parsed, release_dir, power_request, level)
        result = _inference.infer(
            parsed, release_dir, target, prior=prior, draws=draws, method=method, seed=seed, rate=rate
        )
        result.power = found
        if outdir:
            written = _report.write_report(result, outdir, parsed, release_dir)
            if not as_json:
                for name in written.values():
                    echo(f"wrote {outdir}/{name}", err=True)
    if as_json:
        echo(json.dumps(_schemas.versioned("inference", result.to_json()), indent=2, default=float))
    else:
        echo(_text(result))
