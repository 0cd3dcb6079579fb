"""A node's noisy measurements, drawn inside the node's unit of work rather than on the driver.

Why: the dense noisy answers of a level (every unit x every cell of every query) are the largest
thing TopDown makes: 4.4 GB at 10M persons with the production strategy, some 170 GB for a
nation. A node's children need only their own, so each unit of work receives its children's
confidential histograms (sparse, a slice of what the driver already holds) and draws the noise
from the stream keyed ("topdown noise", (level, parent code)), query after query in the level's
order: the same draws the driver used to make for the whole level. It hands back, with its
solution, where in its stream each query's draws began (`stream_position`), so the published
measurements can later be re-drawn one query of one node at a time (`measurements.py`).
"""
from __future__ import annotations

import time
from typing import Sequence

import attrs
import numpy as np
import scipy.sparse as sp

from dpspec.api import discrete_gaussian, keyed_rng, stream_position

STAGE = "topdown noise"  # the stream's stage name; with (level, parent code) it keys one node's stream


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


def group_sums(hist: sp.spmatrix, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Dense (rows x n_groups) int64 sums of a histogram's cells by group: a marginal's answers."""
    n_cells = hist.shape[1]
    indicator = sp.csr_matrix((np.ones(n_cells, dtype=np.int64), (np.arange(n_cells), groups)),
                              shape=(n_cells, n_groups))
    return np.asarray((hist @ indicator).toarray(), dtype=np.int64)


def draw_node_noise(noise: NodeNoise, queries: Sequence) -> tuple[tuple, np.ndarray, float]:
    """(noisy answers per query, stream position before each query's draws, seconds).

    queries: the level's MeasuredQuery list (their cell -> group maps), in the order of `sigma2`."""
    t0 = time.perf_counter()
    rng = keyed_rng(noise.run_key, STAGE, noise.key)
    answers, positions = [], []
    for j, (q, sigma2) in enumerate(zip(queries, noise.sigma2, strict=True)):
        positions.append(stream_position(rng))
        y = group_sums(noise.truth, q.groups, q.n_groups)
        if noise.classes is None:
            y += discrete_gaussian(sigma2, y.shape, rng)
        else:
            add_class_noise(y, noise.classes, noise.class_sigma2[j], rng)
        answers.append(y)
    return tuple(answers), np.array(positions, dtype=np.uint64), time.perf_counter() - t0


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

