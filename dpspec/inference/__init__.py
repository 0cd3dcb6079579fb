"""`dpspec infer`: posterior inference on a release, conditioned on the public information.

Seeman, Slavković & Reimherr (2022), "Formal privacy for partially private data": when some
statistics are public and others noisy, sample the posterior of what you care about given the
noisy answers *and* the public ones, instead of treating post-processed numbers as data.

    spec + release dir --mechanism.likelihood--> noisy answers with their likelihood
    target --model--> cells, likelihood blocks, public totals, post-processed values
    prior (Dirichlet-multinomial within public totals) --Algorithm 1 or 2--> weighted draws
    draws --summary--> per-cell means, medians, 90%/95% intervals, contractions --report
"""

from __future__ import annotations

import attrs
import numpy as np

from dpspec.check.checker import check
from dpspec.language.parser import load_text_or_path
from dpspec.lazy import LazyModule

from . import summary
from .release import InferError, checked_likelihoods, load_release, validate_release

# imported on first use: at import they would load numpy, scipy with this module
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())
sampler = LazyModule("dpspec.inference.sampler", "sampler", globals())
_model = LazyModule("dpspec.inference.model", "_model", globals())
_prior = LazyModule("dpspec.inference.prior", "_prior", globals())

__all__ = ["InferError", "InferResult", "infer"]
METHODS = ("rejection", "importance")


@attrs.define
class InferResult:
    spec_title: str
    mechanism: str
    target: str
    rate: bool
    prior: str
    method: str  # what ran
    requested: str
    draws: object  # sampler.Draws
    acceptance_estimate: float
    log10_acceptance_estimate: float
    cells: list  # one dict per cell (labels, summaries, post-processed, noisy)
    contractions: dict
    used: tuple
    ignored: tuple
    notes: list
    samples: np.ndarray  # unweighted posterior draws (n x K), resampled for importance
    seed: int | None = None
    acceptance_is_bound: bool = False  # the pilot's rate is an upper bound (joint terms not computed)
    power: dict | None = None  # `--power`: Theorem 15 on one cell (format 1.1)

    def to_json(self) -> dict:
        d = self.draws
        return {
            "spec": self.spec_title,
            "mechanism": self.mechanism,
            "target": self.target,
            "quantity": "rate" if self.rate else "count",
            "prior": self.prior,
            "method": self.method,
            "method_requested": self.requested,
            "acceptance_rate_estimate": self.acceptance_estimate,
            "log10_acceptance_rate_estimate": self.log10_acceptance_estimate,
            "acceptance_rate": d.acceptance,
            "effective_sample_size": d.ess,
            "proposals": d.proposals,
            "draws": int(len(self.samples)),
            "conditioned_on": list(self.used),
            "left_out": list(self.ignored),
            "cells": self.cells,
            "contractions": self.contractions,
            "notes": list(self.notes),
            "seeded": self.seed is not None,
            **({"power": self.power} if self.power is not None else {}),
        }


def _rates(x: np.ndarray, model) -> np.ndarray:
    """Each cell's share of its row: cells that agree on every target column but the last."""
    cols = list(model.cells.columns)
    if not cols:
        raise InferError("--rate needs a target broken down by at least one column")
    keys = model.cells[cols[:-1]].astype(str).agg("\x1f".join, axis=1) if len(cols) > 1 else np.zeros(len(model.cells))
    codes = np.unique(np.asarray(keys), return_inverse=True)[1]
    x = np.asarray(x, dtype=float)
    sums = np.zeros((x.shape[0], codes.max() + 1))
    np.add.at(sums.T, codes, x.T)
    denom = sums[:, codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, x / np.where(denom > 0, denom, 1), np.nan)


def _direct(model) -> np.ndarray:
    """The noisy estimate of each cell on its own, if the release has one (else NaN)."""
    out = np.full(model.n_cells, np.nan)
    for b in model.blocks:
        m = b.matrix.tocsr()
        single = np.flatnonzero(np.diff(m.indptr) == 1)
        out[m.indices[m.indptr[single]]] = np.asarray(b.likelihood.estimate, dtype=float)[single]
    return out


