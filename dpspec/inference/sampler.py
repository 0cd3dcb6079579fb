"""Posterior sampling given the release and the public totals (Seeman et al. 2022, Appendix B).

Algorithm 1 (exact rejection): draw the cells from the prior, which already agrees with every
public total, and accept with probability L(release | cells) / max L. Accepted draws are exact
posterior draws, but the acceptance rate is the prior mass near the release: it shrinks
exponentially with the number of noisy answers. A pilot run estimates it first; a target whose
expected number of proposals exceeds the budget falls back to importance sampling.

Algorithm 2 (importance sampling): draw from a proposal q and weight by prior x likelihood / q.
The proposal here is built from the release itself: the Gaussian least-squares fit of the cells
to the noisy answers under the public totals, drawn cell after cell as integer centres
plus discrete Gaussian steps (the project's exact sampler), negative values folded onto the
counts, so q is exact too. Weights correct
for every approximation; the effective sample size says how many draws they are worth.
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np
from scipy.special import logsumexp

from dpspec.run.noise import discrete_gaussian, discrete_gaussian_logpmf, effective_sigma2

from .model import Model
from .prior import Prior
from .factorised import build

PILOT = 20_000
MAX_PROPOSALS = 5_000_000
BATCH = 50_000
MAX_ELEMENTS = 20_000_000  # draws x cells kept in memory for importance sampling
WIDEN = 1.0  # proposal variance / least-squares variance (wider costs ESS exponentially in the cells)
DEFENSIVE = 0.1  # the least-squares proposal's share beside the factorised one (full support)


@attrs.frozen
class Draws:
    """Posterior draws (n x K) with normalized weights (uniform for exact draws)."""

    method: str
    x: np.ndarray
    weights: np.ndarray
    proposals: int
    acceptance: float | None = None  # rejection: accepted / proposed (or the pilot's estimate)
    ess: float | None = None  # importance: effective sample size
    notes: tuple = ()


def log_likelihood(model: Model, x: np.ndarray, joint: bool = True) -> np.ndarray:
    """log L(release | cells) for each row of x (n x K); without the joint terms when `joint` is
    False: each replaced by its joint_max, and the block capped at its bound on the whole if it
    states one, so the value still bounds the block's log-likelihood from above."""
    out = np.zeros(x.shape[0])
    for b in model.blocks:
        truth = (b.matrix @ x.T).T
        block = np.sum(b.likelihood.logpmf(truth), axis=1)
        if b.likelihood.joint is not None:
            if joint:
                block = block + b.likelihood.joint(truth)
            else:
                block = block + b.likelihood.joint_max
                whole = getattr(b.likelihood, "log_max_total", None)
                block = block if whole is None else np.minimum(block, float(whole))
        out += block
    return out


def log_likelihood_max(model: Model) -> float:
    """The rejection sampler's bound on log L: per block, its parts' bounds summed, or the block's
    own bound on the whole when it states a smaller one."""
    total = 0.0
    for b in model.blocks:
        lik = b.likelihood
        parts = float(np.sum(lik.log_max) + (lik.joint_max if lik.joint is not None else 0.0))
        whole = getattr(lik, "log_max_total", None)
        total += parts if whole is None else min(parts, float(whole))
    return total


@attrs.frozen
class Pilot:
    """Algorithm 1's acceptance rate estimated from prior draws (and the draws it accepted)."""

    rate: float
    log10_rate: float  # kept separately: the rate itself underflows for large targets
    kept: np.ndarray
    proposals: int
    upper_bound: bool = False  # the rate is an upper bound (the joint terms were not computed)


