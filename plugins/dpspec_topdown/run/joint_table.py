"""A joint table in a TopDown run: its histograms, noise and invariants beside the main
table's, on the same hierarchy, solved node by node with the main table (joint.py).

Why a separate holder: the main run (run/topdown.py's run_topdown) keeps its own table's state in local
variables; the joint table needs the same state (confidential histograms, noisy answers,
invariants, budget classes, protected histograms) built by the same helpers, and this class
keeps it in one place without a second copy of the level loop. The joint table's noise streams
are keyed (level, parent code, table name), so they never coincide with the main table's.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np

from dpspec.api import MechanismError

from ..measurement.histogram import aggregate, unit_histograms
from ..estimation.joint import solve_joint_pair
from ..estimation.joint_problem import CrossConstraint, side_sums
from ..broken import Broken
from ..estimation.postprocess import MeasuredQuery, NodeError
from .steps import (
    TopDownResult,
    _assemble,
    _budget_classes,
    _canonical_invariants,
    _check_split_invariants,
    _code,
    _finest_units,
    _level_tasks,
    _noise_plan,
    _structural_zeros,
    _verify,
    node_failure,
)
from ..measurement.shipping import pack, remember, unpack
from ..estimation.equality import group_text


def side_groups(schema, query: tuple, pick: int | None):
    """Every cell's group on one side of a cross constraint (-1 off the side)."""
    groups = schema.groups(query)
    if pick is None:
        return groups
    out = np.where(groups == pick, 0, -1).astype(np.int64)
    out.setflags(write=False)
    return remember(out, side_groups, schema, query, pick)


