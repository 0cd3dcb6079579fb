"""The command line's side of engines: `--engine` / `--spark-master`, and their failures (exit 2)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click

from dpspec.cli.terminal import echo
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_engine = LazyModule("dpspec.engine", "_engine", globals())

# The engine names, spelled here so `dpspec --help` does not import pandas (a test keeps them in
# step with dpspec.engine.ENGINES).
ENGINES = ("local", "spark")

engine_option = click.option(
    "--engine",
    "engine_name",
    type=click.Choice(ENGINES),
    default="local",
    show_default=True,
    help="Where the mechanism's units of work run: in this process, or on Apache Spark.",
)
master_option = click.option(
    "--spark-master",
    "spark_master",
    default=None,
    metavar="URL",
    help="Spark master for --engine spark: local[N] (default local[*]), spark://HOST:PORT, k8s://URL, yarn.",
)


@contextmanager
def engine_for(name: str, master: str | None):
    """The chosen engine, stopped afterwards; an engine that cannot start exits with status 2."""
    if master is not None and name != "spark":
        raise click.UsageError("--spark-master needs --engine spark")
    engine = None
    try:
        engine = _engine.get_engine(name, master)
        yield engine
    except _engine.EngineUnavailable as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(2)
    finally:
        if engine is not None:
            engine.close()


def engine_note(result, engine_name: str) -> str | None:
    """A note when the chosen engine had nothing to run: the mechanism does not use engines."""
    if engine_name != "local" and not _engine.accepts_engine(result.mechanism):
        return (
            f"note: mechanism '{result.mechanism.name}' does not use the execution engine yet; "
            f"it ran in this process, not on {engine_name}"
        )
    return None
