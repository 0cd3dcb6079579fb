"""`dpspec verify`: test a mechanism's claimed budget empirically.

For each neighbouring pair of miniature datasets (supplied by the mechanism's `neighbours`
hook, or built from the domain), run the mechanism many times on both, choose the event that
best separates them on half the runs, bound its two probabilities on the other half with exact
Clopper–Pearson intervals, and turn them into a lower bound on the privacy loss in the spec's
own currency (`bounds.py`). The claim it is compared with is what the mechanism's `budget`
says for that miniature universe, converted to the spec's flavor by the ledger and scaled by
group privacy when the pair is more than one step apart.

Verdicts: `refuted` (a lower bound exceeds its claim), `inconclusive` (for some pair even the
most extreme outcome of these runs could not exceed the claim: more runs are needed, and how
many is reported), else `consistent`. The confidence is split over the pairs (Bonferroni), so
the chance that any reported lower bound exceeds the true loss is at most 1 - confidence.
"""

from __future__ import annotations

import numpy as np

from dpspec import ir
from dpspec.budget import ledger as ledger_mod, group
from dpspec.check.checker import check
from dpspec.errors import DpspecError
from dpspec.language.parser import load_text_or_path
from dpspec.lazy import LazyModule
from dpspec.verify.bounds import largest_detectable, runs_needed
from dpspec.verify.events import best_event
from dpspec.verify.miniature import Flattener, VerifyError, generic_pairs, run_many, same_universe, universe_queries
from dpspec.verify.result import EXIT_CODES, PairResult, Verification, load_json

# imported on first use: at import they would load randomgen with this module
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())

DEFAULT_RUNS = 20_000
_PLUGIN_FAILURES = (
    LookupError,
    TypeError,
    ValueError,
    AttributeError,
    ArithmeticError,
    RuntimeError,
    NotImplementedError,
    AssertionError,
)


class PluginFailure(RuntimeError):
    """Plugin code crashed on miniature data: a bug (exit 3 at the command line, as any internal
    error), named with the mechanism and the step, never blamed on the spec."""


def _crash(mech, step: str, exc: BaseException) -> PluginFailure:
    return PluginFailure(
        f"mechanism '{mech.name}' failed {step}: {type(exc).__name__}: {exc} "
        "(a bug in the plugin's code, not a problem of the spec)"
    )


def _claim_options(budget, spec_delta=None) -> tuple[str, float, dict]:
    """(premetric kind, claimed figure, options for the bound) of a spec-flavor budget.

    An (eps, delta) claim with delta below the spec's delta implies (eps, spec's delta): the
    bound is taken at the spec's delta, as the spec quotes it."""
    kind = budget.kind
    values = budget.params()
    if kind == "pure":
        return kind, values["epsilon"], {}
    if kind == "approx":
        delta = float(values["delta"])
        if spec_delta is not None and float(spec_delta) >= delta:
            delta = float(spec_delta)
        return kind, values["epsilon"], {"delta": delta}
    if kind == "zcdp":
        return kind, values["rho"], {}
    if kind == "gdp":
        return kind, values["mu"], {}
    if kind == "renyi" and "alpha" in values and not isinstance(values["alpha"], list):
        return kind, values["epsilon"], {"alpha": float(values["alpha"])}
    raise VerifyError(f"verify cannot test a claim in the premetric '{kind}' (a Rényi curve); declare one order alpha")


def _claim(spec, mech, params, pair):
    """The mechanism's own claim for this miniature universe, in the spec's currency."""
    facts = mech.public_facts(spec, params, pair.left)
    statement = mech.budget(spec, params, facts)
    account = ledger_mod.build(spec, mech.flavor(spec, params), statement)
    if account.declared is None:
        raise VerifyError(f"the mechanism's budget cannot be expressed in the spec's flavor: {account.problem}")
    claimed = account.declared
    if pair.distance > 1:
        claimed = group(claimed, pair.distance).result
    if not claimed.is_finite:
        raise VerifyError(
            f"the mechanism claims no finite budget ({pair.label}): an infinite claim cannot be refuted, so there is "
            "nothing to verify (see the audit's infinite-budget finding)"
        )
    return claimed


def _flavor(spec: ir.Spec, kind: str, options: dict) -> dict:
    out = {"premetric": kind}
    out.update({k: v for k, v in options.items()})
    out["relation"] = spec.unit.relation if spec.unit else None
    out["unit"] = spec.unit.table if spec.unit else None
    return out