@attrs.define
class JointSide:
    table: object  # run.context.JointTable
    schema: object
    hier: object
    alloc: object
    conf: list
    inv: list
    classes: dict
    cross: list
    zero_cells: object = None  # (n_cells,) bool of its structural zeros, or None
    noisy: dict = attrs.Factory(dict)
    protected: dict = attrs.Factory(dict)
    noise_plans: dict = attrs.Factory(dict)

    @classmethod
    def build(cls, joint, schema, tallies, hier, alloc, bypass, main_schema, main_finest) -> "JointSide":
        """The joint table's state; DataError if its data break a cross constraint somewhere."""
        finest_unit = _finest_units(hier, tallies)
        weights = tallies["count"].to_numpy(dtype=np.int64)
        cells = schema.cell_index(tallies, weights)
        zero_cells = _structural_zeros(joint.structural_zeros, schema, cells, weights, tallies, hier, joint.name)
        last = len(hier.levels) - 1
        conf = [
            unit_histograms(hier.ancestor(last, k)[finest_unit], cells, lv.n_units, schema.n_cells, weights)
            for k, lv in enumerate(hier.levels)
        ]
        inv = _canonical_invariants(joint.invariants, schema, hier)
        _check_split_invariants(inv, hier)
        cross = []
        for name, main_q, main_pick, q, pick, n_groups in joint.cross:
            c = CrossConstraint(
                name,
                side_groups(main_schema, main_schema.canonical(main_q), main_pick),
                side_groups(schema, schema.canonical(q), pick),
                n_groups,
            )
            left, right = side_sums(main_finest, c.left, n_groups), side_sums(conf[last], c.right, n_groups)
            bad = np.argwhere(left != right)
            if bad.size:
                u, g = bad[0]
                mq = main_schema.canonical(main_q)
                cell = group_text(main_schema, mq, main_pick if main_pick is not None else int(g)) or "total"
                raise Broken(
                    f"the data break the cross constraint {name!r}: {hier.names[last]} "
                    f"{hier.levels[last].codes[u]!s}, cell {cell} of the main table: {int(left[u, g])} "
                    f"there, {int(right[u, g])} in {joint.name!r} ({len(bad)} units and groups differ)",
                    ("cross_constraints", name),
                )
            cross.append(c)
        return cls(joint, schema, hier, alloc, conf, inv, _budget_classes(hier, alloc, bypass), cross, zero_cells)

    def solve_level(self, k, prev, tasks, queries, run_key, engine, plan=None) -> list:
        """The main table's results for level k's nodes, each solved jointly with this table's
        (in ``plan``'s interleaved outer passes when given, joint_passes.py)."""

        hier, name = self.hier, self.hier.names[k]
        mine = _level_tasks(
            k,
            prev,
            hier,
            self.schema,
            self.alloc,
            self.noisy,
            self.conf,
            self.inv,
            self.protected,
            run_key,
            self.classes.get(name),
        )
        tag = (self.table.name,)
        mine = [
            attrs.evolve(t, noise=attrs.evolve(t.noise, key=(*t.noise.key, *tag))) if t.noise is not None else t
            for t in mine
        ]
        if prev is None and self.zero_cells is not None:  # below the top node a zero cell's parent is 0
            mine = [attrs.evolve(t, zero_cells=self.zero_cells) for t in mine]
        if [t.key for t in mine] != [t.key for t in tasks]:
            raise MechanismError(f"level {name}: the joint table's nodes are not the main table's")
        queries_j = [
            MeasuredQuery(
                qb.name, self.schema.groups(qb.query), self.schema.marginal_size(qb.query), 1.0 / float(qb.sigma2)
            )
            for qb in self.alloc.for_level(name)
        ]
        try:
            if engine is not None and engine.name != "local":  # the group maps travel as recipes (shipping.py)
                parent_codes = hier.levels[prev].codes if prev is not None else None
                items = [((name, _code(parent_codes, t.key)), pack((t, u))) for t, u in zip(tasks, mine)]
                shipped = pack({"queries": queries, "queries_j": queries_j, "cross": self.cross, "plan": plan})
                pairs = engine.map_items(
                    items, functools.partial(_shipped_joint_item, shipped=shipped), stage=f"{name} level (joint)"
                )
            else:
                pairs = [
                    _joint_item(None, (t, u), None, queries, queries_j, self.cross, plan) for t, u in zip(tasks, mine)
                ]
        except NodeError as exc:
            raise node_failure(exc, hier, prev, name) from None
        results, results_j = [p[0] for p in pairs], [p[1] for p in pairs]
        self.protected[k] = _assemble(mine, results_j, hier.levels[k].n_units, self.schema.n_cells, k, prev, hier)
        if any(t.noise is not None for t in mine):
            self.noise_plans[name] = _noise_plan(mine, results_j, k, prev, hier, tag)
        return results

    def finish(self, main_protected: dict, run_key):
        """The joint table's result, checked: it adds up, keeps its invariants and structural
        zeros, and every cross constraint holds at every unit of every level."""

        hier = self.hier
        names = hier.names
        for k in range(len(names) - 1, -1, -1):
            if k not in self.protected:
                self.protected[k] = aggregate(self.protected[k + 1], hier.levels[k + 1].parent, hier.levels[k].n_units)
        _verify(hier, self.schema, self.protected, self.conf, self.inv)
        if self.zero_cells is not None:
            zero = np.flatnonzero(self.zero_cells)
            for k, h in self.protected.items():
                if h[:, zero].sum() != 0:
                    raise MechanismError(
                        f"level {names[k]}: a structural zero cell of {self.table.name!r} holds records"
                    )
        for c in self.cross:
            for k in range(len(names)):
                if not np.array_equal(
                    side_sums(main_protected[k], c.left, c.n_groups), side_sums(self.protected[k], c.right, c.n_groups)
                ):
                    raise MechanismError(f"cross constraint {c.name} broken at level {names[k]}")
        return TopDownResult(
            self.schema,
            hier,
            self.alloc,
            self.noisy,
            {names[k]: self.protected[k] for k in range(len(names))},
            {"levels": {}},
            self.alloc.total_rho,
            self.alloc.rho_spent,
            confidential={names[k]: self.conf[k] for k in range(len(names))},
            noise_plans=self.noise_plans,
            run_key=run_key,
            budget_classes=self.classes,
        )


def _joint_item(key, pair, rng, queries, queries_j, cross, plan=None):
    """One parent node of both tables (a unit of work on an engine)."""
    return solve_joint_pair(pair[0], pair[1], queries, queries_j, cross, plan)


def _shipped_joint_item(key, pair, rng, shipped):
    """`_joint_item` from inputs packed for the trip to a worker (shipping.py)."""
    return _joint_item(key, unpack(pair), rng, **unpack(shipped))
