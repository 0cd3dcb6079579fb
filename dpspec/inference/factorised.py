"""Algorithm 2's proposal when the posterior factorises given the public totals.

With a Dirichlet-multinomial prior and answers whose likelihoods are independent given their
truths, the posterior is a product of per-cell prior weights and per-answer likelihoods, restricted
to the public totals. Cells that no released answer links are independent given those totals, so
it splits into components (a county's living and dead cases) coupled only through their group's
total:  p(x) ∝ Π_j φ_j(x_j)  on  {Σ_{j in g} sum(x_j) = N_g}.

Each component is enumerated on a window (every answer's truth where its likelihood is within
e^-WINDOW of its largest), its mass per sum m_j(s) tabulated, the components' sums drawn by
forward filtering and backward sampling within each group, then each component given its sum.
Inside the windows that is the posterior itself; the probability of each draw is recorded as it
is drawn, so mixed with a proposal of full support the importance weights stay exact whatever the
windows leave out (the effective sample size says how much that was).
"""

from __future__ import annotations

import attrs
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .prior import cell_log_weight
from dpspec.errors import DpspecError

WINDOW = 20.0  # an answer's truths kept: log-likelihood within this of the answer's largest
MAX_TABLE = 12_000_000  # answers x (sum of the totals + 1) log-likelihoods tabulated (96 MB)
MAX_BOX = 6_000_000  # a component's values inside the answers' windows
MAX_ENUMERATED = 40_000_000  # over all components
BATCH = 1000  # draws walked back at once (draws x a component's sums in memory)


