"""What a mechanism plugin provides: typed parameters, native flavor, invariants, budget, run.

A plugin subclasses `Mechanism` and returns instances from the `dpspec_mechanisms` hook. The
core validates a spec's `mechanism` block against `parameters`, nested settings too
(`dpspec.contract.params`), then calls the methods below with the resolved parameter values
(a plain dict), so plugins never re-parse the IR.
"""

from __future__ import annotations

import inspect
import warnings
from fractions import Fraction
from typing import Any

import attrs

from dpspec import ir, progress
from dpspec.contract.params import PARAM_TYPES, ParameterSchema, ParamSpec, resolve_params  # noqa: F401 (served here as before)
from dpspec.contract.results import BudgetBreakdown, ComparedCounts, ExpectedError, Power, warn_old_shape
from dpspec.contract.semantics import Semantics
from dpspec.errors import Diagnostic
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())  # every plugin imports this module, and `check` needs no numpy


@attrs.frozen
class NativeFlavor:
    """The flavor a mechanism satisfies by construction: a relation on one table's units and a
    premetric. The compiler converts its budget to the spec's declared flavor (and says how)."""

    table: str
    relation: str  # "hamming" or "symdiff"
    premetric: str  # "pure", "approx", "zcdp", "renyi", "gdp"


@attrs.frozen
class Release:
    """What a run produced.

    outputs: the published frames by name (microdata tables use their table's name).
    facts: public facts the report may show (functions of the invariants, parameters).
    internal: figures computed against the confidential data (utility); never in the public
    report. One key has a meaning outside the plugin: "observed_ranges", {"table.column":
    (min, max)} of each confidential column the mechanism clips (`clipping_bounds`), which the
    audit's `clipping-from-data` rule compares with the declared bounds of a compiled release.
    """

    outputs: dict[str, Any]
    facts: dict[str, Any] = attrs.Factory(dict)
    internal: dict[str, Any] = attrs.Factory(dict)
    notes: tuple[str, ...] = ()


@attrs.frozen
class OutputKeys:
    """What one output's rows are keyed by, declared before the run (`Mechanism.output_keys`).

    table, columns: the output has one row per declared combination of these columns of `table`
    (every cell, empty ones with their noisy values), and no other rows' keys; the compiler
    builds the declared combinations (`dpspec.api.declared_keys`) and compares. fixed: columns
    that hold one declared value on every row (the released period). records: the rows are
    records (microdata, one per unit; how many is an invariant or paid for), not cells, so the
    output has no key set to compare. An output no `OutputKeys` names is checked by its columns
    named as the mechanism table's categorical columns (see `dpspec.run.key_check`).
    """

    table: str
    columns: tuple[str, ...] = ()
    fixed: dict = attrs.field(factory=dict, converter=dict)
    records: bool = False


@attrs.frozen
class ReleaseColumns:
    """What one published table must hold to be read back (`Mechanism.release_columns`, API 1.5),
    declared from the spec alone: `dpspec infer` checks a release against it before any likelihood
    reads it. columns: every column a reader needs; key: the columns naming one measured cell (each
    combination once: a repeated measurement would count as independent evidence); numbers: the
    published numbers (finite, at most 2^53 in magnitude); implied(frame) -> {column: bool array}:
    per row, whether the value agrees with what the spec implies (the noise variance of its query).
    declared_rows() -> DataFrame (API 1.6): the `key` columns of every row the table must hold, one
    per measured cell, from the spec and public data alone (or None when they cannot say): a
    release read back must hold each of them and no other, so a deleted measurement row is refused
    (`dpspec.run.key_check.check_declared_rows`). Use it when the rows are no product of declared
    columns that `output_keys` could name (TopDown's: per level, its units times each query's cells)."""

    columns: tuple[str, ...]
    key: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    implied: Any = None
    declared_rows: Any = None


@attrs.frozen
class ClippingBound:
    """A bound a mechanism clips a confidential column to, as its parameters declare it
    (`Mechanism.clipping_bounds`): values outside [low, high] count as the nearest bound."""

    query: str
    table: str
    column: str
    low: Fraction
    high: Fraction


@attrs.frozen
class ComposedPart:
    """One measurement a mechanism composes sequentially into its budget (`Mechanism.composed_parts`):
    its name and the budget it spends in the native flavor's parameter (epsilon or rho)."""

    name: str
    budget: Fraction