def estimate_acceptance(
    model: Model, prior: Prior, rng, n: int = PILOT, draws: int | None = None, max_proposals: int = MAX_PROPOSALS
) -> Pilot:
    """Pilot estimate of Algorithm 1's acceptance rate: the mean of L / max L over prior draws.
    A joint term (a normaliser per draw, the costly part) is at most its joint_max, so the rate
    without it bounds the rate from above; when that bound already puts `draws` beyond
    `max_proposals`, the joint terms are not computed and the bound is returned (no draw kept)."""
    x = prior.sample(model, n, rng)
    lmax = log_likelihood_max(model)
    if draws is not None and any(b.likelihood.joint is not None for b in model.blocks):
        upper = log_likelihood(model, x, joint=False) - lmax
        log_upper = float(logsumexp(upper) - np.log(n)) if np.any(np.isfinite(upper)) else -np.inf
        if draws > max_proposals * np.exp(log_upper):
            return Pilot(float(np.exp(log_upper)), log_upper / np.log(10), x[:0], n, upper_bound=True)
    log_ratio = log_likelihood(model, x) - lmax
    accept = rng.random(n) < np.exp(log_ratio)
    log_rate = float(logsumexp(log_ratio) - np.log(n)) if np.any(np.isfinite(log_ratio)) else -np.inf
    return Pilot(float(np.exp(log_rate)), log_rate / np.log(10), x[accept], n)


def rejection(
    model: Model, prior: Prior, draws: int, rng, max_proposals: int = MAX_PROPOSALS, pilot: Pilot | None = None
) -> Draws | None:
    """Algorithm 1; None when the estimated cost exceeds max_proposals."""
    pilot = pilot if pilot is not None else estimate_acceptance(model, prior, rng)
    rate, kept = pilot.rate, pilot.kept
    proposals = pilot.proposals  # the pilot's draws count, and its accepted ones are kept
    if rate <= 0 or draws / rate > max_proposals:
        return None
    accepted = [kept]
    got = len(kept)
    lmax = log_likelihood_max(model)
    while got < draws and proposals < 2 * max_proposals:
        n = int(min(BATCH * 4, max(1000, 1.2 * (draws - got) / rate)))
        x = prior.sample(model, n, rng)
        accept = rng.random(n) < np.exp(log_likelihood(model, x) - lmax)
        accepted.append(x[accept])
        got += int(accept.sum())
        proposals += n
    x = np.concatenate(accepted)[:draws]
    return Draws("rejection", x, np.full(len(x), 1.0 / max(len(x), 1)), proposals, acceptance=got / proposals)


