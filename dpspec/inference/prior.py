"""Priors for the target's cells, consistent with the public totals by construction.

Default: within each public-total group of N persons, the cells follow a Dirichlet-multinomial
with every concentration 1, which makes every split of N over the group's cells equally likely
a priori (Seeman et al. 2022, §4.2, use the same family with concentrations taken from earlier
public counts). A user gives `dirichlet-multinomial:A` (every concentration A) or a CSV file with
the target's columns and an `alpha` column (concentrations per cell, e.g. proportional to an
earlier public release).
"""

from __future__ import annotations

import os

import attrs
import numpy as np
import pandas as pd
from scipy.special import gammaln

from .model import Model, _keys
from .release import InferError

DEFAULT = "dirichlet-multinomial:1"
MIN_ALPHA, MAX_ALPHA = 1e-300, 1e300  # beyond these the gamma draws (log U / a) leave floating point


def _redraw_underflowed(theta: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> None:
    """Rows whose gamma draws all underflowed to 0 (tiny concentrations such as 1e-320: 0/0 would
    be NaN) are drawn again in log space, Gamma(a) = Gamma(a + 1) U^(1/a), and normalised there."""
    dead = np.flatnonzero(theta.sum(axis=1) == 0)
    if dead.size == 0:
        return
    pos = a > 0
    with np.errstate(divide="ignore"):
        log_g = (
            np.log(rng.gamma(a[pos] + 1.0, size=(dead.size, int(pos.sum()))))
            + np.log(rng.random((dead.size, int(pos.sum())))) / a[pos]
        )
    rows = np.zeros((dead.size, a.size))
    rows[:, pos] = np.exp(log_g - log_g.max(axis=1, keepdims=True))
    theta[dead] = rows


@attrs.frozen
class Prior:
    alpha: np.ndarray  # (K,) concentrations, >= 0
    description: str

    def sample(self, model: Model, n: int, rng: np.random.Generator) -> np.ndarray:
        """n exact draws (n x K int64): theta ~ Dirichlet(alpha) per group, cells ~ Multinomial(N, theta)."""
        out = np.zeros((n, model.n_cells), dtype=np.int64)
        for g, total in enumerate(model.totals):
            sl = np.flatnonzero(model.group == g)
            a = self.alpha[sl]
            if not np.any(a > 0):  # only possible for a zero total (make_prior checks)
                continue
            theta = rng.gamma(np.where(a > 0, a, 1.0), size=(n, sl.size)) * (a > 0)
            _redraw_underflowed(theta, a, rng)
            theta /= theta.sum(axis=1, keepdims=True)
            out[:, sl] = _multinomial_rows(int(total), theta, rng)
        return out

    def logpmf(self, model: Model, x: np.ndarray) -> np.ndarray:
        """log prior probability of each row of x (draws x K); -inf off the support."""
        x = np.asarray(x)
        out = np.zeros(x.shape[0])
        ok = np.all(x >= 0, axis=1)
        zero = self.alpha == 0
        ok &= ~np.any(x[:, zero] != 0, axis=1)
        xs = np.where(ok[:, None], x, 0).astype(np.float64)
        a = np.where(zero, 1.0, self.alpha)
        for g, total in enumerate(model.totals):
            sl = np.flatnonzero((model.group == g) & ~zero)
            big_a = float(self.alpha[sl].sum())
            out += gammaln(total + 1.0) + gammaln(big_a) - gammaln(total + big_a)
            out += np.sum(cell_log_weight(a[sl], xs[:, sl]), axis=1)
            ok &= xs[:, model.group == g].sum(axis=1) == total
        return np.where(ok, out, -np.inf)


def cell_log_weight(a, k) -> np.ndarray:
    """log C(k + a - 1, k): the Dirichlet-multinomial weight of count k in a cell of concentration
    a (a = 0 holds only k = 0). The prior's pmf and the factorised proposal share it."""
    a = np.asarray(a, dtype=np.float64)
    k = np.asarray(k)
    safe = np.where(a == 0, 1.0, a)
    w = gammaln(k + safe) - gammaln(safe) - gammaln(k + 1.0)
    return np.where(a == 0, np.where(k == 0, 0.0, -np.inf), w)


def _multinomial_rows(total: int, theta: np.ndarray, rng) -> np.ndarray:
    """One Multinomial(total, theta[i]) draw per row, as a chain of conditional binomials
    (vectorized over rows; numpy's multinomial loops over rows one at a time)."""
    n, k = theta.shape
    out = np.zeros((n, k), dtype=np.int64)
    left = np.full(n, total, dtype=np.int64)
    mass = np.ones(n)
    for j in range(k - 1):
        p = np.clip(np.divide(theta[:, j], mass, out=np.zeros(n), where=mass > 0), 0.0, 1.0)
        out[:, j] = rng.binomial(left, p)
        left -= out[:, j]
        mass -= theta[:, j]
    out[:, k - 1] = left
    return out


def make_prior(text: str | None, model: Model, base_dir: str = ".") -> Prior:
    """Parse --prior and check it against the public information."""
    text = (text or DEFAULT).strip()
    if text.startswith("dirichlet-multinomial"):
        _, _, value = text.partition(":")
        try:
            a = float(value) if value else 1.0
        except ValueError:
            raise InferError(
                f"--prior '{text}': the concentration must be a number, as in dirichlet-multinomial:0.5"
            ) from None
        if not (np.isfinite(a) and MIN_ALPHA <= a <= MAX_ALPHA):
            raise InferError(f"--prior '{text}': the concentration must be a positive number between 1e-300 and 1e300")
        return Prior(
            np.full(model.n_cells, a), f"Dirichlet-multinomial within each public total, every concentration {a:g}"
        )
    path = text if os.path.isabs(text) else os.path.join(base_dir, text)
    if not os.path.isfile(path) and os.path.isfile(text):
        path = text
    if not os.path.isfile(path):
        raise InferError(f"--prior '{text}': neither dirichlet-multinomial[:A] nor a readable CSV file")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise InferError(f"--prior {path}: cannot read it ({exc})") from None
    cols = list(model.cells.columns)
    missing = [c for c in [*cols, "alpha"] if c not in frame.columns]
    if missing:
        raise InferError(
            f"--prior {path}: needs the columns {', '.join([*cols, 'alpha'])}; missing {', '.join(missing)}"
        )
    try:
        alpha = pd.to_numeric(frame["alpha"]).to_numpy(dtype=float)
    except ValueError:
        raise InferError(f"--prior {path}: column 'alpha' must hold numbers") from None
    bad = np.flatnonzero(
        ~np.isfinite(alpha) | (alpha < 0) | ((alpha > 0) & ((alpha < MIN_ALPHA) | (alpha > MAX_ALPHA)))
    )
    if bad.size:
        raise InferError(
            f"--prior {path}, row {bad[0] + 2}: alpha must be 0 or a number between 1e-300 and 1e300, "
            f"got {frame['alpha'].iloc[bad[0]]!r}"
        )
    given = pd.Series(alpha, index=_keys(frame, cols))
    if given.index.duplicated().any():
        raise InferError(f"--prior {path}: cell {given.index[given.index.duplicated()][0]!r} is listed twice")
    keys = _keys(model.cells, cols)
    absent = [k for k in keys if k not in given.index]
    if absent:
        raise InferError(
            f"--prior {path}: no alpha for cell {absent[0].replace(chr(31), ', ')!r} ({len(absent)} cells missing)"
        )
    a = given.reindex(keys).to_numpy(dtype=float)
    for g, total in enumerate(model.totals):
        if total > 0 and not np.any(a[model.group == g] > 0):
            raise InferError(
                f"--prior {path} contradicts the public information: every cell of a group whose public "
                f"total is {total} has alpha 0 (probability 0 for the published total)"
            )
    return Prior(a, f"Dirichlet-multinomial within each public total, concentrations from {os.path.basename(path)}")