@attrs.frozen
class ChangeOne:
    """A mechanism's own budget for changing one record of its native table (`Mechanism.change_one`,
    API 1.6): `budget` in its native flavor, and `reason`, the sentence saying why it is tighter
    than group privacy's two add/remove steps."""

    budget: Any
    reason: str


def change_one_result(value, mechanism) -> ChangeOne | None:
    """`Mechanism.change_one`'s answer as a `ChangeOne`; the (budget, reason) tuple of API 1.5 and
    earlier is still read, with a DeprecationWarning naming the class."""
    if value is None or isinstance(value, ChangeOne):
        return value
    warn_old_shape(mechanism, "change_one", "a (budget, reason) tuple", "dpspec.api.ChangeOne(budget, reason)")
    budget, reason = value
    return ChangeOne(budget, reason)


# ---- empirical verification (optional; used by `dpspec verify`) ---------------------------


@attrs.frozen
class NeighbourPair:
    """Two neighbouring miniature datasets in one universe, and what to look at in the outputs.

    left, right: {table: DataFrame}, typed as the domain says; the declared invariants must agree
    on both (the verifier checks). distance: d_X between them under the spec's relation (the
    claim is scaled by group privacy when it exceeds 1). params: the mechanism's parameters for
    this miniature instance (None: the spec's), e.g. a larger noise scale so the claim is small
    enough to test. statistic(release) -> 1-D numbers: what the events look at (None: every
    published output, flattened). batch(data, n, rng) -> (n, k) array: n runs at once, each
    row the statistic of one run (None: `run` is called n times).
    """

    label: str
    left: dict
    right: dict
    distance: int = 1
    params: dict | None = None
    statistic: Any = None
    batch: Any = None


# ---- the mechanism contract ----------------------------------------------------------------


