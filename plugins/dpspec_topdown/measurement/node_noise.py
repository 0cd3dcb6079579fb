"""A node's noisy measurements, drawn inside the node's unit of work rather than on the driver.

Why: the dense noisy answers of a level (every unit x every cell of every query) are the largest
thing TopDown makes: 4.4 GB at 10M persons with the production strategy, some 170 GB for a
nation. A node's children need only their own, so each unit of work receives its children's
confidential histograms (sparse, a slice of what the driver already holds) and draws the noise
from the stream keyed ("topdown noise", (level, parent code)), query after query in the level's
order: the same draws the driver used to make for the whole level. It hands back, with its
solution, where in its stream each query's draws began (`stream_position`), so the published
measurements can later be re-drawn one query of one node at a time (`measurements.py`). A run
without an engine does the same with a run key drawn from its generator (`run_key_from`), so it
publishes what an engine run with that key publishes and never holds a level's answers whole.

Sparse noise (a query with more than KEYED_GROUPS groups: the DHC detailed query's 1,227,744):
a dense row per child would be most of a run's time and memory, yet the fit reads only the
answers of groups holding one of its variables (a cell positive in the parent and not forced to
0). With nonnegativity and children summing to the parent, a cell that is 0 in the parent is 0
in every child whatever its measurement, and a group without a variable adds a constant to the
objective: its answer cannot change the solution. Such a query's answer for (child, group) is
therefore drawn from its own keyed stream (`keyed_discrete_gaussian`, key (CELL_STAGE, level,
parent code, query, child, group)), only when the fit asks for it (`KeyedAnswers`): the same
value whichever other answers are drawn, so the release has the distribution drawing every
answer would give, and the published measurements re-draw exactly these values.
"""

from __future__ import annotations

import time
from typing import Sequence

import attrs
import numpy as np
import scipy.sparse as sp

from dpspec.api import (
    KeyColumns,
    discrete_gaussian,
    keyed_discrete_gaussian,
    keyed_rng,
    record_measurement,
    stream_position,
)

STAGE = "topdown noise"  # the stream's stage name; with (level, parent code) it keys one node's stream
CELL_STAGE = "topdown cell noise"  # with (level, parent code, query, child, group): one answer's stream
KEYED_GROUPS = 1 << 16  # a query with more groups draws each answer from its own stream, on demand


def run_key_from(rng: np.random.Generator) -> int:
    """A run key (256 bits) drawn from `rng`, for a run without an engine: its nodes then draw
    from the same keyed streams as an engine run with that key, and publish the same release."""
    return int.from_bytes(rng.bytes(32), "little")  # as the SafeTab and PHSafe plugins draw theirs


def keyed(n_groups: int) -> bool:
    """Whether a query's answers are drawn one keyed stream per (child, group) (see module doc):
    a fixed property of the query, so the nodes and the published measurements agree."""
    return n_groups > KEYED_GROUPS


@attrs.frozen
class NodeNoise:
    """What a node needs to draw its children's noisy answers (picklable, no secrets but the run key,
    which every unit of work receives anyway)."""

    run_key: int
    key: tuple  # (level name, parent code): the node's stream
    sigma2: tuple  # exact sigma² of every measured query, in the level's order
    truth: sp.csr_matrix  # (n_children x n_cells) int64 confidential histograms of the children
    # the optimized spine (spine.py): each child's budget class, and per query the sigma² of every
    # class (class 0's is `sigma2`); None when every child spends the level's share
    classes: np.ndarray | None = None
    class_sigma2: tuple | None = None  # per query: {class: sigma²}
    sensitivity2: tuple | None = None  # per query: its squared L2 sensitivity s² (for `dpspec verify --replay`)