def infer(
    spec,
    release_dir: str,
    target: str,
    prior: str | None = None,
    draws: int = 2000,
    method: str = "rejection",
    seed: int | None = None,
    rate: bool = False,
    max_proposals: int | None = None,
) -> InferResult:
    """Posterior draws and summaries of `target` given the release in `release_dir`."""
    if isinstance(spec, str):
        spec = load_text_or_path(spec)
    if method not in METHODS:
        raise InferError(f"--method {method!r}: expected one of {', '.join(METHODS)}")
    if not 10 <= int(draws) <= 1_000_000:
        raise InferError(f"--draws {draws}: expected between 10 and 1,000,000")
    checked = check(spec)
    query = _model.parse_target(target, spec)
    release = load_release(release_dir, _compiler.spec_sha256(spec))
    mech = checked.mechanism
    validate_release(release, mech, spec, checked.params)
    try:
        likelihoods = mech.likelihood(spec, checked.params, release.outputs)
    except KeyError as exc:  # a published table without a column its likelihood reads (the variance)
        raise InferError(
            f"{release_dir}: a published table lacks the column {exc}, which mechanism '{mech.name}' "
            "reads to infer; this is not a release dpspec compile wrote"
        ) from None
    if likelihoods is None:
        raise InferError(
            f"mechanism '{mech.name}' does not state the likelihood of its release (or this release "
            "lacks the outputs it needs), so dpspec infer cannot condition on it"
        )
    checked_likelihoods(likelihoods, release_dir)
    model = _model.build_model(spec, query, likelihoods, release.outputs)
    pri = _prior.make_prior(prior, model)
    rng = _compiler.make_rng(seed)
    result, pilot, notes = sampler.sample(model, pri, int(draws), rng, method, max_proposals or sampler.MAX_PROPOSALS)
    x = result.x
    w = result.weights
    if rate:
        x = _rates(x, model)
    stats = summary.summarize(x, w)
    labels = model.labels()
    post = model.postprocessed
    direct = _direct(model)
    cells = []
    for k in range(model.n_cells):
        row = {"cell": labels[k], **{c: str(model.cells[c].iloc[k]) for c in model.cells.columns}}
        row.update({name: float(v[k]) if np.isfinite(v[k]) else None for name, v in stats.items()})  # JSON has no NaN
        row["noisy_estimate"] = None if np.isnan(direct[k]) else float(direct[k])
        row["post_processed"] = None
        cells.append(row)
    contracted = {"zeros": [], "bounds": [], "checked": False}
    if post is not None:
        post_q = _rates(post[None, :], model)[0] if rate else post.astype(float)
        for k, row in enumerate(cells):
            row["post_processed"] = None if np.isnan(post_q[k]) else float(post_q[k])
        high = 1.0 if rate else model.totals[model.group].astype(float)
        found = summary.contractions(post_q, stats["q025"], stats["q975"], 0.0, high)
        contracted = {
            "checked": True,
            "zeros": [labels[k] for k in found["zeros"]],
            "bounds": [labels[k] for k in found["bounds"]],
        }
        if not rate:
            positive = (result.x > 0).astype(float).T @ w
            contracted["zero_details"] = [
                {
                    "cell": labels[k],
                    "posterior_probability_positive": float(positive[k]),
                    "q975": float(stats["q975"][k]),
                }
                for k in found["zeros"]
            ]
    n_out = int(draws)
    samples = sampler.resample(result, n_out, rng) if result.method == "importance" else result.x
    return InferResult(
        spec.title,
        mech.name,
        query.describe(),
        bool(rate),
        pri.description,
        result.method,
        method,
        result,
        pilot.rate,
        pilot.log10_rate,
        cells,
        contracted,
        model.used,
        model.ignored,
        notes,
        samples,
        seed,
        pilot.upper_bound,
    )