class Mechanism:
    """Base class for mechanism plugins; override the methods, keep the signatures."""

    name: str = ""
    version: str = "0"
    description: str = ""
    parameters: ParameterSchema = ParameterSchema(())
    outputs: dict[str, str] = {}
    # The evidence a report's "algorithms" section cites (API 1.3; empty: the report says "not
    # stated"): where the guarantee is proved, and how the randomness is drawn (exact integer
    # samplers, or floating point).
    proof: str = ""
    sampling: str = ""
    # (API 1.5) Set by a mechanism that draws its noise from a library's own generator, which
    # dpspec's keyed ChaCha20 streams and --seed do not reach (Tumult, OpenDP): the manifest,
    # certificate and report name it as the release's random source instead of dpspec's.
    own_random_source: str = ""
    # Opt-in: True when `run` can take a table held by the engine (`ctx.engine`). A
    # table whose source is Parquet (a file or a hive-partitioned directory) then reaches `run`
    # as a `dpspec.api.EngineTable`, read and validated by the engine (on Spark nothing
    # row-level reaches the driver): count it with `engine.count(table, by)`. Other tables, and
    # every table of a mechanism that leaves this False, arrive as validated pandas frames.
    engine_tables: bool = False
    # (API 1.6) True: `run` takes one context object, `run(spec, params, data, ctx)` with a
    # `RunContext` (random source, engine, progress, keep_truths). False: a plugin written to
    # API 1.1-1.5, called as `run(spec, params, data, rng[, engine=][, keep_truths=])` through
    # an adapter that warns (DeprecationWarning) until plugin API 2.0.
    run_context: bool = False
    # (API 1.6) True when such a `run` works through `ctx.engine` (units of work, counts): on
    # Spark its units run there. False: `dpspec compile --engine spark` notes that the run
    # stayed in this process. (A mechanism written before API 1.6 uses the engine when its
    # `run` names `engine`.)
    uses_engine: bool = False

    def check(self, spec: ir.Spec, params: dict) -> list[Diagnostic]:
        """Extra semantic checks beyond the schema (e.g. columns disjoint). Return problems."""
        return []

    def flavor(self, spec: ir.Spec, params: dict) -> NativeFlavor:
        raise NotImplementedError

    def induced_invariants(self, spec: ir.Spec, params: dict) -> list[ir.CountQuery]:
        """Statistics this mechanism publishes exactly for these parameters."""
        return []

    def output_keys(self, spec: ir.Spec, params: dict) -> dict[str, "OutputKeys"]:
        """The key set of each output, from declared values only (never from the data): `dpspec
        check` refuses a keying column whose values are not declared, and the compiler stops a run
        whose released keys differ from these, publishing nothing. Outputs left out are checked by
        their categorical columns (`OutputKeys`)."""
        return {}

    def release_columns(self, spec: ir.Spec, params: dict) -> dict[str, ReleaseColumns]:
        """Optional (API 1.4): the columns, cell key and implied values of each published table its
        `likelihood` reads, from declared information only; `dpspec infer` refuses a release that
        does not hold them before the likelihood runs. Tables left out get the generic number check."""
        return {}

    def cannot_run(self, spec: ir.Spec, params: dict) -> str | None:
        """Optional: why this mechanism has nothing to run (a budget recorded, not an algorithm).

        Compile refuses with this sentence before it reads any data."""
        return None

    def opendp_script(self, spec: ir.Spec, params: dict) -> str | None:
        """Optional: the body of a Python script that builds this mechanism as an OpenDP measurement.

        The body binds `measurement` (an OpenDP Measurement) and `d_in` (the spec's unit in its
        input metric); `dpspec export --opendp` wraps it into a script that prints the privacy map
        at d_in as JSON, so the release can be cross-run in the library. None: not expressible."""
        return None

    def public_facts(self, spec: ir.Spec, params: dict, data: dict) -> dict:
        """Facts the budget depends on; must be functions of the invariants (or public)."""
        return {}

    def fact_labels(self, spec: ir.Spec, params: dict) -> dict[str, str]:
        """Optional: a plain label, with its unit, for each key of `public_facts` (and for the
        columns of a fact that is a list of records, as 'fact.column'), so the public report shows
        readable words instead of keys. Unlabelled keys are shown as their words."""
        return {}

    def budget(self, spec: ir.Spec, params: dict, facts: dict):
        """A `dpspec.budget.BudgetStatement` under `flavor()`."""
        raise NotImplementedError

    def clipping_bounds(self, spec: ir.Spec, params: dict) -> list[ClippingBound]:
        """Optional: the declared bounds each clipped confidential column is clipped to, for the
        audit (`clipping-from-data` compares them with the data's extremes). Empty: nothing is clipped."""
        return []

    def composed_parts(self, spec: ir.Spec, params: dict) -> list[ComposedPart]:
        """Optional: the measurements whose budgets add up (sequential composition) to the
        mechanism's, for the audit (`per-query-budget` flags a stated figure that is one part's
        share). Empty: the mechanism does not say how its budget is split."""
        return []

    def budget_breakdown(self, spec: ir.Spec, params: dict) -> BudgetBreakdown:
        """Extra keys for `dpspec budget --json` showing how the budget is split, a
        `BudgetBreakdown({key: figures})` (API 1.7; e.g. TopDown's per level and query
        ``allocation``); must not need the data. (The dict of API 1.6 is still read, with a
        DeprecationWarning.)"""
        return BudgetBreakdown()

    def semantics(self, spec: ir.Spec, params: dict) -> Semantics | None:
        """Optional: the budget that protects each attribute and each geography (the 2020
        certificates' "per-attribute semantics"), for mechanisms whose queries have attribute
        structure: a `Semantics` (API 1.7) of `AttributeBudget(attribute, rho, queries)`s and
        `GeographyBudget(within, finest, levels, rho)`s with exact zCDP rhos in the native flavor,
        and `further` rows, {key: `SemanticsRow(levels=, rho=, description=, extra=)`}, each one
        more row the reports print after the geographies, kept under its key in the JSON (the
        description the mechanism's words: the core adds none). None when the mechanism has no
        such structure (then a per-attribute request is refused). (The dict of API 1.6 is still
        read, with a DeprecationWarning.)"""
        return None

    def change_one(self, spec: ir.Spec, params: dict, budget):
        """Optional: the mechanism's own budget for CHANGING one record of its native table, given
        `budget` for adding or removing one (its native flavor), when its sensitivity gives a bound
        tighter than group privacy's two add/remove steps; a `ChangeOne(budget, reason)` or None
        (the `(budget, reason)` tuple of API 1.5 is still read, with a DeprecationWarning). A program
        that composes the census per person applies it (and says so on the member's ledger line)."""
        return None

    def run(self, spec: ir.Spec, params: dict, data: dict, ctx: "RunContext") -> Release:
        """Produce the release, given one `RunContext` (set `run_context = True`): its random
        source `ctx.rng`; `ctx.engine`, a `dpspec.engine.EngineRun` (map over units of work with
        keyed streams, count, read Parquet) on whichever engine the user chose, or None when the
        caller gave none (the run then works in this process); `ctx.keep_truths`, True under
        `dpspec sweep --runs` (keep in `Release.internal` what `compared_counts` needs: the
        confidential count of each released cell, when the released counts are summed where the
        data live and no table of truths reaches the sweep); `ctx.progress(stage, done, total)`.

        A mechanism written before API 1.6 leaves `run_context` False and takes `run(spec,
        params, data, rng)`, optionally with `engine=None` and `keep_truths=False`: it is called
        through `call_run`'s adapter, which warns."""
        raise NotImplementedError

    def utility(self, spec: ir.Spec, params: dict, data: dict, releases: list) -> dict:
        """Optional: figures over repeated runs against the confidential data (internal only)."""
        return {}

    # ---- optional: for `dpspec sweep` ---------------------------------------------------------
    def expected_error(self, spec: ir.Spec, params: dict, facts: dict) -> list[ExpectedError] | None:
        """Optional: the error the mechanism promises from public parameters alone, per released
        figure, for `dpspec sweep`'s public report. One `ExpectedError(table, level, query,
        variance, of)` per (table, level or None, query), where `of` names the figure whose error
        it is ("noisy measurement", "estimated proportion"). None: the mechanism states no such
        figure (swapping's error depends on the data). (The dicts of API 1.6 are still read, with
        a DeprecationWarning.)"""
        return None

    def compared_counts(self, spec: ir.Spec, params: dict, data: dict, release: Release) -> list[ComparedCounts] | None:
        """Optional: released counts beside the confidential ones, for `dpspec sweep --runs`
        (internal report only). One `ComparedCounts(table, level, truth, released)` per table,
        `truth` and `released` Series indexed by cell, `level` a geography level or None. None:
        the sweep compares the released microdata's count tables with the data's (by geography
        level), which needs no hook. A run called with `keep_truths=True` (see `run`) may have
        left the truths in `release.internal` (SafeTab does: its truths are summed on the engine,
        per unit of work). (The dicts of API 1.6 are still read, with a DeprecationWarning.)"""
        return None

    def neighbours(self, spec: ir.Spec, params: dict) -> list[NeighbourPair] | None:
        """Optional: worst-case neighbouring pairs on miniature instances of the spec's domain, for
        `dpspec verify`. None: the verifier builds pairs from the domain and the declared relation."""
        return None

    # ---- optional: likelihood of the release, for `dpspec infer` (seed 2) -------------------
    def likelihood(self, spec: ir.Spec, params: dict, outputs: dict) -> "list[CountLikelihood] | None":
        """Optional: the noise distribution of released noisy counts given the confidential ones.

        `outputs` holds the published frames of one release (as `dpspec compile` wrote them).
        Return one `CountLikelihood` per released count query, or None when the mechanism
        cannot state its likelihood (then `dpspec infer` refuses, rather than guessing).
        """
        return None

    def power(
        self, spec: ir.Spec, params: dict, outputs: dict, cell: str, null: int, alternative: int, level: float
    ) -> Power | None:
        """Optional (API 1.4): seed 2's Theorem 15 on one released cell, for `dpspec infer --power`.

        The power at count `alternative` of the level-`level` test of the cell's count `null`,
        from the release and from the release post-processed with Z, as a `Power` (API 1.7: its
        `power_release`, `power_post_processed`, `size_release`, `size_post_processed`,
        `released`, `post_processed_value`, `post_processing`, `note`, ...; the dict of API 1.6
        is still read, with a DeprecationWarning). None: the mechanism cannot state them (then
        `--power` refuses); raise `MechanismError` to say why."""
        return None