def _least_squares(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Free cells, the fixed offset/map x = t0 + T f, and the fit's mean and covariance of f."""
    k = model.n_cells
    rows = [b.matrix.toarray().astype(float) for b in model.blocks]
    a = np.vstack(rows)
    y = np.concatenate([np.asarray(b.likelihood.estimate, dtype=float) for b in model.blocks])
    w = 1.0 / np.maximum(np.concatenate([np.asarray(b.likelihood.variance, dtype=float) for b in model.blocks]), 1e-9)
    scale = float(max(model.totals.max(), 1))
    ridge = 1.0 / scale**2  # a vague anchor so unmeasured cells stay defined
    # first an unconstrained fit, to pick each group's largest cell as the one its total determines
    h0 = a.T @ (w[:, None] * a) + ridge * np.eye(k)
    guess = np.linalg.solve(
        h0, a.T @ (w * y) + ridge * np.repeat(model.totals / np.bincount(model.group), np.bincount(model.group))
    )
    determined = np.array(
        [np.flatnonzero(model.group == g)[np.argmax(guess[model.group == g])] for g in range(len(model.totals))]
    )
    free = np.setdiff1d(np.arange(k), determined)
    t = np.zeros((k, free.size))
    t[free, np.arange(free.size)] = 1.0
    for g, d in enumerate(determined):
        t[d, model.group[free] == g] = -1.0
    t0 = np.zeros(k)
    t0[determined] = model.totals
    at = a @ t
    h = at.T @ (w[:, None] * at) + ridge * np.eye(free.size)
    cov = np.linalg.inv(h)
    mean = cov @ (at.T @ (w * (y - a @ t0)))
    return t0, t, mean, (cov + cov.T) / 2


def _proposal(mean, cov, n: int, rng, given: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """n integer draws of the free cells and their exact log proposal probabilities (or, with
    `given`, the log probabilities of those free cells' values: the same walk, nothing drawn)."""
    f = mean.size
    chol = np.linalg.cholesky(WIDEN * cov + 1e-9 * np.eye(f))
    if given is not None:
        n = given.shape[0]
    x = np.zeros((n, f), dtype=np.int64)
    z = np.zeros((n, f))
    logq = np.zeros(n)
    for j in range(f):
        cond = mean[j] + z[:, :j] @ chol[j, :j]
        centre = np.maximum(np.rint(cond), 0).astype(np.int64)  # a negative fit means "near 0"
        # Below 0 the posterior is a Gaussian tail, of scale about v/|cond| rather than sqrt(v):
        # narrow the step there. Variances are rounded to a grid of powers of 2^(1/2) so that
        # each distinct one is one call of the exact sampler.
        v = chol[j, j] ** 2  # the conditional variance of this cell given the earlier ones
        var = np.where(cond < 0, np.minimum(v, (v / np.maximum(-cond, 1e-9)) ** 2), v)
        grid = np.exp2(np.round(2 * np.log2(np.maximum(var, 0.25))) / 2)
        raw = np.empty(n, dtype=np.int64)
        s2_of = {}
        for g in np.unique(grid):
            rows = np.flatnonzero(grid == g)
            s2 = effective_sigma2(Fraction(float(g)).limit_denominator(1 << 20))
            s2_of[g] = s2
            if given is None:
                raw[rows] = centre[rows] + discrete_gaussian(s2, rows.size, rng)
        # fold negative values onto x >= 0 (x = -raw - 1): counts are never negative, and the
        # folded pmf stays exact, q(x) = p(x - centre) + p(-x - 1 - centre)
        xj = np.where(raw < 0, -raw - 1, raw) if given is None else np.asarray(given[:, j], dtype=np.int64)
        x[:, j] = xj
        z[:, j] = (xj - cond) / chol[j, j]
        for g, s2 in s2_of.items():
            rows = np.flatnonzero(grid == g)
            logq[rows] += np.logaddexp(
                discrete_gaussian_logpmf(s2, xj[rows] - centre[rows]),
                discrete_gaussian_logpmf(s2, -xj[rows] - 1 - centre[rows]),
            )
        if given is not None:
            logq[xj < 0] = -np.inf  # the fold never proposes a negative count
    return x, logq


def _target(model: Model, prior: Prior, x: np.ndarray) -> np.ndarray:
    """log prior + log likelihood of each row of x (-inf off the prior's support)."""
    lp = prior.logpmf(model, x)
    return np.where(np.isfinite(lp), lp + log_likelihood(model, np.where(np.isfinite(lp)[:, None], x, 0)), -np.inf)


def _mixture(model: Model, prior: Prior, fac, n: int, rng, t0, t, mean, cov) -> tuple[np.ndarray, np.ndarray]:
    """n draws of (1 - DEFENSIVE) x the factorised proposal + DEFENSIVE x the least-squares one, with
    their log importance weights: the factorised part is the posterior inside its windows, the
    least-squares part has full support, so the weights stay exact whatever the windows miss."""
    n_fac = int(rng.binomial(n, 1 - DEFENSIVE))
    x_fac, q_fac = fac.sample(n_fac, rng)
    free = np.argmax(t == 1, axis=0)  # the cell each free coordinate is (x = t0 + t f)
    _, q_ls_of_fac = _proposal(mean, cov, 0, rng, given=x_fac[:, free])
    f, q_ls = _proposal(mean, cov, n - n_fac, rng)
    x_ls = np.rint(t0 + f @ t.T).astype(np.int64)
    q_fac_of_ls = fac.logpmf(x_ls)
    x = np.concatenate([x_fac, x_ls])
    a, b = np.log1p(-DEFENSIVE), np.log(DEFENSIVE)
    logq = np.concatenate([np.logaddexp(a + q_fac, b + q_ls_of_fac), np.logaddexp(a + q_fac_of_ls, b + q_ls)])
    logw = np.concatenate([_target(model, prior, x[i : i + BATCH]) for i in range(0, len(x), BATCH)]) - logq
    return x, logw


def importance(model: Model, prior: Prior, draws: int, rng, proposals: int | None = None) -> Draws:
    """Algorithm 2; weights prior x likelihood / proposal. The proposal is the factorised posterior
    (mixed with the least-squares one) when the posterior factorises, else the least-squares one."""

    t0, t, mean, cov = _least_squares(model)
    notes = []
    fac, why = build(model, prior)
    if fac is not None:
        n = int(proposals or max(np.ceil(draws / (1 - DEFENSIVE)), 1000))  # the factorised draws weigh about equally
        x, logw = _mixture(model, prior, fac, n, rng, t0, t, mean, cov)
        notes.append(
            f"importance sampling: {fac.describe()}, mixed with the least-squares proposal "
            f"({DEFENSIVE:.0%} of {n:,} proposals), which covers what the windows leave out"
        )
    else:
        n = proposals or max(20 * draws, 10_000)
        n = int(min(n, max(MAX_ELEMENTS // max(model.n_cells, 1), 1000)))
        notes.append(
            f"importance sampling with the least-squares proposal ({n:,} proposals); the factorised proposal "
            f"does not apply: {why}"
        )
        xs, logws = [], []
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            f, logq = _proposal(mean, cov, m, rng)
            x = np.rint(t0 + f @ t.T).astype(np.int64)
            xs.append(x)
            logws.append(_target(model, prior, x) - logq)
        x = np.concatenate(xs)
        logw = np.concatenate(logws)
    if not np.any(np.isfinite(logw)):
        w = np.full(n, 1.0 / n)
        ess = 0.0
        notes.append(
            "no proposal had positive posterior probability: the release and the prior disagree "
            "beyond what the noise explains"
        )
    else:
        w = np.exp(logw - logsumexp(logw))
        ess = float(1.0 / np.sum(w * w))
    return Draws("importance", x, w, n, ess=ess, notes=tuple(notes))


def resample(draws: Draws, n: int, rng) -> np.ndarray:
    """n unweighted draws (multinomial resampling of weighted ones)."""
    if draws.method == "rejection":
        return draws.x[:n]
    idx = rng.choice(len(draws.weights), size=n, p=draws.weights)
    return draws.x[idx]


def sample(
    model: Model,
    prior: Prior,
    draws: int,
    rng,
    method: str = "rejection",
    max_proposals: int = MAX_PROPOSALS,
    pilot_draws: int = PILOT,
) -> tuple[Draws, Pilot, list[str]]:
    """Estimate Algorithm 1's acceptance rate, run it if affordable, else Algorithm 2; with notes."""
    notes = []
    pilot = estimate_acceptance(model, prior, rng, pilot_draws, draws, max_proposals)
    result = None
    if method == "rejection":
        result = rejection(model, prior, draws, rng, max_proposals, pilot=pilot)
        if result is None:
            need = f"{'at least' if pilot.upper_bound else 'about'} 10^{np.log10(draws) - pilot.log10_rate:.0f}"
            rate = f"{'at most' if pilot.upper_bound else ''} 10^{pilot.log10_rate:.1f}".strip()
            notes.append(
                f"too large for exact rejection sampling: the estimated acceptance rate is {rate} "
                f"(mean likelihood ratio over {pilot_draws:,} prior draws), so {draws:,} exact draws would need {need} "
                f"proposals (limit {max_proposals:,}); fell back to importance sampling (Algorithm 2)"
            )
    if result is None:
        result = importance(model, prior, draws, rng)
        notes.extend(result.notes)
        if (result.ess or 0) < min(100, draws):
            notes.append(
                f"effective sample size {result.ess:.1f} is small: intervals are unreliable; "
                "a coarser target or more draws would help"
            )
    return result, pilot, notes
