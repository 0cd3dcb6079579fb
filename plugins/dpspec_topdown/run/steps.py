"""The steps of a TopDown run that the person table and a joint table share (engine, joint_run).

Finest units, structural zeros, invariants, budget classes, each level's node tasks and noise
plans, the release's assembly and verification, and the result a run returns.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping, Sequence

import attrs
import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec.api import MechanismError, SpecError, effective_sigma2

from ..measurement.allocation import Allocation, query_name
from ..geography.hierarchy import Hierarchy
from ..measurement.histogram import Schema, aggregate, marginal
from ..estimation.invariant_chain import check_chain
from ..broken import Broken
from ..measurement.node_noise import LevelNoise, NodeNoise
from ..estimation.postprocess import FailsafeError, GroupConstraint, NodeError, NodeTask
from ..geography.spine import BYPASSED, bypass_classes, check_budget_per_person, class_share, group_sum, unit_groups
from ..wording import counted
from ..release.parts import PartWriter
from ..release.tables import CHUNK_ROWS, microdata_table, measurements_table


@attrs.define
class TopDownResult:
    """The protected histograms, what the noisy measurements are made of, and how the run went.

    The release tables are streamed (`microdata_table`, `measurements_table`): neither is held
    whole. `microdata` and `measurements` read them into frames, for small runs and tests."""

    schema: Schema
    hierarchy: Hierarchy
    allocation: Allocation
    noisy: dict  # (level, query) -> (units x groups) noisy answers drawn whole; empty: the nodes draw their own
    histograms: dict  # level -> protected (units x cells) csr histogram
    timings: dict
    total_rho: Fraction
    rho_spent: Fraction
    confidential: dict = attrs.Factory(dict)  # level -> confidential (units x cells) csr
    noise_plans: dict = attrs.Factory(dict)  # level -> node_noise.LevelNoise: noise drawn in the nodes
    # optimized spine: level -> (class of every unit, per query {class: sigma²}) (spine.py)
    budget_classes: dict = attrs.Factory(dict)
    run_key: int | None = attrs.field(default=None, repr=False)  # the run's noise key (re-draws the noise)
    joint: dict = attrs.Factory(dict)  # joint table name -> its own TopDownResult (same hierarchy)
    # where the release's files are written in parts (release/parts.py): None, from chunks in this process
    writer: PartWriter | None = attrs.field(default=None, repr=False)

    def microdata_table(
        self, categories: Mapping | None = None, chunk_rows: int | None = None, recode_columns=(), writer=None
    ):
        """The protected person records as a StreamedTable (see release_tables.microdata_table);
        `writer` (default the run's) writes its file in parts."""

        return microdata_table(
            self.hierarchy,
            self.schema,
            self.histograms,
            categories,
            chunk_rows or CHUNK_ROWS,
            recode_columns,
            writer or self.writer,
        )

    def measurements_table(self, chunk_rows: int | None = None, writer=None):
        """The noisy measurements as a StreamedTable: level, geocode, query, cell, value, variance;
        `writer` (default the run's) writes its file in parts."""

        return measurements_table(
            self.hierarchy,
            self.schema,
            self.allocation,
            self.confidential,
            self.noisy,
            self.noise_plans,
            self.run_key,
            chunk_rows or CHUNK_ROWS,
            self.budget_classes,
            writer or self.writer,
        )

    @property
    def microdata(self) -> pd.DataFrame:
        """One row per protected person, whole: for small runs and tests."""
        return self.microdata_table().to_pandas()

    @property
    def measurements(self) -> pd.DataFrame:
        """Tidy noisy measurements, whole: for small runs and tests."""
        return self.measurements_table().to_pandas()


def node_failure(exc: NodeError, hier: Hierarchy, prev: int | None, level: str) -> Exception:
    """The error a node without a solution stops the run with, naming the parent unit: a
    DataError after the failsafe (the data contradict the constraints), which cites the level's
    budget share and the failsafe setting that was applied, else a MechanismError."""
    parent = hier.levels[prev] if prev is not None else None
    where = (
        "the whole level"
        if parent is None
        else f"the {parent.name}"
        if parent.implicit
        else f"the {parent.name} {parent.codes[exc.key]!s}"
    )
    message = f"TopDown cannot split {where} into its {level} units: {exc}"
    if isinstance(exc, FailsafeError):
        return Broken(message, ("level", level), ("setting", "failsafe"))
    return MechanismError(message)


def _finest_units(hier: Hierarchy, tallies: pd.DataFrame) -> np.ndarray:
    """The finest unit of each row of the cell counts (finest codes are unique: a tree was built)."""
    finest = hier.levels[-1]
    if finest.implicit or finest.name not in tallies.columns:
        return np.zeros(len(tallies), dtype=np.int64)
    return pd.Index(finest.codes).get_indexer(tallies[finest.name].to_numpy(dtype=object)).astype(np.int64)


def _code(codes, index: int):
    """A unit's code as a plain key value (the whole level, when there is no parent level)."""
    if codes is None:
        return "all"
    code = codes[index]
    return code.item() if isinstance(code, np.generic) else code


def _structural_zeros(
    zeros: Mapping,
    schema: Schema,
    cells: np.ndarray,
    weights: np.ndarray,
    tallies: pd.DataFrame,
    hier: Hierarchy,
    table: str | None = None,
) -> np.ndarray | None:
    """Boolean mask of the structural-zero cells; DataError if a record sits in one (naming
    ``table`` when it is a joint table's)."""
    if not zeros:
        return None
    coords = np.unravel_index(np.arange(schema.n_cells), schema.shape)
    mask = np.zeros(schema.n_cells, dtype=bool)
    for name, spec in zeros.items():
        this = np.ones(schema.n_cells, dtype=bool)
        for var, values in spec.items():
            if var not in schema.names:
                raise SpecError(f"structural zero {name!r}: {var!r} is not a histogram variable")
            cats = list(schema.categories[schema.names.index(var)])
            bad = [v for v in values if v not in cats]
            if bad:
                raise SpecError(f"structural zero {name!r}: {bad} are not categories of {var!r} ({cats})")
            listed = np.zeros(len(cats), dtype=bool)  # a lookup per category: no 1.2M-cell isin
            listed[[cats.index(v) for v in values]] = True
            this &= listed[coords[schema.names.index(var)]]
        hit = np.flatnonzero(this[cells])
        if hit.size:
            row = int(hit[0])
            finest = hier.levels[-1].name
            cell = ", ".join(
                f"{v}={val}" for v, val in schema.decode(np.array([cells[row]])).items() for val in [val[0]]
            )
            where = f" of table {table!r}" if table else ""
            raise Broken(
                f"the data{where} break the structural zero {name!r}: {counted(weights[hit].sum(), 'record')}, "
                f"e.g. in {finest} {tallies[finest].iloc[row]!s} (cell {cell})",
                ("structural_zeros", table, name),
            )
        mask |= this
    return mask


def _canonical_invariants(invariants, schema: Schema, hier: Hierarchy) -> list[tuple[int, tuple]]:
    out = []
    for item in invariants:
        try:
            level, query = item
        except (TypeError, ValueError):
            raise SpecError(f"an invariant is (level, query), got {item!r}") from None
        entry = (hier.index(level), schema.canonical(query))
        if entry not in out:
            out.append(entry)
    # the invariant queries must nest (invariant_chain.py); `dpspec check` reports it at the
    # invariant's line, this is the backstop for callers that skip the check
    check_chain(list(dict.fromkeys(q for _, q in out)), schema)
    return out


def _check_split_invariants(inv, hier: Hierarchy) -> None:
    """An invariant at a split level below the first split one would fix totals of parts that
    cross the split (a county's AIAN and non-AIAN parts lie in different state parts): the
    spine cannot keep it; production keeps none there (person_default.ini: State and Block only).
    The first split level's invariants hold on the sum of each unit's parts."""
    split = [k for k, lv in enumerate(hier.levels) if lv.labels is not None]
    for lvl, q in inv:
        if split and split[0] < lvl <= split[-1]:
            raise SpecError(
                f"with a split spine, TopDown keeps invariants at {hier.names[split[0]]} "
                f"(on the sum of its parts) or at {hier.names[-1]}, not at {hier.names[lvl]} "
                f"({query_name(q)!r})"
            )


def _spans(k: int, prev: int | None, hier: Hierarchy) -> list[tuple[int, int]]:
    """Level k's units [a, b) under each unit of level prev (children of a parent are
    contiguous), or the whole level as one span when nothing is above."""
    if prev is None:
        return [(0, hier.levels[k].n_units)]
    counts = np.bincount(hier.ancestor(k, prev), minlength=hier.levels[prev].n_units)
    stop = np.cumsum(counts)
    return list(zip((stop - counts).tolist(), stop.tolist()))


def _budget_classes(hier: Hierarchy, alloc: Allocation, bypass: Sequence[str]) -> dict:
    """{measured level: (class of every unit, per query {class: exact sigma²})} under the
    optimized spine's bypass (spine.py); {} without one. Checks that every block's geounits
    still spend exactly rho."""
    if not bypass:
        return {}

    names = hier.names
    for name in bypass:
        hier.index(name)  # SpecError for an unknown level
    depth = bypass_classes(hier, bypass)
    shares = [alloc.level_shares.get(n, Fraction(0)) for n in names]
    check_budget_per_person(hier, depth, shares)
    out = {}
    for k, cls in depth.items():
        if names[k] not in alloc.level_shares:
            continue
        present = sorted(int(c) for c in np.unique(cls) if c != BYPASSED)
        per_query = tuple(
            {
                c: qb.sigma2
                if c == 0
                else effective_sigma2(
                    Fraction(qb.sensitivity2) / (2 * alloc.rho * class_share(shares, k, c) * qb.share)
                )
                for c in present
            }
            for qb in alloc.for_level(names[k])
        )
        out[names[k]] = (
            cls,
            per_query,
            [class_share(shares, k, c) / shares[k] if c >= 0 else Fraction(0) for c in range(len(names) - k)],
        )
    return out


def _level_tasks(
    k, prev, hier, schema, alloc, noisy, conf, inv, protected, run_key=None, classes=None
) -> list[NodeTask]:
    """One task per parent unit (or a single task over the whole level when nothing is above).

    Each node gets its children's confidential histograms and draws their noise from the stream
    keyed (level, parent code) of the run `run_key` (node_noise); a level already drawn whole in
    `noisy` (run_topdown never does; tests do, to compare) hands each node its slice instead."""
    names = hier.names
    level_queries = alloc.for_level(names[k])
    drawn = all((names[k], qb.query) in noisy for qb in level_queries)
    y_all = [noisy[(names[k], qb.query)] for qb in level_queries] if drawn else None
    spans = _spans(k, prev, hier)
    # parents' histograms as sparse rows (made dense in the node): a dense row per parent would
    # be n_cells values for each of the level's parents (3.9 GB for a nation's block groups)
    parents = [None] if prev is None else [protected[prev][p] for p in range(len(spans))]
    parent_codes = hier.levels[prev].codes if prev is not None else None
    # invariants this level must enforce, with the confidential targets at their own level
    inv_here = []
    for lvl, q in inv:
        if prev is not None and lvl <= prev:
            continue  # already fixed in the parent's histogram
        own = min(lvl, k)
        # at its own level an invariant holds per published unit: the sum of a split unit's parts
        groups, n_groups = unit_groups(hier.levels[own]) if own == lvl else (np.arange(hier.levels[own].n_units), None)
        target = marginal(conf[own], schema, q)
        if n_groups is not None and n_groups != target.shape[0]:
            target = group_sum(target, groups, n_groups)
        child_set = groups[hier.ancestor(k, own)]
        inv_here.append(
            (f"{query_name(q)} at {names[lvl]}", schema.groups(q), schema.marginal_size(q), child_set, target)
        )
    tasks = []
    for p, (a, b) in enumerate(spans):
        if b == a:
            continue
        cons = []
        for name, groups, ng, child_set, target in inv_here:
            sets, local = np.unique(child_set[a:b], return_inverse=True)
            cons.append(GroupConstraint(name, groups, ng, local.astype(np.int64), target[sets]))
        cls = classes[0][a:b] if classes is not None else None
        if drawn:
            measured, noise = tuple(y[a:b] for y in y_all), None
        else:
            measured, noise = (
                (),
                NodeNoise(
                    run_key,
                    (names[k], _code(parent_codes, p)),
                    tuple(qb.sigma2 for qb in level_queries),
                    conf[k][a:b],
                    cls,
                    classes[1] if classes is not None else None,
                    tuple(qb.sensitivity2 for qb in level_queries),
                ),
            )
        scale = None
        if cls is not None:  # weights follow each child's budget: 0 for a bypassed child
            ratio = np.array([float(r) for r in classes[2]])
            scale = np.where(cls >= 0, ratio[np.maximum(cls, 0)], 0.0)
        tasks.append(
            NodeTask(
                key=p,
                n_children=b - a,
                n_cells=schema.n_cells,
                parent=parents[p],
                measurements=measured,
                constraints=tuple(cons),
                noise=noise,
                child_scale=scale,
            )
        )
    return tasks


def _noise_plan(tasks, results, k, prev, hier, tag: tuple = ()) -> LevelNoise:
    """Where each node of level k drew its noise (from its results), for re-drawing it later;
    ``tag`` ends every stream key (a joint table's own streams)."""
    spans = _spans(k, prev, hier)
    parent_codes = hier.levels[prev].codes if prev is not None else None
    name = hier.names[k]
    n_queries = max((r.noise_positions.size for r in results), default=0)
    return LevelNoise(
        starts=np.array([spans[t.key][0] for t in tasks], dtype=np.int64),
        stops=np.array([spans[t.key][1] for t in tasks], dtype=np.int64),
        keys=tuple((name, _code(parent_codes, t.key), *tag) for t in tasks),
        positions=np.array([r.noise_positions for r in results], dtype=np.uint64).reshape(len(results), n_queries),
    )


def _assemble(tasks, results, n_units, n_cells, k, prev, hier) -> sp.csr_matrix:
    """The level's protected histogram from the nodes' COO triplets."""
    spans = _spans(k, prev, hier)
    offsets = {t.key: spans[t.key][0] for t in tasks}
    rows = np.concatenate([r.child + offsets[r.key] for r in results]) if results else np.zeros(0, np.int64)
    cols = np.concatenate([r.cell for r in results]) if results else np.zeros(0, np.int64)
    vals = np.concatenate([r.count for r in results]) if results else np.zeros(0, np.int64)
    h = sp.csr_matrix((vals, (rows, cols)), shape=(n_units, n_cells), dtype=np.int64)
    h.sum_duplicates()
    return h


def _verify(hier, schema, protected, conf, inv) -> None:
    """Raise MechanismError unless the release keeps every guarantee exactly."""
    names = hier.names
    for k, h in protected.items():
        if h.dtype.kind not in "iu":
            raise MechanismError(f"level {names[k]}: counts are not integers")
        if h.nnz and h.data.min() < 0:
            raise MechanismError(f"level {names[k]}: a count is negative")
    for k in range(1, len(names)):
        up = aggregate(protected[k], hier.levels[k].parent, hier.levels[k - 1].n_units)
        if (up != protected[k - 1]).nnz:
            raise MechanismError(f"level {names[k]} does not add up to level {names[k - 1]}")
    for lvl, q in inv:
        groups, n_groups = unit_groups(hier.levels[lvl])
        if not np.array_equal(
            group_sum(marginal(protected[lvl], schema, q), groups, n_groups),
            group_sum(marginal(conf[lvl], schema, q), groups, n_groups),
        ):
            raise MechanismError(f"invariant {query_name(q)} at {names[lvl]} moved")
