"""Post-processing-only constraints and production's repair heuristic.

Production (das_decennial, programs/optimization/geo_optimizers.py:48-53) leaves the constraints
named in `postprocess_only_constr_names` out of every least-squares and rounding solve; after a
node's last rounding, `L2PlusRounder_interleaved.postprocess` (sequential_optimizers.py:292-459, 537-660)
repairs the children one by one: for each such constraint and each violated row it moves one
record at a time from one detailed cell to another of the same child, both in the same group of
the conditional constraint (the P.L. 94 equality), so that constraint and every invariant stay
exact. The cell that takes a record never lies in a row of that constraint that is already
binding or failing; a move that would break another constraint (the structural zeros) is
refused, and at the levels listed in `require_feasible_postproc_dim` the record may also change
the one other variable those constraints involve (age, within its P.L. 94 group). A row it
cannot repair is left as it is (constraintsCheck, manipulate_nodes.py:235-276, then skips the
post-processing-only constraints) except at those levels, where the check asserts and the run
stops.

dpspec does the same on a node's sparse result (child, cell, count), vectorized over the
candidate moves; it loops over violating children and rows, one move per iteration (bounded by
the violation). Two choices differ from production, both to make the release reproducible:
production takes the donor cells in a random order of an unseeded generator and, for each, the
recipient whose move gives the smallest weighted squared residual against the child's noisy
measurements (`choose_candidate_ind`, `mse_obj_fxn`); dpspec takes the (donor, recipient) pair
with the smallest change of that same objective, ties to the lowest cells. "Same conditional
group" is "same group of every exact marginal the child is held to" (equal_to targets and
invariants), which for the DHC is production's conditional constraint.
"""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np

from dpspec.api import LazyModule

from ..wording import counted
from ..measurement.histogram import marginal

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
# the engine's module (scipy); kept out of `check`
_node_noise = LazyModule("dpspec_topdown.measurement.node_noise", "_node_noise", globals())
_postprocess = LazyModule("dpspec_topdown.estimation.postprocess", "_postprocess", globals())

_CHUNK = 4_000_000  # candidate moves scored at once (memory: a few arrays of this length)


@attrs.frozen
class PostprocessOnly:
    """What a node needs to repair its children after rounding (picklable)."""

    bounds: tuple  # of postprocess.BoundConstraint, in the order they are repaired
    senses: tuple  # per bound: ("upper", "lower"), ("upper",) or ("lower",), repaired in that order
    axis: tuple  # per bound: (stride, size) of the variable its marginal groups
    zero_cells: np.ndarray | None = None  # (n_cells,) bool: structural zeros
    secondary: tuple | None = None  # (stride, size): the other variable a move may change
    require_feasible: bool = False  # production's require_feasible_postproc_dim at this level


def repair(task, queries: Sequence, child: np.ndarray, cell: np.ndarray, count: np.ndarray):
    """(child, cell, count, moves, unrepaired): the node's children after the heuristic.

    unrepaired: (child index, constraint name, group, count, lower, upper) per row left broken."""
    pp = task.postprocess
    moves, unrepaired = 0, []
    order = np.lexsort((cell, child))
    child, cell, count = child[order], cell[order], count[order].astype(np.int64)
    bad = np.zeros(task.n_children, dtype=bool)
    for b in pp.bounds:
        got = np.zeros((task.n_children, b.n_groups), dtype=np.int64)
        np.add.at(got, (child, b.groups[cell]), count)
        bad |= ((got < b.lower) | (got > b.upper)).any(axis=1)
    if not bad.any():
        return child, cell, count, 0, ()
    keep_c, keep_cell, keep_n = [child[~bad[child]]], [cell[~bad[child]]], [count[~bad[child]]]
    for c in np.flatnonzero(bad):  # only children with a broken row
        sel = child == c
        state = _Child(task, queries, int(c), cell[sel], count[sel])
        for b, senses, axis in zip(pp.bounds, pp.senses, pp.axis):
            for sense in senses:
                moves += state.repair_bound(b, sense, axis, unrepaired)
        n = state.count > 0
        keep_c.append(np.full(int(n.sum()), c, dtype=np.int64))
        keep_cell.append(state.cell[n])
        keep_n.append(state.count[n])
    child, cell, count = np.concatenate(keep_c), np.concatenate(keep_cell), np.concatenate(keep_n)
    order = np.lexsort((cell, child))
    return child[order], cell[order], count[order], moves, tuple(unrepaired)