# ---- what a run is given (API 1.6) --------------------------------------------------------


@attrs.frozen
class RunContext:
    """Everything a run is given besides its spec, parameters and data, in one object: what
    `Mechanism.run(spec, params, data, ctx)` reads (pytest's `request` is the model: the
    capabilities are the object's, not found by inspecting signatures).

    rng: the run's random source (numpy's Generator over ChaCha20; seeded only when the user
    gave --seed). engine: the `dpspec.engine.EngineRun` of the run, or None when its caller gave
    none (a test calling `run` directly): the run then works in this process. keep_truths:
    `dpspec sweep --runs` asks the run to keep the confidential counts its `compared_counts`
    needs. progress: report(stage, done, total) to whoever listens (the CLI's bar; no one in
    tests and the Python API), `dpspec.progress.report` unless a caller routes it elsewhere.
    """

    rng: Any
    engine: Any = None
    keep_truths: bool = False
    progress: Any = progress.report


OLD_RUN = "run(spec, params, data, rng[, engine][, keep_truths])"


def call_run(mechanism: Mechanism, spec: ir.Spec, params: dict, data: dict, ctx: RunContext) -> Release:
    """`mechanism.run` given `ctx`: whole, to a mechanism that declares `run_context`; to one
    written before API 1.6 (the adapter), as `rng` and, when its `run` names them, `engine=`
    and `keep_truths=`, with a DeprecationWarning naming the replacement."""
    if getattr(mechanism, "run_context", False):
        return mechanism.run(spec, params, data, ctx)

    warnings.warn(
        f"mechanism '{mechanism.name}': {OLD_RUN} is deprecated (removed in plugin API 2.0); set "
        "`run_context = True` and take run(spec, params, data, ctx), ctx a dpspec.api.RunContext "
        "(ctx.rng, ctx.engine, ctx.keep_truths, ctx.progress)",
        DeprecationWarning,
        stacklevel=2,
    )
    extra = {"keep_truths": True} if ctx.keep_truths and _names(mechanism, "keep_truths") else {}
    if ctx.engine is not None and _names(mechanism, "engine"):
        extra["engine"] = ctx.engine
    return mechanism.run(spec, params, data, ctx.rng, **extra)


