"""Execution engines: where a mechanism's units of work run (this process, or Apache Spark).

    engine = get_engine("spark", master="local[2]")    # or "local" (the default)
    run = EngineRun(engine, streams.new_run_key(seed))
    out = run.map_groups(table, ["state", "size"], swap_stratum, stage="swap")

Mechanisms receive an `EngineRun` through `Mechanism.run(..., engine=)`; see `dpspec.contract.mechanism`.
"""
from __future__ import annotations

from dpspec.engine.base import Engine, EngineRun, EngineUnavailable, UnitFailed
from dpspec.engine.local import LocalEngine
from dpspec.engine.streams import new_run_key, unit_rng

ENGINES = ("local", "spark")

__all__ = ["ENGINES", "Engine", "EngineRun", "EngineUnavailable", "LocalEngine", "UnitFailed",
           "get_engine", "local_engine_run", "new_run_key", "unit_rng"]


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
        from dpspec.engine.spark import SparkEngine

        return SparkEngine(master or "local[*]", **options)
    raise ValueError(f"unknown engine {name!r}: expected one of {', '.join(ENGINES)}")


def local_engine_run(run_key: int) -> EngineRun:
    """An `EngineRun` on a local engine of its own: for a mechanism called without an engine (an
    older caller, a test) that runs its units through the contract all the same."""
    return EngineRun(LocalEngine(), run_key)


def accepts_engine(mechanism) -> bool:
    """Whether a mechanism's `run` takes the optional `engine` argument (older plugins do not)."""
    import inspect

    try:
        params = inspect.signature(mechanism.run).parameters
    except (TypeError, ValueError):
        return False
    return "engine" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def accepts_truths(mechanism) -> bool:
    """Whether a mechanism's `run` takes the optional `keep_truths` argument (for `dpspec sweep`)."""
    import inspect

    try:
        return "keep_truths" in inspect.signature(mechanism.run).parameters
    except (TypeError, ValueError):
        return False


def run_mechanism(mechanism, spec, params: dict, data: dict, rng, engine_run: EngineRun, keep_truths: bool = False):
    """`mechanism.run`, handing it the engine only if it asks for one: existing plugins keep working.
    keep_truths (a sweep measuring realized error) is passed only to a `run` that names it."""
    extra = {"keep_truths": True} if keep_truths and accepts_truths(mechanism) else {}
    if accepts_engine(mechanism):
        return mechanism.run(spec, params, data, rng, engine=engine_run, **extra)
    return mechanism.run(spec, params, data, rng, **extra)
