"""`dpspec verify SPEC`: the empirical test of a mechanism's claimed budget, on the command line.

Exit codes: 0 consistent, 1 refuted (or a spec the user must fix), 3 a mechanism whose code crashes, 4 inconclusive.
"""

from __future__ import annotations

import json
import sys

import click

from dpspec.cli.terminal import echo
from dpspec.cli.errors import friendly
from dpspec.progress import StderrBar, reporting
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_parser = LazyModule("dpspec.language.parser", "_parser", globals())
_schemas = LazyModule("dpspec.schemas", "_schemas", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_verify = LazyModule("dpspec.verify", "_verify", globals())
_replay_2 = LazyModule("dpspec.verify.replay", "_replay_2", globals())


@click.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--runs",
    type=click.IntRange(2, 100_000_000),
    default=None,
    help="Runs of the mechanism on each dataset of each neighbouring pair (default 20,000).",
)
@click.option("--seed", type=int, default=None, help="Make the test reproducible.")
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence of the lower bound.",
)
@click.option("--json", "as_json", is_flag=True, help="The result as JSON (for `audit`/`compile --verify FILE`).")
@click.option(
    "--replay",
    is_flag=True,
    help="Replay the mechanism on the spec's data and neighbours of it, and report "
    "differences in what it measures and releases (exit 0 clean, 1 findings).",
)
@click.option(
    "--neighbours",
    type=click.IntRange(1, 1000),
    default=None,
    help="With --replay: how many neighbouring datasets (default 6).",
)
@click.option(
    "--sample",
    type=click.IntRange(2, None),
    default=None,
    help="With --replay: a seeded sample of this many records of a one-table spec, for big data.",
)
@friendly
def verify_cmd(file, runs, seed, confidence, as_json, replay, neighbours, sample):
    """Test FILE's mechanism empirically against its claimed budget (exit 0 consistent, 1 refuted, 4 inconclusive),
    or, with --replay, replay it on neighbouring datasets (exit 0 clean, 1 findings)."""
    spec = _parser.parse(_parser.read_source(file), file)
    if not replay and (neighbours is not None or sample is not None):
        raise click.UsageError("--neighbours and --sample go with --replay")
    if replay:
        _replay(spec, neighbours, seed, sample, as_json, runs)
        return
    with reporting(StderrBar()):
        result = _verify.verify(spec, runs=runs or _verify.DEFAULT_RUNS, seed=seed, confidence=confidence)
    if as_json:
        echo(json.dumps(_schemas.versioned("verification", result.to_json()), indent=2))
    else:
        echo(result.text())
    sys.exit(result.exit_code)


def _replay(spec, neighbours, seed, sample, as_json, runs):
    if runs is not None:
        raise click.UsageError("--runs is for the empirical test; a replay runs the mechanism once per dataset")
    result = _replay_2.replay(
        spec, neighbours=neighbours or _replay_2.DEFAULT_NEIGHBOURS, seed=0 if seed is None else seed, sample=sample
    )
    if as_json:
        echo(json.dumps(_schemas.versioned("replay", result.to_json()), indent=2))
    else:
        echo(result.text())
    sys.exit(result.exit_code)


def verification_option(func):
    """`--verify FILE` for `audit` and `compile`: attach a `dpspec verify --json` result."""
    return click.option(
        "--verify",
        "verify_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="A result file from `dpspec verify --json` for this spec; a refuted claim is a critical finding.",
    )(func)
