"""Loading the user's entry point and reading an OpenDP measurement's (or Context query's) domain, metric, measure and map."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys

import attrs

from dpspec.api import LazyModule, MechanismError

dp = LazyModule("opendp.prelude", "dp", globals())  # imported by a compile, never by check

# OpenDP's names for the spec's blocks: the column's type, the unit's relation, the premetric.
ATOMS = {
    "int": ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "usize"),
    "float": ("f32", "f64"),
    "category": ("String",),
    "enum": ("String",),
    "bool": ("bool",),
}
METRICS = {
    "SymmetricDistance()": "symdiff",
    "InsertDeleteDistance()": "symdiff",
    "ChangeOneDistance()": "hamming",
    "HammingDistance()": "hamming",
}
MEASURES = {"MaxDivergence": "pure", "ZeroConcentratedDivergence": "zcdp", "Approximate(MaxDivergence)": "approx"}


@attrs.frozen
class Loaded:
    """What the entry point gave: a measurement, or an OpenDP Context query with the measurement it
    resolves to and the Context it is released through (None for a query made without one)."""

    measurement: object
    query: object = None
    context: object = None


def takes_data(func) -> bool:
    """Whether the entry point takes the column's values (to build an OpenDP Context on them)."""
    try:
        return len(inspect.signature(func).parameters) >= 1
    except (TypeError, ValueError):
        return False


def load(entry: str, base_dir: str, values=None) -> Loaded:
    """Call `module:function` (the module found beside the spec first) and return its measurement,
    or its Context query resolved. A function with one parameter is given the column's values (a
    list), so it can build `dp.Context.compositor(data=...)` and return `context.query()...`."""
    module_name, _, func_name = entry.partition(":")
    try:
        importlib.import_module("opendp.prelude")
    except ImportError:
        raise MechanismError("opendp: the opendp mechanism needs OpenDP 0.16: pip install 'dpspec[opendp]'") from None
    beside = os.path.join(base_dir, *module_name.split(".")) + ".py"
    try:
        module = _from_file(module_name, beside) if os.path.isfile(beside) else importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure is theirs to fix, reported as such
        raise MechanismError(
            f"opendp: cannot import {module_name!r} (from {os.path.abspath(base_dir)} or the "
            f"installed packages): {type(exc).__name__}: {exc}"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise MechanismError(f"opendp: {module_name!r} has no function {func_name!r}")
    try:
        made = func(list(values or [])) if takes_data(func) else func()
    except Exception as exc:
        raise MechanismError(f"opendp: the entry point {entry} raised {type(exc).__name__}: {exc}") from None
    if isinstance(made, dp.Measurement):
        return Loaded(made)
    if isinstance(made, dp.Query):
        try:
            meas = made.resolve()
        except Exception as exc:
            raise MechanismError(
                f"opendp: the Context query the entry point {entry} returned does not resolve to a "
                f"measurement: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(meas, dp.Measurement):
            raise MechanismError(
                f"opendp: the query the entry point {entry} returned resolves to "
                f"{type(meas).__name__}, not an OpenDP Measurement"
            )
        # OpenDP keeps a query's Context on `_context` (what `query.release()` submits to); no public accessor
        return Loaded(meas, made, getattr(made, "_context", None))
    raise MechanismError(
        f"opendp: the entry point {entry} returned {type(made).__name__}, not an OpenDP Measurement or Context query"
    )


def _from_file(name: str, path: str):
    """The module at `path`, freshly executed: the file beside this spec, not one of the same name
    imported earlier (from another spec, or cached in this process)."""
    spec = importlib.util.spec_from_file_location(f"dpspec_opendp_user.{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # its own sibling imports resolve beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


def element_type(meas) -> str | None:
    """'i32' for VectorDomain(AtomDomain(T=i32)); None for any other input domain."""
    text = str(meas.input_domain)
    prefix, suffix = "VectorDomain(AtomDomain(T=", "))"
    if text.startswith(prefix) and text.endswith(suffix):
        return text[len(prefix) : -len(suffix)].split(",")[0].strip()
    return None


def claim(meas, d_in: int, premetric: str, what: str = "the measurement") -> dict:
    """The library's privacy map at d_in, as a budget of the premetric."""
    try:
        value = meas.map(d_in)
    except Exception as exc:
        raise MechanismError(f"opendp: {what}'s privacy map failed at d_in = {d_in}: {exc}") from None
    if premetric == "approx":
        eps, delta = value
        return {"epsilon": float(eps), "delta": float(delta)}
    return {"epsilon" if premetric == "pure" else "rho": float(value)}