def verify(spec, runs: int = DEFAULT_RUNS, seed: int | None = None, confidence: float = 0.95) -> Verification:
    """Test the spec's mechanism against its claimed budget (see the module doc).

    Raises SpecError for a spec that does not check and VerifyError when there is nothing to
    verify (no mechanism, an infinite claim, no neighbours) or the mechanism fails on miniature data.
    """
    if isinstance(spec, str):
        spec = load_text_or_path(spec)
    if not 0 < confidence < 1:
        raise VerifyError(f"the confidence must lie strictly between 0 and 1, got {confidence}")
    if runs < 2:
        raise VerifyError("verify needs at least 2 runs per dataset (half choose the event, half test it)")
    if spec.program is not None:
        raise VerifyError("verify tests one mechanism: give it the spec of one release, not a program")
    if spec.mechanism is None:
        raise VerifyError(f"{spec.path or 'the spec'}: the spec names no mechanism, so there is no claim to verify")
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    try:
        pairs = mech.neighbours(spec, params)
        path = "mechanism" if pairs is not None else "generic"
        if pairs is None:
            pairs = generic_pairs(spec, checked.induced)
    except _PLUGIN_FAILURES as exc:
        raise _crash(mech, "to supply neighbouring datasets", exc) from None
    if not pairs:
        raise VerifyError(f"mechanism '{mech.name}' supplied no neighbouring datasets to test")
    queries = universe_queries(spec, checked.induced)
    a = (1 - confidence) / len(pairs)
    rng = _compiler.make_rng(seed)
    results = []
    kind = None
    for pair in pairs:
        moved = same_universe(spec, queries, pair.left, pair.right)
        if moved is not None:
            raise VerifyError(f"the pair '{pair.label}' is not in one universe: '{moved}' differs between its datasets")
        p_params = pair.params if pair.params is not None else params
        try:
            claimed = _claim(spec, mech, p_params, pair)
        except _PLUGIN_FAILURES as exc:
            raise _crash(mech, f"to state its budget on miniature data ({pair.label})", exc) from None
        kind, claim, options = _claim_options(claimed, spec.premetric.option("delta") if spec.premetric else None)
        flatten = Flattener()
        try:
            left = run_many(
                mech, spec, p_params, pair, pair.left, runs, rng, flatten, f"runs on the first dataset ({pair.label})"
            )
            right = run_many(
                mech, spec, p_params, pair, pair.right, runs, rng, flatten, f"runs on the second dataset ({pair.label})"
            )
        except VerifyError:
            raise
        except DpspecError as exc:  # the mechanism refused the miniature data in words: a message, exit 1
            raise VerifyError(f"mechanism '{mech.name}' failed on miniature data ({pair.label}): {exc}") from None
        except Exception as exc:  # plugin code crashed: a bug, reported with its mechanism and step
            raise _crash(mech, f"on miniature data ({pair.label})", exc) from None
        width = max(left.shape[1], right.shape[1])
        left, right = _pad(left, width), _pad(right, width)
        test = best_event(left, right, kind, a, labels=flatten.labels, **options)
        results.append(
            PairResult(
                pair.label,
                pair.distance,
                float(claim),
                test.lower_bound,
                largest_detectable(kind, test.n, a, **options),
                _runs_per_side(kind, claim, a, options),
                test,
            )
        )
    refuted = [r for r in results if r.refuted]
    untestable = [r for r in results if not r.testable]
    if refuted:
        verdict, head = "refuted", max(refuted, key=lambda r: r.lower_bound / max(r.claimed, 1e-300))
    elif untestable:
        verdict, head = "inconclusive", max(untestable, key=lambda r: r.claimed)
    else:
        verdict, head = "consistent", max(results, key=lambda r: r.lower_bound / max(r.claimed, 1e-300))
    needed = max((r.runs_needed or 0) for r in untestable) if untestable else None
    if untestable and any(r.runs_needed is None for r in untestable):
        needed = None
    return Verification(
        verdict,
        head.claimed,
        head.lower_bound,
        confidence,
        runs,
        _flavor(spec, kind, options),
        tuple(results),
        {"name": mech.name, "version": mech.version},
        path,
        _compiler.spec_sha256(spec),
        needed,
        seed,
    )


def _runs_per_side(kind, claim, a, options) -> int | None:
    """Runs per dataset (both halves) for the held-out half to be able to exceed the claim."""
    test = runs_needed(kind, claim, a, **options)
    return None if test is None else 2 * test


def _pad(matrix, width):
    if matrix.shape[1] == width:
        return matrix
    out = np.full((matrix.shape[0], width), -1.0e300)
    out[:, : matrix.shape[1]] = matrix
    return out


__all__ = ["DEFAULT_RUNS", "EXIT_CODES", "PairResult", "Verification", "VerifyError", "load_json", "verify"]