def takes_engine(mechanism) -> bool:
    """Whether a mechanism's run works through the engine: as it declares (`uses_engine`), or, for
    one written before API 1.6, when its `run` names `engine` (or takes **kwargs)."""
    if getattr(mechanism, "run_context", False):
        return bool(getattr(mechanism, "uses_engine", False))
    return _names(mechanism, "engine")


def _names(mechanism, argument: str) -> bool:
    """The adapter's one inspection, for mechanisms written before API 1.6 only: whether their
    `run` names `argument` (`engine` also passes through **kwargs)."""
    try:
        params = inspect.signature(mechanism.run).parameters
    except (TypeError, ValueError):
        return False
    if argument in params:
        return True
    return argument == "engine" and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# ---- the likelihood hook's type (used by `dpspec infer`) ----------------------------------


@attrs.frozen
class CountLikelihood:
    """Released noisy answers to one count query, and their likelihood given the true counts.

    query: the count query (table and grouping columns) the noisy answers estimate.
    cells: one row per released answer, a column per grouping column giving its cell (as text).
    value: the released answers (integers), one per row.
    logpmf(truth): log P(released answer | true count), elementwise for an integer array of
    true counts of shape (draws, rows); independent across rows given the truth.
    log_max: per row, the largest value logpmf can take (the rejection sampler's bound).
    estimate, variance: a rough centre and spread per row (floats), used only to build
    importance-sampling proposals; a wrong guess costs efficiency, never validity.
    joint (optional): a term of the log-likelihood that couples the rows, joint(truth) -> one
    value per draw, added to the rows' sum (a normalizing constant over a set of vectors, as
    when a release is drawn on the vectors summing to a public total); joint_max bounds it
    from above (the rejection sampler's bound is sum(log_max) + joint_max).
    log_max_total (optional, API 1.5): a bound on the whole log-likelihood, sum(logpmf) + joint,
    at every truth, for a release whose rows and joint term do not reach their maxima at the same
    truth; the rejection sampler uses the smaller of it and sum(log_max) + joint_max.
    """

    query: ir.CountQuery
    cells: Any  # pandas.DataFrame
    value: Any  # numpy integer array
    logpmf: Any  # Callable[[np.ndarray], np.ndarray]
    log_max: Any  # numpy array, one value per row
    estimate: Any  # numpy array
    variance: Any  # numpy array
    description: str = ""
    joint: Any = None  # Callable[[np.ndarray], np.ndarray] | None
    joint_max: float = 0.0
    log_max_total: float | None = None

    @classmethod
    def exact(cls, query: ir.CountQuery, cells, value, description: str = "released exactly") -> "CountLikelihood":
        """Answers published without noise (invariants): probability 1 at the true count."""
        value = np.asarray(value, dtype=np.int64)

        def logpmf(truth):
            return np.where(np.asarray(truth) == value, 0.0, -np.inf)

        zeros = np.zeros(value.shape)
        return cls(query, cells, value, logpmf, zeros, value.astype(float), zeros, description)

    @property
    def is_exact(self) -> bool:
        return bool(np.all(np.asarray(self.variance) == 0))