class _Child:
    """One child's sparse histogram and its noisy measurements (answers kept sparse: a child's
    detailed query has a million groups, of which it holds a few)."""

    def __init__(self, task, queries, c: int, cell: np.ndarray, count: np.ndarray):
        self.task, self.c = task, c
        self.cell, self.count = cell.astype(np.int64), count.astype(np.int64)
        scale = 1.0 if task.child_scale is None else float(task.child_scale[c])
        wmax = max((q.weight for q in queries), default=1.0)
        self.queries = []  # (groups, weight, the node's noisy answers, dense or keyed) per measured query
        for q, y in zip(queries, task.measurements):
            w = q.weight / wmax * scale
            if w != 0:
                self.queries.append((q, w, y))
        self.exact = [con.groups for con in task.constraints]
        self._answers = None  # per query: (sorted groups holding persons, their counts)

    def _residual(self, n: int, g: np.ndarray) -> np.ndarray:
        """answer - noisy of query n at groups g."""
        if self._answers is None:
            held = self.count > 0
            self._answers = []
            for q, _, _ in self.queries:
                keys, inverse = np.unique(q.groups[self.cell[held]], return_inverse=True)
                self._answers.append((keys, np.bincount(inverse, weights=self.count[held], minlength=keys.size)))
        keys, sums = self._answers[n]
        i = np.minimum(np.searchsorted(keys, g), max(keys.size - 1, 0))
        ans = np.where(keys[i] == g, sums[i], 0.0) if keys.size else np.zeros(g.size)

        q, _, y = self.queries[n]
        return ans - _node_noise.answers_at(y, self.c * q.n_groups + np.asarray(g, dtype=np.int64))

    def _sum(self, b) -> np.ndarray:
        return np.bincount(b.groups[self.cell], weights=self.count, minlength=b.n_groups).astype(np.int64)

    def repair_bound(self, b, sense: str, axis, unrepaired: list) -> int:
        pp = self.task.postprocess
        lo, hi = b.lower[self.c], b.upper[self.c]
        moves = 0
        got = self._sum(b)
        rows = np.flatnonzero(got > hi) if sense == "upper" else np.flatnonzero(got < lo)
        for g in rows:
            while (got[g] > hi[g]) if sense == "upper" else (got[g] < lo[g]):
                # the receiving side never lies in a row of this bound that binds or fails
                blocked = (got >= hi) if sense == "upper" else (got <= lo)
                move = self._best_move(b, sense, int(g), blocked, axis, None)
                if move is None and pp.secondary is not None and pp.require_feasible:
                    move = self._best_move(b, sense, int(g), blocked, axis, pp.secondary)
                if move is None:
                    unrepaired.append((self.c, b.name, int(g), int(got[g]), int(lo[g]), float(hi[g])))
                    break
                self._apply(*move)
                moves += 1
                got = self._sum(b)
        return moves

    def _best_move(self, b, sense, g, blocked, axis, secondary):
        """(src, dst) cells: one record leaves src for dst, or None when no move keeps the rest."""
        stride, size = axis
        if sense == "upper":  # a record leaves row g for a row that is not blocked
            base = self.cell[(self.count > 0) & (b.groups[self.cell] == g)]
        else:  # a record of a row that is not blocked enters row g
            base = self.cell[(self.count > 0) & ~blocked[b.groups[self.cell]]]
        if base.size == 0:
            return None
        best = None
        step = max(1, _CHUNK // (size * (secondary[1] if secondary else 1)))
        for s in range(0, base.size, step):
            src, dst = _alternatives(base[s : s + step], stride, size, secondary)
            ok = src != dst
            if sense == "upper":
                ok &= ~blocked[b.groups[dst]]
            else:
                ok &= b.groups[dst] == g
            if self.task.postprocess.zero_cells is not None:
                ok &= ~self.task.postprocess.zero_cells[dst]
            for groups in self.exact:
                ok &= groups[src] == groups[dst]
            src, dst = src[ok], dst[ok]
            if src.size == 0:
                continue
            cost = self._delta(src, dst)
            i = int(np.lexsort((dst, src, cost))[0])
            if best is None or (cost[i], src[i], dst[i]) < best:
                best = (float(cost[i]), int(src[i]), int(dst[i]))
        return None if best is None else best[1:]

    def _delta(self, src, dst) -> np.ndarray:
        """Change of sum_q w_q |answer - noisy|^2 when one record moves from src to dst."""
        out = np.zeros(src.size)
        for n, (q, w, _) in enumerate(self.queries):
            gs, gd = q.groups[src], q.groups[dst]
            moved = np.flatnonzero(gs != gd)
            if moved.size:
                out[moved] += w * (2.0 * (self._residual(n, gd[moved]) - self._residual(n, gs[moved])) + 2.0)
        return out

    def _apply(self, src: int, dst: int) -> None:
        i = int(np.searchsorted(self.cell, src))
        self.count[i] -= 1
        j = int(np.searchsorted(self.cell, dst))
        if j < self.cell.size and self.cell[j] == dst:
            self.count[j] += 1
        else:
            self.cell = np.insert(self.cell, j, dst)
            self.count = np.insert(self.count, j, 1)
        self._answers = None


def _alternatives(base: np.ndarray, stride: int, size: int, secondary):
    """(src, dst): every cell that differs from a base cell in the bounded variable (and, with
    ``secondary`` = (stride, size), also in that variable), paired with it."""
    value = (base // stride) % size
    dst = (base - value * stride)[:, None] + np.arange(size)[None, :] * stride
    src = np.broadcast_to(base[:, None], dst.shape)
    if secondary is not None:
        s2, n2 = secondary
        v2 = (dst // s2) % n2
        dst = (dst - v2 * s2)[:, :, None] + np.arange(n2)[None, None, :] * s2
        src = np.broadcast_to(base[:, None, None], dst.shape)
    return src.ravel(), dst.ravel()


# ---- the engine's side: which bounds, per level, and what a run reports --------------------


def split_bounds(level_bounds: list, names: Sequence[str]) -> tuple[list, list]:
    """(bounds the solves keep, post-processing-only bounds) of engine._level_bounds' list."""
    names = set(names)
    return [b for b in level_bounds if b[0] not in names], [b for b in level_bounds if b[0] in names]


def secondary_axis(schema, structural_zeros, bounded: Sequence[str]):
    """(stride, size) of the one variable other than the bounded ones that the structural zeros
    involve (production's rem_constrs_expanded_dim: age), or None if there is not exactly one."""
    axes = {schema._factor(f)[0] for f in bounded}
    others = sorted({schema.names.index(v) for spec in (structural_zeros or {}).values() for v in spec} - axes)
    if len(others) != 1:
        return None
    return _stride(schema, others[0]), schema.shape[others[0]]


def _stride(schema, axis: int) -> int:
    return int(np.prod(schema.shape[axis + 1 :], dtype=np.int64))


def with_postprocess(
    tasks, spans, k: int, level: str, pp_bounds: list, schema, zero_cells, secondary, feasible_levels: Sequence[str]
):
    """Each node's PostprocessOnly: its children's rows of the post-processing-only bounds."""
    axes = tuple(
        (_stride(schema, schema._factor(q[0])[0]), schema.shape[schema._factor(q[0])[0]]) for _, _, _, q, _ in pp_bounds
    )
    out = []
    for t in tasks:
        a = spans[t.key][0]
        b = a + t.n_children
        bounds = tuple(
            _postprocess.BoundConstraint(name, groups, ng, per_level[k][0][a:b], per_level[k][1][a:b])
            for name, groups, ng, _, per_level in pp_bounds
        )
        out.append(
            attrs.evolve(
                t,
                postprocess=PostprocessOnly(
                    bounds, (("upper", "lower"),) * len(bounds), axes, zero_cells, secondary, level in feasible_levels
                ),
            )
        )
    return out


def group_label(schema, query: tuple, group: int) -> str:
    axis, group_of, _ = schema._factor(query[0])
    if group_of is None:
        return str(schema.categories[axis][group])
    return str(next(r.labels[group] for r in schema.recodes if r.name == query[0]))


def level_report(results, tasks, spans, codes, level: str, schema, pp_bounds: list) -> list[dict]:
    """One entry per row a node left broken: level, geounit, constraint, group, count, bounds."""
    queries = {name: q for name, _, _, q, _ in pp_bounds}
    start = {t.key: spans[t.key][0] for t in tasks}
    out = []
    for r in results:
        for c, name, g, got, lo, hi in r.unrepaired:
            out.append(
                {
                    "level": level,
                    "geounit": _plain(codes[start[r.key] + c]) if codes is not None else "all",
                    "constraint": name,
                    "group": group_label(schema, queries[name], g),
                    "count": got,
                    "lower": lo,
                    "upper": None if not np.isfinite(hi) else int(hi),
                }
            )
    return out


def _plain(code) -> str:
    return str(code.item() if isinstance(code, np.generic) else code)


def describe(entry: dict) -> str:
    upper = "no upper bound" if entry["upper"] is None else f"at most {entry['upper']}"
    return (
        f"post-processing could not repair {entry['constraint']} at {entry['level']} {entry['geounit']}, "
        f"group {entry['group']}: {counted(entry['count'], 'person')}, at least {entry['lower']} and {upper}"
    )


def release_violations(hier, schema, protected, pp_bounds) -> list[dict]:
    """Every (level, unit, constraint, group) the release breaks: what the facts report."""

    out = []
    for name, _, _, q, per_level in pp_bounds:
        for k, h in sorted(protected.items()):
            got = marginal(h, schema, q)
            lo, hi = per_level[k]
            for u, g in np.argwhere((got < lo) | (got > hi)):
                out.append(
                    {
                        "level": hier.names[k],
                        "geounit": _plain(hier.levels[k].codes[u]),
                        "constraint": name,
                        "group": group_label(schema, q, int(g)),
                        "count": int(got[u, g]),
                        "lower": int(lo[u, g]),
                        "upper": None if not np.isfinite(hi[u, g]) else int(hi[u, g]),
                    }
                )
    return out
