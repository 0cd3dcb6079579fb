"""`dpspec verify SPEC`: the empirical test of a mechanism's claimed budget, on the command line.

Exit codes: 0 consistent, 1 refuted (or a spec the user must fix), 3 a mechanism whose code crashes, 4 inconclusive.
"""
from __future__ import annotations

import json
import sys

import click

from dpspec.cli.errors import friendly


@click.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--runs", type=click.IntRange(2, 100_000_000), default=None,
              help="Runs of the mechanism on each dataset of each neighbouring pair (default 20,000).")
@click.option("--seed", type=int, default=None, help="Make the test reproducible.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="Confidence of the lower bound.")
@click.option("--json", "as_json", is_flag=True, help="The result as JSON (for `audit`/`compile --verify FILE`).")
@friendly
def verify_cmd(file, runs, seed, confidence, as_json):
    """Test FILE's mechanism empirically against its claimed budget (exit 0 consistent, 1 refuted, 4 inconclusive)."""
    from dpspec.language.parser import parse, read_source
    from dpspec.run.progress import StderrBar, reporting
    from dpspec.verify import DEFAULT_RUNS, verify

    spec = parse(read_source(file), file)
    with reporting(StderrBar()):
        result = verify(spec, runs=runs or DEFAULT_RUNS, seed=seed, confidence=confidence)
    if as_json:
        from dpspec.schemas import versioned

        click.echo(json.dumps(versioned("verification", result.to_json()), indent=2))
    else:
        click.echo(result.text())
    sys.exit(result.exit_code)


def verification_option(func):
    """`--verify FILE` for `audit` and `compile`: attach a `dpspec verify --json` result."""
    return click.option("--verify", "verify_file", type=click.Path(dir_okay=False), default=None,
                        help="A result file from `dpspec verify --json` for this spec; a refuted claim is a critical finding.")(func)