@attrs.frozen
class Component:
    cells: np.ndarray  # target cells, in the order of `values`' columns
    values: np.ndarray  # (entries, cells) int64, sorted by their sum
    log_cond: np.ndarray  # log P(entry | its sum) under the window's law
    cum: np.ndarray  # k + cumulative P(entry | its sum) for the entries of sum smin + k: increasing
    starts: np.ndarray  # first entry of each sum smin..smax (size smax - smin + 2)
    keys: np.ndarray  # sorted mixed-radix codes of the entries, and
    key_order: np.ndarray  # the entry each sorted code belongs to
    lo: np.ndarray  # the cells' ranges (for the codes)
    span: np.ndarray
    smin: int
    log_mass: np.ndarray  # log m_j(s), s = smin..smax

    @property
    def size(self) -> int:
        return len(self.values)

    def draw(self, sk: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values given each draw's sum smin + sk (u in (0, 1]) and their log conditional probabilities."""
        a, b = self.starts[sk], self.starts[sk + 1]
        entry = np.clip(np.searchsorted(self.cum, sk + u, side="left"), a, np.maximum(b - 1, a))
        return self.values[entry], np.where(b > a, self.log_cond[entry], -np.inf)

    def lookup(self, vals: np.ndarray) -> np.ndarray:
        """log P(values | their sum) for rows of the component's values (-inf outside the windows)."""
        code = _codes(vals, self.lo, self.span)
        inbox = np.all((vals >= self.lo) & (vals < self.lo + self.span), axis=1)
        at = np.clip(np.searchsorted(self.keys, code), 0, self.keys.size - 1)
        found = inbox & (self.keys[at] == code)
        return np.where(found, self.log_cond[self.key_order[at]], -np.inf)


@attrs.frozen
class Pair:
    """A two-cell component whose answers are on the cells' sum s or on one cell d only, the other
    cell flat under the prior (concentration 1): its weight is f(s) h(d), so nothing is enumerated.
    m(s) = f(s) x (the mass of h on the d that fit s), and d given s is drawn from h on that range by
    inverting its cumulative sum; a county's living and dead cases take O(total) memory, not O(total^2).
    A range's mass is read from the cumulative sums from the left or from the right, whichever
    subtracts less (a range in a far tail of h keeps its relative precision)."""

    cells: np.ndarray
    dpos: int  # the position in `cells` of the cell d
    dlo: int
    logh: np.ndarray  # log h(d) - max log h on d = dlo..dhi
    cum: np.ndarray  # 0, then the cumulative sums of exp(logh) from the left
    rcum: np.ndarray  # the sums from each d to dhi, then 0
    alo: int  # the other cell's range
    ahi: int
    smin: int
    log_mass: np.ndarray

    @property
    def size(self) -> int:
        return 3 * self.logh.size + self.log_mass.size

    def _range(self, s):
        """Each sum's range of d (lo, hi: as indices into logh; hi < lo when empty), its mass, and
        whether that mass is read from the left."""
        n = self.logh.size
        lo = np.clip(np.maximum(self.dlo, s - self.ahi) - self.dlo, 0, n)
        hi = np.clip(np.minimum(self.dlo + n - 1, s - self.alo) - self.dlo, -1, n - 1)
        hi = np.maximum(hi, lo - 1)
        left = self.cum[lo] <= self.rcum[hi + 1]
        mass = np.where(left, self.cum[hi + 1] - self.cum[lo], self.rcum[lo] - self.rcum[hi + 1])
        return lo, hi, np.maximum(mass, 0.0), left

    def _log_cond(self, i, lo, hi, mass):
        with np.errstate(divide="ignore"):
            out = self.logh[np.clip(i, 0, self.logh.size - 1)] - np.log(np.where(mass > 0, mass, 1.0))
        return np.where((mass > 0) & (i >= lo) & (i <= hi), out, -np.inf)

    def _values(self, s, d):
        vals = np.empty((s.size, 2), dtype=np.int64)
        vals[:, self.dpos], vals[:, 1 - self.dpos] = d, s - d
        return vals

    def draw(self, sk: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.smin + sk
        lo, hi, mass, left = self._range(s)
        from_left = np.searchsorted(self.cum, self.cum[lo] + u * mass, side="left") - 1
        from_right = np.searchsorted(-self.rcum, -(self.rcum[hi + 1] + u * mass), side="right") - 1
        i = np.clip(np.where(left, from_left, from_right), lo, np.maximum(hi, lo))
        return self._values(s, self.dlo + i), self._log_cond(i, lo, hi, mass)

    def lookup(self, vals: np.ndarray) -> np.ndarray:
        s, d = vals.sum(axis=1), vals[:, self.dpos]
        lo, hi, mass, _ = self._range(s)
        return self._log_cond(d - self.dlo, lo, hi, mass)


@attrs.frozen
class Group:
    total: int
    parts: tuple  # Component, in filtering order
    forward: tuple  # (offset, linear values) of F_0..F_{J-1}: the sums of the first j components
    linear: tuple  # exp(log m_j - max log m_j) per component
    log_norm: float


@attrs.frozen
class Factorised:
    groups: tuple
    n_cells: int
    n_components: int

    def describe(self) -> str:
        return (
            f"the posterior factorises into {self.n_components} components linked only by {len(self.groups)} public "
            f"total(s); the proposal draws them exactly within windows (each answer's truth within e^-{WINDOW:g} of "
            "its largest likelihood), by forward filtering and backward sampling of the components' sums"
        )

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """n draws (n x K) and their log probabilities under this proposal."""
        x = np.zeros((n, self.n_cells), dtype=np.int64)
        logq = np.zeros(n)
        for g in self.groups:
            logq += _walk(g, n, rng, x)
        return x, logq

    def logpmf(self, x: np.ndarray) -> np.ndarray:
        """log q(x) for any rows of x (-inf outside the windows or off the totals)."""
        x = np.asarray(x, dtype=np.int64)
        logq = np.zeros(x.shape[0])
        for g in self.groups:
            logq += _walk(g, x.shape[0], None, x)
        return logq


def _tables(model):
    """Per block, log-likelihood of every truth 0..top for every answer; None if too large."""
    top = int(model.totals.sum())
    rows = sum(b.matrix.shape[0] for b in model.blocks)
    if rows * (top + 1) > MAX_TABLE:
        return None
    t = np.arange(top + 1, dtype=np.int64)
    out = []
    for b in model.blocks:
        r = b.matrix.shape[0]
        table = np.empty((top + 1, r))
        step = max(1, MAX_TABLE // (4 * max(r, 1)))
        for i in range(0, top + 1, step):
            chunk = t[i : i + step]
            table[i : i + step] = b.likelihood.logpmf(np.broadcast_to(chunk[:, None], (chunk.size, r)))
        out.append(table)
    return out


def _joint_standins(model, tables) -> list:
    """Each block's joint term (a normaliser over the release's vectors, coupling its answers) as a
    sum of per-answer functions, added to the answers' tables so that windows and proposal include it.

    g_r(t) = joint(c0 with answer r's truth set to t) - joint(c0), c0 the released answers: the term's
    first-order decomposition around the release (its cross effects cancel to first order on the
    vectors that meet the public total). Evaluated on a grid around each answer's release (steps
    1, 2, 3, 4, 6, 8, 12, ... each side, out to 0 and the total) and interpolated linearly between.
    Only the proposal uses it: the weights keep the exact joint term."""
    top = int(model.totals.sum())
    out = []
    for b, table in zip(model.blocks, tables):
        joint = b.likelihood.joint
        if joint is None:
            out.append(table)
            continue
        r = table.shape[1]
        c0 = np.clip(np.rint(np.asarray(b.likelihood.estimate, dtype=float)), 0, top).astype(np.int64)
        steps = np.unique(np.concatenate([[0], np.floor(np.sqrt(2.0) ** np.arange(2 * int(np.log2(top + 1)) + 4))]))
        steps = np.concatenate([-steps[::-1], steps[1:]]).astype(np.int64)
        grids = [np.unique(np.clip(c0[i] + steps, 0, top)) for i in range(r)]
        rows = np.repeat(np.arange(r), [g.size for g in grids])
        truth = np.repeat(c0[None, :], rows.size + 1, axis=0)
        moved = np.concatenate(grids)
        truth[1 + np.arange(rows.size), rows] = moved
        # the vectors one step off the release first: the plugin refuses a batch with any vector it
        # cannot certify, and evaluates each vector alone, so a refused probe means a refused grid
        # (at a sharp release, epsilon 10 on a month, it costs a second instead of the grid's ~26 s)
        probe = truth[1 + np.flatnonzero(np.abs(moved - c0[rows]) == 1)]
        probe = _evaluate(joint, probe) if probe.size else np.zeros(0)
        values = _evaluate(joint, truth) if probe is not None else None
        if values is None or not np.isfinite(values[0]):
            out.append(table)
            continue
        values = values[1:] - values[0]
        t = np.arange(top + 1)
        ends = np.cumsum([g.size for g in grids])
        columns = []
        for g, e in zip(grids, ends):
            v = values[e - g.size : e]
            ok = np.isfinite(v)  # -inf or NaN: interpolated over, flat beyond the last finite value
            columns.append(np.interp(t, g[ok], v[ok]) if ok.any() else np.zeros(t.size))
        out.append(_level(table + np.column_stack(columns), model))
    return out


def _evaluate(joint, truth: np.ndarray) -> np.ndarray | None:
    """joint(truth), or None where the plugin refuses to certify it (no stand-in then)."""

    try:
        return np.asarray(joint(truth), dtype=float)
    except DpspecError:
        return None


def _level(table: np.ndarray, model) -> np.ndarray:
    """Subtract k t from every answer's column, k set so that the answers' modes sum to the public
    total: on the vectors that meet it, k t changes every vector's weight by the same k N, so the
    law is unchanged, but each answer's window is then placed where the total lets it lie."""
    top = int(model.totals.sum())
    t = np.arange(table.shape[0], dtype=float)[:, None]

    def modes(k):
        return int(np.argmax(table - k * t, axis=0).sum())

    return table - _crossing(modes, top) * t


def _crossing(f, target: float, limit: float = 1e6) -> float:
    """The k where a function falling in k crosses target (bracketed by doubling, then bisection)."""
    lo, hi = -1.0, 1.0
    while f(lo) < target and lo > -limit:
        lo *= 2
    while f(hi) > target and hi < limit:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


def _windows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    peak = table.max(axis=0)
    inside = table >= (peak - WINDOW)[None, :]
    lo = np.argmax(inside, axis=0)
    hi = table.shape[0] - 1 - np.argmax(inside[::-1], axis=0)
    return lo, hi


def build(model, prior) -> tuple[Factorised | None, str]:
    """The factorised proposal, or None and why it does not apply."""
    k = model.n_cells
    tables = _tables(model)
    if tables is None:
        return None, "the public totals are too large to tabulate every answer's likelihood"
    tables = _joint_standins(model, tables)
    links = sp.csr_matrix((k, k))
    rows_of = []  # (block, row, cells, lo, hi)
    for b, table in zip(model.blocks, tables):
        m = b.matrix.tocsr()
        links = links + (m.T @ m)
        lo, hi = _windows(table)
        if not np.all(np.isfinite(table.max(axis=0))):
            return None, "an answer has probability 0 at every truth"
        for r in range(m.shape[0]):
            cells = m.indices[m.indptr[r] : m.indptr[r + 1]]
            if cells.size:
                rows_of.append((table, r, cells, int(lo[r]), int(hi[r])))
    n_comp, label = connected_components(links, directed=False)
    if any(np.unique(model.group[label == j]).size > 1 for j in range(n_comp)):
        return None, "answers link cells of different public totals"
    # each cell's range: its group total, narrowed by the answers' windows (interval propagation)
    lo_c = np.zeros(k, dtype=np.int64)
    hi_c = model.totals[model.group].astype(np.int64)
    hi_c[prior.alpha == 0] = 0
    for _ in range(3):
        for _, _, cells, lo_r, hi_r in rows_of:
            s_lo, s_hi = lo_c[cells].sum(), hi_c[cells].sum()
            hi_c[cells] = np.minimum(hi_c[cells], hi_r - (s_lo - lo_c[cells]))
            lo_c[cells] = np.maximum(lo_c[cells], lo_r - (s_hi - hi_c[cells]))
    if np.any(lo_c > hi_c):
        return None, "the answers' windows leave some cell no value"
    by_comp = {j: [] for j in range(n_comp)}
    for row in rows_of:
        by_comp[int(label[row[2][0]])].append(row)
    comps, enumerated = [], 0
    for j in range(n_comp):
        cells = np.flatnonzero(label == j)
        span = hi_c[cells] - lo_c[cells] + 1
        if float(np.prod(span.astype(float))) >= 2.0**62:  # the entries' codes are int64
            return None, f"a component of {cells.size} cells has too wide a window"
        comp = _component(cells, lo_c[cells], span, by_comp[j], prior.alpha)
        if isinstance(comp, str):
            return None, comp
        enumerated += comp.size
        if enumerated > MAX_ENUMERATED:
            return None, f"the components hold more than {MAX_ENUMERATED:,} values inside the answers' windows"
        comps.append(comp)
    groups = []
    for g, total in enumerate(model.totals):
        parts = tuple(c for c in comps if model.group[c.cells[0]] == g)
        grp = _filter(int(total), parts)
        if grp is None:
            return None, "the windows cannot meet a public total"
        groups.append(grp)
    return Factorised(tuple(groups), k, n_comp), ""


def _pair(cells, lo, span, rows, alpha) -> Pair | None:
    """The component as a Pair when its structure allows (see Pair), else None."""
    if cells.size != 2:
        return None
    single = {int(rc[0]) for _, _, rc, _, _ in rows if rc.size == 1}
    flat = [i for i in range(2) if int(cells[i]) not in single and alpha[cells[i]] == 1]
    if len(single) > 1 or not flat:
        return None
    ai = flat[0]
    di = 1 - ai
    dlo, dhi = int(lo[di]), int(lo[di] + span[di] - 1)
    alo, ahi = int(lo[ai]), int(lo[ai] + span[ai] - 1)
    d = np.arange(dlo, dhi + 1)
    s = np.arange(alo + dlo, ahi + dhi + 1)
    logh = cell_log_weight(alpha[int(cells[di])], d)
    logf = np.zeros(s.size)
    for table, r, rc, lo_r, hi_r in rows:
        if rc.size == 1:
            logh = logh + table[d, r]
        else:
            logf = logf + np.where((s >= lo_r) & (s <= hi_r), table[np.minimum(s, table.shape[0] - 1), r], -np.inf)
    top = logh.max()
    if not np.isfinite(top):
        return None
    h = np.exp(logh - top)
    cum = np.concatenate([[0.0], np.cumsum(h)])
    rcum = np.concatenate([np.cumsum(h[::-1])[::-1], [0.0]])
    pair = Pair(cells, di, dlo, logh - top, cum, rcum, alo, ahi, int(s[0]), np.zeros(0))
    mass = pair._range(s)[2]
    with np.errstate(divide="ignore"):
        log_mass = np.where(mass > 0, logf + top + np.log(np.where(mass > 0, mass, 1.0)), -np.inf)
    live = np.flatnonzero(np.isfinite(log_mass))
    if live.size == 0:
        return None
    return attrs.evolve(pair, smin=int(s[live[0]]), log_mass=log_mass[live[0] : live[-1] + 1])


def _component(cells, lo, span, rows, alpha) -> Component | Pair | str:
    """Enumerate a component's values inside every answer's window, cell after cell: a cell that
    completes an answer takes only the values that put the answer's truth in its window."""
    pair = _pair(cells, lo, span, rows, alpha)
    if pair is not None:
        return pair
    rows = [(table, r, [int(c) for c in rcells], lo_r, hi_r) for table, r, rcells, lo_r, hi_r in rows]
    n_rows = {int(c): sum(int(c) in rc for _, _, rc, _, _ in rows) for c in cells}
    order = sorted(range(cells.size), key=lambda i: (-n_rows[int(cells[i])], int(span[i])))
    done: list[int] = []
    values = np.zeros((1, 0), dtype=np.int64)
    logphi = np.zeros(1)
    for i in order:
        c = int(cells[i])
        low = np.full(len(values), int(lo[i]), dtype=np.int64)
        high = np.full(len(values), int(lo[i] + span[i] - 1), dtype=np.int64)
        completing = [row for row in rows if c in row[2] and set(row[2]) <= set(done) | {c}]
        for _, _, rc, lo_r, hi_r in completing:
            partial = values[:, [done.index(x) for x in rc if x != c]].sum(axis=1)
            low, high = np.maximum(low, lo_r - partial), np.minimum(high, hi_r - partial)
        count = np.maximum(high - low + 1, 0)
        if count.sum() > MAX_BOX:
            return f"a component of {cells.size} cells has more than {MAX_BOX:,} values inside the answers' windows"
        keep = np.repeat(np.arange(len(values)), count)
        first = np.cumsum(count) - count
        new = low[keep] + (np.arange(keep.size) - first[keep])
        values = np.column_stack([values[keep], new])
        weights = cell_log_weight(alpha[c], np.arange(int(lo[i]), int(lo[i] + span[i])))
        logphi = logphi[keep] + weights[new - lo[i]]
        done.append(c)
        for table, r, rc, _, _ in completing:
            truth = values[:, [done.index(x) for x in rc]].sum(axis=1)
            logphi = logphi + table[truth, r]
    back = np.argsort(order)
    values = values[:, back]  # columns in the order of `cells`
    keep = np.isfinite(logphi)
    if not keep.any():
        return "a component has no value inside the answers' windows"
    values, logphi = values[keep], logphi[keep]
    s = values.sum(axis=1)
    order = np.argsort(s, kind="stable")
    values, logphi, s = values[order], logphi[order], s[order]
    smin, smax = int(s[0]), int(s[-1])
    starts = np.searchsorted(s, np.arange(smin, smax + 2))
    counts = np.diff(starts)
    has = counts > 0
    top = np.full(counts.size, -np.inf)
    top[has] = np.maximum.reduceat(logphi, starts[:-1][has])
    seg = np.repeat(np.arange(counts.size), counts)
    lin = np.exp(logphi - top[seg])
    mass = np.zeros(counts.size)
    mass[has] = np.add.reduceat(lin, starts[:-1][has])
    log_mass = np.where(has, top + np.log(np.where(has, mass, 1.0)), -np.inf)
    p = lin / mass[seg]
    log_cond = np.log(p)
    total = np.cumsum(p)
    before = np.concatenate([[0.0], total[starts[1:-1] - 1]])  # the cumulative up to each sum's first entry
    cum = (total - np.repeat(before, counts)) + seg  # restarts at each sum k, shifted to (k, k + 1]
    codes = _codes(values, lo, span)
    key_order = np.argsort(codes, kind="stable")
    return Component(cells, values, log_cond, cum, starts, codes[key_order], key_order, lo, span, smin, log_mass)


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Full linear convolution of two nonnegative sequences (by FFT when both are long)."""
    if min(a.size, b.size) <= 64:
        return np.convolve(a, b)
    n = a.size + b.size - 1
    size = 1 << int(np.ceil(np.log2(n)))
    out = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n]
    return np.maximum(out, 0.0)  # rounding leaves tiny negatives where the true value is ~0


def _codes(values, lo, span) -> np.ndarray:
    code = np.zeros(len(values), dtype=np.int64)
    for i in range(values.shape[1]):
        code = code * int(span[i]) + (values[:, i] - lo[i])
    return code


def _filter(total: int, parts: tuple) -> Group | None:
    """Forward filtering: F_j(R) = Σ_s m_j(s) F_{j-1}(R - s), kept on the sums that can still meet
    the total; each F_j rescaled to its largest value (log scale carried)."""
    kappa = _saddle(total, parts)
    logm = [c.log_mass - kappa * np.arange(c.smin, c.smin + c.log_mass.size) for c in parts]
    smins = np.array([c.smin for c in parts], dtype=np.int64)
    smaxs = np.array([c.smin + c.log_mass.size - 1 for c in parts], dtype=np.int64)
    after_min = np.concatenate([np.cumsum(smins[::-1])[::-1][1:], [0]])
    after_max = np.concatenate([np.cumsum(smaxs[::-1])[::-1][1:], [0]])
    offset, values, log_scale = 0, np.ones(1), 0.0
    forward = []
    for j, c in enumerate(parts):
        forward.append((offset, values))
        top = float(logm[j].max())
        m = np.exp(logm[j] - top)
        conv = _convolve(values, m)
        new_off = offset + c.smin
        lo = max(new_off, total - int(after_max[j]))
        hi = min(new_off + conv.size - 1, total - int(after_min[j]))
        if lo > hi:
            return None
        conv = conv[lo - new_off : hi - new_off + 1]
        peak = conv.max()
        if not peak > 0:
            return None
        values, offset, log_scale = conv / peak, lo, log_scale + top + np.log(peak)
    if not (offset <= total < offset + values.size) or values[total - offset] <= 0:
        return None
    linear = tuple(np.exp(lm - lm.max()) for lm in logm)
    log_norm = log_scale + float(np.log(values[total - offset])) + kappa * total
    return Group(total, parts, tuple(forward), linear, log_norm)


def _saddle(total: int, parts: tuple) -> float:
    """The tilt k under which the components' sums, each weighted m_j(s) e^(-k s), have means adding
    up to the total. On the sums that meet the total e^(-k s) multiplies every vector by e^(-k total),
    so the law is unchanged; the forward tables are then largest near the total, not 10^-300 below
    their peak there (where the transforms' rounding would leave nothing)."""
    if len(parts) < 2:
        return 0.0

    width = max(c.log_mass.size for c in parts)
    logm = np.full((len(parts), width), -np.inf)
    for j, c in enumerate(parts):
        logm[j, : c.log_mass.size] = c.log_mass
    s = np.array([c.smin for c in parts], dtype=float)[:, None] + np.arange(width)[None, :]

    def means(k):
        lw = logm - k * s
        p = np.exp(lw - lw.max(axis=1, keepdims=True))
        return float(((p * s).sum(axis=1) / p.sum(axis=1)).sum())

    return _crossing(means, total, limit=1e3)


def _walk(g: Group, n: int, rng, x: np.ndarray) -> np.ndarray:
    """Backward sampling of the components' sums and values (rng given: draw into x), or the log
    probability of the values already in x (rng None), step by step as the sampler draws them."""
    logq = np.zeros(n)
    for start in range(0, n, BATCH):
        rows = slice(start, min(n, start + BATCH))
        m = rows.stop - rows.start
        left = np.full(m, g.total, dtype=np.int64)
        ok = np.ones(m, dtype=bool)
        for c, (off, f), lin in zip(g.parts[::-1], g.forward[::-1], g.linear[::-1]):
            width = lin.size
            sums = np.arange(c.smin, c.smin + width)
            # w[d, i] = m(smin + i) F(left_d - smin - i): a reversed slice of F, read from a zero-padded view
            padded = np.concatenate([np.zeros(width), f, np.zeros(width)])
            view = np.lib.stride_tricks.sliding_window_view(padded, width)
            at = np.clip(left - off - c.smin + 1, 0, view.shape[0] - 1)
            w = view[at][:, ::-1] * lin[None, :]
            tot = w.sum(axis=1)
            good = tot > 0
            if rng is not None:
                u = (1.0 - rng.random(m)) * tot
                pick = np.minimum((np.cumsum(w, axis=1) < u[:, None]).sum(axis=1), sums.size - 1)
                s = sums[pick]
            else:
                s = x[rows][:, c.cells].sum(axis=1)
                pick = np.clip(s - c.smin, 0, sums.size - 1)
                good &= (s >= c.smin) & (s < c.smin + sums.size)
            chosen = w[np.arange(m), pick]
            good &= chosen > 0
            with np.errstate(divide="ignore"):
                logq[rows] += np.where(
                    good, np.log(np.where(good, chosen, 1.0)) - np.log(np.where(good, tot, 1.0)), -np.inf
                )
            ok &= good
            sk = np.clip(s - c.smin, 0, sums.size - 1)
            if rng is not None:
                vals, log_cond = c.draw(sk, 1.0 - rng.random(m))  # u in (0, 1]
                x[rows.start + np.arange(m)[:, None], c.cells[None, :]] = vals
                logq[rows] += log_cond
            else:
                logq[rows] += c.lookup(x[rows][:, c.cells])
            left = left - s
        logq[rows] = np.where(ok & (left == 0), logq[rows], -np.inf)
    return logq
