"""Execution engines: where a mechanism's units of work run (this process, or Apache Spark).

    engine = get_engine("spark", master="local[2]")    # or "local" (the default)
    run = EngineRun(engine, streams.new_run_key(seed))
    out = run.map_groups(table, ["state", "size"], swap_stratum, stage="swap")

Mechanisms receive an `EngineRun` as `ctx.engine` of `Mechanism.run(spec, params, data, ctx)`; see
`dpspec.contract.mechanism.RunContext`.
"""

from __future__ import annotations

from dpspec.contract.mechanism import takes_engine, RunContext, call_run
from dpspec.engine.base import Engine, EngineRun, EngineUnavailable, UnitFailed
from dpspec.engine.local import LocalEngine
from dpspec.engine.streams import new_run_key, unit_rng
from dpspec.lazy import LazyModule

# imported on first use: `dpspec check` loads this module, not them
_spark = LazyModule("dpspec.engine.spark", "_spark", globals())

ENGINES = ("local", "spark")

__all__ = [
    "ENGINES",
    "Engine",
    "EngineRun",
    "EngineUnavailable",
    "LocalEngine",
    "UnitFailed",
    "get_engine",
    "local_engine_run",
    "new_run_key",
    "unit_rng",
]


def get_engine(engine=None, master: str | None = None, **options) -> Engine:
    """An engine from a name ("local", "spark") or an `Engine` instance (returned as is)."""
    if isinstance(engine, Engine):
        return engine
    name = engine or "local"
    if name == "local":
        if master is not None:
            raise ValueError("a Spark master URL needs the spark engine (engine='spark')")
        return LocalEngine()
    if name == "spark":
        return _spark.SparkEngine(master or "local[*]", **options)
    raise ValueError(f"unknown engine {name!r}: expected one of {', '.join(ENGINES)}")


def local_engine_run(run_key: int) -> EngineRun:
    """An `EngineRun` on a local engine of its own: for a mechanism called without an engine (an
    older caller, a test) that runs its units through the contract all the same."""
    return EngineRun(LocalEngine(), run_key)


def accepts_engine(mechanism) -> bool:
    """Whether a mechanism's run uses the engine (`dpspec.contract.mechanism.takes_engine`)."""
    return takes_engine(mechanism)


def run_mechanism(mechanism, spec, params: dict, data: dict, rng, engine_run: EngineRun, keep_truths: bool = False):
    """`mechanism.run` given one `RunContext` (its random source, this engine run, whether a sweep
    keeps the truths); a mechanism written before API 1.6 is called through the contract's adapter."""
    return call_run(mechanism, spec, params, data, RunContext(rng=rng, engine=engine_run, keep_truths=keep_truths))