def group_sums(hist: sp.spmatrix, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Dense (rows x n_groups) int64 sums of a histogram's cells by group: a marginal's answers
    (from the histogram's nonzero entries: no cell x group indicator over 1.2M DHC cells)."""
    h = sp.coo_matrix(hist)
    flat = h.row.astype(np.int64) * n_groups + groups[h.col]
    return (
        np.bincount(flat, weights=h.data, minlength=h.shape[0] * n_groups)
        .astype(np.int64)
        .reshape(h.shape[0], n_groups)
    )


def draw_node_noise(noise: NodeNoise, queries: Sequence) -> tuple[tuple, np.ndarray, float]:
    """(noisy answers per query, stream position before each query's draws, seconds).

    queries: the level's MeasuredQuery list (their cell -> group maps), in the order of `sigma2`."""
    t0 = time.perf_counter()
    rng = keyed_rng(noise.run_key, STAGE, noise.key)
    answers, positions = [], []
    for j, (q, sigma2) in enumerate(zip(queries, noise.sigma2, strict=True)):
        positions.append(stream_position(rng))
        if keyed(q.n_groups):  # drawn on demand, from the answers' own streams: not from `rng`
            built = KeyedAnswers.build(noise, j, q)
            # a replay compares the whole query: its nonzero answers, every other one 0 (sparse)
            record_measurement(
                f"{noise.key[0]}/{noise.key[1]}/{q.name}",
                built.truth_values,
                "discrete_gaussian",
                sigma2,
                sensitivity=None if noise.sensitivity2 is None else noise.sensitivity2[j] ** 0.5,
                keys=lambda b=built: np.divmod(b.truth_keys, b.n_groups),
                sparse=True,
            )
            answers.append(built)
            continue
        y = group_sums(noise.truth, q.groups, q.n_groups)
        record_measurement(
            f"{noise.key[0]}/{noise.key[1]}/{q.name}",
            y,
            "discrete_gaussian",
            sigma2,
            sensitivity=None if noise.sensitivity2 is None else noise.sensitivity2[j] ** 0.5,
        )
        if noise.classes is None:
            y += discrete_gaussian(sigma2, y.shape, rng)
        else:
            add_class_noise(y, noise.classes, noise.class_sigma2[j], rng)
        answers.append(y)
    return tuple(answers), np.array(positions, dtype=np.uint64), time.perf_counter() - t0


def sparse_group_sums(hist: sp.spmatrix, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat keys child * n_groups + group, sums) of a histogram's nonzero group sums, sorted:
    a marginal's answers without a dense row per child."""
    h = sp.coo_matrix(hist)
    flat, where = np.unique(h.row.astype(np.int64) * n_groups + groups[h.col], return_inverse=True)
    sums = np.bincount(where, weights=h.data, minlength=flat.size).astype(np.int64)
    keep = sums != 0
    return flat[keep], sums[keep]


def keyed_answers(
    run_key: int,
    node_key: tuple,
    query: str,
    n_groups: int,
    flat: np.ndarray,
    truth: tuple,
    sigma2,
    classes: np.ndarray | None = None,
    class_sigma2: dict | None = None,
) -> np.ndarray:
    """Noisy answers of one query at one node at entries ``flat`` (child * n_groups + group,
    children numbered within the node): the confidential sum (``truth``: sorted (flat, sum) of
    the nonzero ones) plus noise from each entry's own keyed stream (CELL_STAGE); under the
    optimized spine each child's class's sigma², and 0 for a bypassed child (class < 0, not
    measured, as `add_class_noise`)."""
    children, groups = np.divmod(np.asarray(flat, dtype=np.int64), n_groups)
    y = sorted_lookup(*truth, flat) + keyed_noise(
        run_key, node_key, query, children, groups, sigma2, classes, class_sigma2
    )
    if classes is not None:
        y[classes[children] < 0] = 0
    return y


def keyed_noise(
    run_key: int,
    node_key: tuple,
    query: str,
    children: np.ndarray,
    groups: np.ndarray,
    sigma2,
    classes: np.ndarray | None = None,
    class_sigma2: dict | None = None,
) -> np.ndarray:
    """The noise of answers (children[i], groups[i]) of one query at one node, each from its own
    keyed stream (CELL_STAGE), with its child's class's sigma² under the optimized spine (none
    for a bypassed child)."""
    out = np.zeros(children.size, dtype=np.int64)
    if classes is None:
        parts = [(np.arange(children.size), sigma2)]
    else:
        cls = classes[children]
        parts = [(np.flatnonzero(cls == c), class_sigma2[c]) for c in sorted(class_sigma2)]
    for rows, s2 in parts:
        if rows.size:
            keys = KeyColumns((CELL_STAGE, *node_key, query), (children[rows], groups[rows]))
            out[rows] = keyed_discrete_gaussian(s2, run_key, keys, 1)
    return out


class KeyedAnswers:
    """A keyed query's noisy answers at one node, drawn when first asked for (`at`) and kept.

    Behaves as the (n_children x n_groups) array it stands for, of which only the entries read
    are ever made: confidential sum plus noise from the entry's own stream."""

    def __init__(
        self,
        run_key,
        node_key,
        query,
        n_children,
        n_groups,
        truth_keys,
        truth_values,
        sigma2,
        classes=None,
        class_sigma2=None,
    ):
        self.run_key, self.node_key, self.query = run_key, node_key, query
        self.n_children, self.n_groups = n_children, n_groups
        self.truth_keys, self.truth_values = truth_keys, truth_values
        self.sigma2, self.classes, self.class_sigma2 = sigma2, classes, class_sigma2
        self.keys = np.zeros(0, dtype=np.int64)  # drawn entries (flat child * n_groups + group), sorted
        self.values = np.zeros(0, dtype=np.int64)
        self.seconds = 0.0

    @classmethod
    def build(cls, noise: NodeNoise, j: int, q) -> "KeyedAnswers":
        keys, values = sparse_group_sums(noise.truth, q.groups, q.n_groups)
        return cls(
            noise.run_key,
            noise.key,
            q.name,
            noise.truth.shape[0],
            q.n_groups,
            keys,
            values,
            noise.sigma2[j],
            noise.classes,
            noise.class_sigma2[j] if noise.class_sigma2 is not None else None,
        )

    def at(self, flat: np.ndarray) -> np.ndarray:
        """The noisy answers of entries ``flat`` (child * n_groups + group), as float64."""
        flat = np.asarray(flat, dtype=np.int64)
        need = _sorted_unique(flat[~_members(self.keys, flat)])  # entries not drawn yet
        if need.size:
            t0 = time.perf_counter()
            y = keyed_answers(
                self.run_key,
                self.node_key,
                self.query,
                self.n_groups,
                need,
                (self.truth_keys, self.truth_values),
                self.sigma2,
                self.classes,
                self.class_sigma2,
            )
            if self.keys.size:
                merged = np.concatenate([self.keys, need])
                order = np.argsort(merged, kind="stable")
                self.keys, self.values = merged[order], np.concatenate([self.values, y])[order]
            else:
                self.keys, self.values = need, y
            self.seconds += time.perf_counter() - t0
        return sorted_lookup(self.keys, self.values, flat).astype(np.float64)


def _members(keys: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """Whether each of ``flat`` is in the sorted ``keys``."""
    if not keys.size:
        return np.zeros(flat.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(keys, flat), keys.size - 1)
    return keys[pos] == flat


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique(values), without its sort when ``values`` already increase (a fit asks for its
    groups' keys in order: millions of them at a DHC root)."""
    if values.size < 2 or bool(np.all(values[1:] > values[:-1])):
        return values
    return np.unique(values)


def sorted_lookup(keys: np.ndarray, values: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """values at ``flat`` of a sorted (keys, values) map, 0 where absent."""
    if not keys.size:
        return np.zeros(np.shape(flat), dtype=values.dtype)
    pos = np.minimum(np.searchsorted(keys, flat), keys.size - 1)
    return np.where(keys[pos] == flat, values[pos], 0)


def answers_at(y, flat: np.ndarray) -> np.ndarray:
    """Noisy answers at flat entries child * n_groups + group of a dense array or KeyedAnswers."""
    if isinstance(y, KeyedAnswers):
        return y.at(flat)
    return np.asarray(y, dtype=np.float64).ravel()[flat]


def add_class_noise(y: np.ndarray, classes: np.ndarray, sigma2: dict, rng) -> None:
    """Noise for rows of several budget classes, class by class in increasing order (one
    order, so a re-draw from the same stream position gives the same numbers); rows of a
    bypassed unit (class < 0) are not measured and set to 0."""
    for c in sorted(sigma2):
        rows = np.flatnonzero(classes == c)
        if rows.size:
            y[rows] += discrete_gaussian(sigma2[c], (rows.size, y.shape[1]), rng)
    y[classes < 0] = 0


@attrs.frozen
class LevelNoise:
    """Where a level's noise came from, node by node: enough to re-draw any query of any node.

    Nodes are in unit order; node i's children are units [starts[i], stops[i]) of the level
    (children of one parent are contiguous), its stream is keyed (level, keys[i]) and its draws
    for the level's j-th query began at positions[i, j]."""

    starts: np.ndarray  # (n_nodes,) int64
    stops: np.ndarray  # (n_nodes,) int64
    keys: tuple  # (level name, parent code) per node
    positions: np.ndarray  # (n_nodes, n_queries) uint64
