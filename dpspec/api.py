"""The public surface for plugins: everything a mechanism or audit plugin may use from the core.

Plugins import from here (or from the top-level `dpspec` package), not from internals such as
`dpspec.checker` or `dpspec.data`, so the core can be reorganised without breaking them. Names
resolve on first use, so importing this module costs nothing: `dpspec --help` loads every
plugin, and must not load pandas on their behalf.
"""
from __future__ import annotations

import importlib

_WHERE = {
    # the contract
    "hookimpl": "dpspec.hookspecs", "Mechanism": "dpspec.mechanism", "NativeFlavor": "dpspec.mechanism",
    "ParameterSchema": "dpspec.mechanism", "ParamSpec": "dpspec.mechanism", "Release": "dpspec.mechanism",
    "Section": "dpspec.contract", "Rule": "dpspec.audit.base", "Finding": "dpspec.audit.base",
    # optional hooks' types: `dpspec verify` neighbours, `dpspec infer` likelihoods
    "NeighbourPair": "dpspec.mechanism", "CountLikelihood": "dpspec.mechanism",
    # errors a plugin raises for the user to fix
    "DpspecError": "dpspec.errors", "SpecError": "dpspec.errors", "DataError": "dpspec.errors",
    "MechanismError": "dpspec.errors", "ConversionError": "dpspec.errors", "Diagnostic": "dpspec.errors",
    # reading and checking specs and their data
    "parse": "dpspec.parser", "read_source": "dpspec.parser", "load": "dpspec",
    "check": "dpspec.checker", "CheckedSpec": "dpspec.checker",
    "load_table": "dpspec.data", "load_data": "dpspec.data", "resolve_path": "dpspec.data",
    # randomness, noise, budgets, messages
    "make_rng": "dpspec.compiler", "bernoulli": "dpspec.noise", "discrete_gaussian": "dpspec.noise",
    "discrete_laplace": "dpspec.noise", "shown": "dpspec.values", "friendly": "dpspec.cli_errors",
    "report_progress": ("dpspec.progress", "report"),
    # the language's types and the progress channel, as modules (ir.Spec, progress.report, ...)
    "ir": ("dpspec.ir", None), "progress": ("dpspec.progress", None),
    # what a mechanism states about its budget
    "BudgetStatement": "dpspec.budget", "PureDP": "dpspec.budget", "ZCDP": "dpspec.budget",
    "PublicCondition": "dpspec.budget.statement", "json_number": "dpspec.budget.premetrics",
    # the exact samplers' companions: their laws and variances
    "as_fraction": "dpspec.noise", "effective_sigma2": "dpspec.noise", "discrete_gaussian_pmf": "dpspec.noise",
    "discrete_gaussian_logpmf": "dpspec.noise", "discrete_gaussian_variance": "dpspec.noise",
    # spec analysis and messages: what invariants imply, "did you mean"
    "implied_by": "dpspec.invariants", "unknown": "dpspec.diagnostics",
    # miniature datasets for a mechanism's own `neighbours` (dpspec verify)
    "miniature_rows": ("dpspec.verify.miniature", "miniature_rows"),
    "miniature_record": ("dpspec.verify.miniature", "record"),
    "typed_frame": ("dpspec.verify.miniature", "typed_frame"),
    "id_columns": ("dpspec.verify.miniature", "id_columns"),
    "same_universe": ("dpspec.verify.miniature", "same_universe"),
    "universe_queries": ("dpspec.verify.miniature", "universe_queries"),
    "generic_pairs": ("dpspec.verify.miniature", "generic_pairs"),
    # bounded reading: a path a plugin reads must be a regular file, never a device
    "require_regular": "dpspec.reading", "NotRegularFile": "dpspec.reading",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'dpspec.api' has no attribute {name!r}")
    module, attr = where if isinstance(where, tuple) else (where, name)
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
