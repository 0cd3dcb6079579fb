"""A node's group maps travel to an engine's workers as recipes (shipping.py): a few bytes instead
of n_cells values each, made again in the worker into the very same arrays."""

import pickle

import numpy as np

from dpspec_topdown.measurement import histogram
from dpspec_topdown.measurement import shipping
from dpspec_topdown.measurement.histogram import Schema
from dpspec_topdown.estimation.postprocess import MeasuredQuery, NodeTask, GroupConstraint


def _schema():
    return Schema.from_variables({"a": range(40), "b": range(50), "c": range(60)})  # 120,000 cells


def _forget_in_worker(monkeypatch):
    """A fresh worker process: nothing made yet, no group map cached."""
    monkeypatch.setattr(shipping, "_MADE", type(shipping._MADE)())
    monkeypatch.setattr(histogram, "_GROUPS_CACHE", type(histogram._GROUPS_CACHE)())


def test_a_units_group_maps_travel_as_recipes_and_come_back_equal(monkeypatch):
    schema = _schema()
    queries = [
        MeasuredQuery("a * b", schema.groups(("a", "b")), 2000, 0.5),
        MeasuredQuery("c", schema.groups(("c",)), 60, 1.0),
    ]
    own = np.arange(schema.n_cells) % 7  # not a remembered map: it travels as it is
    task = NodeTask(
        key=3,
        n_children=2,
        n_cells=schema.n_cells,
        parent=None,
        measurements=(np.ones((2, 60)),),
        constraints=(
            GroupConstraint(
                "b", schema.groups(("b",)), 50, np.zeros(2, dtype=np.int64), np.ones((1, 50), dtype=np.int64)
            ),
        ),
        zero_cells=own == 0,
    )
    inputs = {"queries": queries, "task": task, "other": (own, "text", 4)}
    whole = len(pickle.dumps(inputs))
    shipped = pickle.dumps(shipping.pack(inputs))
    assert len(shipped) < whole - 3 * schema.n_cells * 8 + 50_000  # the three maps left out, not the rest
    _forget_in_worker(monkeypatch)
    back = shipping.unpack(pickle.loads(shipped))
    for before, after in zip(queries, back["queries"]):
        assert after.name == before.name and after.weight == before.weight
        assert np.array_equal(after.groups, before.groups) and after.groups is not before.groups
    assert np.array_equal(back["task"].constraints[0].groups, schema.groups(("b",)))
    assert np.array_equal(back["task"].zero_cells, task.zero_cells)
    assert np.array_equal(back["other"][0], own) and back["other"][1:] == ("text", 4)
    again = shipping.unpack(pickle.loads(shipped))  # made once per process
    assert again["queries"][0].groups is back["queries"][0].groups


def test_packing_leaves_what_is_not_remembered_as_it_is():
    value = {
        "x": (np.arange(5), [1, "a"]),
        "task": NodeTask(key=1, n_children=1, n_cells=5, parent=None, measurements=(), constraints=()),
    }
    assert shipping.pack(value) is value
    assert shipping.unpack(value) is value


def test_a_cross_constraint_side_is_remade_from_its_query_and_pick(monkeypatch):
    from dpspec_topdown.run.joint_table import side_groups

    schema = _schema()
    side = side_groups(schema, ("a",), 3)
    assert sorted(set(side.tolist())) == [-1, 0]
    shipped = pickle.dumps(shipping.pack(side))
    assert len(shipped) < 5_000
    _forget_in_worker(monkeypatch)
    assert np.array_equal(shipping.unpack(pickle.loads(shipped)), side)
