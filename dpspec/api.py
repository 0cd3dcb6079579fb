"""The public surface for plugins: everything a mechanism or audit plugin may use from the core.

Plugins import from here (or from the top-level `dpspec` package), not from internals such as
`dpspec.check.checker` or `dpspec.check.data`, so the core can be reorganised without breaking them. Names
resolve on first use, so importing this module costs nothing: `dpspec --help` loads every
plugin, and must not load pandas on their behalf. Only layers below the CLI are served here.

`API_VERSION` is the contract's version; a plugin declares the one it was written against as
`DPSPEC_API = "1.1"` in its module (`dpspec.contract.versions`).
"""

from __future__ import annotations

import importlib
import warnings

from dpspec.contract.versions import API_VERSION, OLDEST_SERVED  # noqa: F401 (served: listed in __all__)


_WHERE = {
    # the contract
    "hookimpl": "dpspec.contract.hookspecs",
    "Mechanism": "dpspec.contract.mechanism",
    "NativeFlavor": "dpspec.contract.mechanism",
    "ParameterSchema": "dpspec.contract.mechanism",
    "ParamSpec": "dpspec.contract.mechanism",
    "Release": "dpspec.contract.mechanism",
    # (API 1.6) a diagnostic's path into the mechanism block -> its line and column; a path as a reader writes it
    "located": "dpspec.contract.params",
    "param_label": ("dpspec.contract.params", "label"),
    "RunContext": "dpspec.contract.mechanism",  # (API 1.6) what `Mechanism.run(spec, params, data, ctx)` is given
    "Section": "dpspec.contract",
    "BudgetSection": "dpspec.contract",  # (API 1.6) the dpspec_report_budget hook's
    "Rule": "dpspec.audit.base",
    "Finding": "dpspec.audit.base",
    # optional hooks' types: `dpspec verify` neighbours, `dpspec infer` likelihoods
    # declared key sets (API 1.2): what a release may be keyed by, from the spec and its public key files
    "OutputKeys": "dpspec.contract.mechanism",
    "ReleaseColumns": "dpspec.contract.mechanism",
    "declared_keys": "dpspec.check.keys",
    "declared_values": "dpspec.check.keys",
    "typed_keys": "dpspec.check.keys",
    # what the audit reads of a mechanism's design: clipping bounds, the parts its budget composes
    "ClippingBound": "dpspec.contract.mechanism",
    "ComposedPart": "dpspec.contract.mechanism",
    "ChangeOne": "dpspec.contract.mechanism",  # (API 1.6) Mechanism.change_one's answer
    # (API 1.7) the typed answers of the other optional hooks: power, budget_breakdown, semantics, sweep's two
    "Power": "dpspec.contract.results",  # (API 1.7) Mechanism.power's answer (dpspec infer --power)
    "BudgetBreakdown": "dpspec.contract.results",  # (API 1.7) Mechanism.budget_breakdown's answer
    "ExpectedError": "dpspec.contract.results",  # (API 1.7) one row of Mechanism.expected_error's answer
    "ComparedCounts": "dpspec.contract.results",  # (API 1.7) one table of Mechanism.compared_counts's answer
    "Semantics": "dpspec.contract.semantics",  # (API 1.7) Mechanism.semantics's answer, and its rows:
    "AttributeBudget": "dpspec.contract.semantics",  # (API 1.7)
    "AttributeQuery": "dpspec.contract.semantics",  # (API 1.7)
    "GeographyBudget": "dpspec.contract.semantics",  # (API 1.7)
    "SemanticsRow": "dpspec.contract.semantics",  # (API 1.7) a further row, in the mechanism's words
    "NeighbourPair": "dpspec.contract.mechanism",
    "CountLikelihood": "dpspec.contract.mechanism",
    # errors a plugin raises for the user to fix
    "DpspecError": "dpspec.errors",
    "SpecError": "dpspec.errors",
    "DataError": "dpspec.errors",
    "MechanismError": "dpspec.errors",
    "ConversionError": "dpspec.errors",
    "Diagnostic": "dpspec.errors",
    # reading and checking specs and their data
    "parse": "dpspec.language.parser",
    "read_source": "dpspec.language.parser",
    "load": ("dpspec.language.parser", "load_text_or_path"),  # what dpspec.load calls
    "check": "dpspec.check.checker",
    "CheckedSpec": "dpspec.check.checker",
    "load_table": "dpspec.check.data",
    "load_data": "dpspec.check.data",
    "resolve_path": "dpspec.check.data",
    "EngineTable": "dpspec.engine.table",  # a validated table the engine holds (Mechanism.engine_tables)
    "StreamedTable": "dpspec.contract.streamed",
    "frame_chunks": "dpspec.contract.streamed",  # a release written by chunks
    "write_csv_part": "dpspec.publish.table_csv",  # (API 1.7) a part of a table's file, for StreamedTable.write_parts
    "local_engine_run": "dpspec.engine",  # an engine of a mechanism's own when its caller gave none
    "keyed_rng": "dpspec.engine.base",
    "stream_position": "dpspec.engine.streams",  # a unit's stream, drawn or resumed anywhere
    # randomness, noise, budgets, messages
    "make_rng": "dpspec.run.compiler",
    "bernoulli": "dpspec.run.noise",
    "bernoulli_ratios": "dpspec.run.noise",
    "discrete_gaussian": "dpspec.run.noise",
    "discrete_laplace": "dpspec.run.noise",
    "bernoulli_exp": "dpspec.run.noise",
    # noise keyed per unit of work: cell i draws from its own stream (run key, key i), batched
    "keyed_discrete_gaussian": "dpspec.run.keyed_noise",
    "KeyColumns": "dpspec.engine.keyed_words",
    "shown": "dpspec.language.values",
    "exact_number": ("dpspec.sweep.grid", "number"),  # '0.05', '5%', '1/20' -> an exact Fraction (DpspecError if not)
    "report_progress": ("dpspec.progress", "report"),
    # the language's types and the progress channel, as modules (ir.Spec, progress.report, ...)
    "ir": ("dpspec.ir", None),
    "progress": ("dpspec.progress", None),
    # what a mechanism states about its budget
    "BudgetStatement": "dpspec.budget",
    "PureDP": "dpspec.budget",
    "ZCDP": "dpspec.budget",
    "PublicCondition": "dpspec.budget.statement",
    "json_number": "dpspec.budget.premetrics",
    # exact budgets (API 1.3): a number in outward-rounded interval arithmetic (+ - * /, ln, exp,
    # sqrt); `.upper()` is a certified upper bound as a Fraction, what a budget with a log states
    "interval": ("dpspec.budget.exact", "iv"),
    # Z-Pufferfish (seed 2): the class of distributions and Wasserstein sensitivities, as a module
    "pufferfish": ("dpspec.budget.pufferfish", None),
    # the exact samplers' companions: their laws and variances
    "as_fraction": "dpspec.run.noise",
    "effective_sigma2": "dpspec.run.noise",
    "discrete_gaussian_pmf": "dpspec.run.noise",
    "discrete_gaussian_logpmf": "dpspec.run.noise",
    "discrete_gaussian_variance": "dpspec.run.noise",
    # (API 1.x, additive) why an exact sampler would refuse a scale, or None: what `check` says, in the samplers' words
    "sampler_limit_problem": "dpspec.run.noise",
    # spec analysis and messages: what invariants imply, "did you mean"
    "implied_by": "dpspec.check.invariants",
    "unknown": "dpspec.language.diagnostics",
    # miniature datasets for a mechanism's own `neighbours` (dpspec verify)
    "miniature_rows": ("dpspec.verify.miniature", "miniature_rows"),
    "miniature_record": ("dpspec.verify.miniature", "record"),
    "typed_frame": ("dpspec.verify.miniature", "typed_frame"),
    "id_columns": ("dpspec.verify.miniature", "id_columns"),
    "same_universe": ("dpspec.verify.miniature", "same_universe"),
    "universe_queries": ("dpspec.verify.miniature", "universe_queries"),
    "generic_pairs": ("dpspec.verify.miniature", "generic_pairs"),
    # bounded reading: a path a plugin reads must be a regular file, never a device
    "LazyModule": "dpspec.lazy",
    "require_regular": "dpspec.language.reading",
    "NotRegularFile": "dpspec.language.reading",
    # exact Bernoulli(R·exp(-x)) for rational R, x: a float fast path, interval arithmetic in its doubt band
    "bernoulli_scaled_exp": "dpspec.run.noise",
    # post-processing: noisy counts projected onto nonnegative integers summing to a public total
    "project_to_total": "dpspec.run.projection",
    "project_with_threshold": "dpspec.run.projection",
    # what a run measures, stated where the noise is drawn (a no-op unless `dpspec verify --replay` records)
    "record_measurement": "dpspec.run.measurements",
    "record_adaptive_outputs": "dpspec.run.measurements",
    "record_adaptive_rows": "dpspec.run.measurements",
    "recording_now": "dpspec.run.measurements",
    # (additive) a command's text to the terminal with control and escape characters shown as markers, as the core's commands
    "echo": "dpspec.report.terminal",
    "terminal_text": "dpspec.report.bidi",
}

__all__ = sorted([*_WHERE, "API_VERSION", "OLDEST_SERVED"])
# names once served here, kept with a DeprecationWarning until plugin API 2.0: name -> (module, why)
_DEPRECATED = {
    "friendly": (
        "dpspec.cli.errors",
        "dpspec wraps the commands a plugin adds in its error handling "
        "itself; drop the decorator (a CLI helper has no place in the plugin API)",
    )
}


def __getattr__(name: str):
    if name in _DEPRECATED:
        module, why = _DEPRECATED[name]
        warnings.warn(
            f"dpspec.api.{name} is deprecated (removed in plugin API 2.0): {why}", DeprecationWarning, stacklevel=2
        )
        return getattr(importlib.import_module(module), name)
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
