"""A node's per-cell maps sent to an engine's workers as the recipe that makes them, not as arrays.

Why: every query, invariant, cross constraint and rounding margin of a level carries a map from
each histogram cell to its group (`Schema.groups`), an int64 array of n_cells values. The DHC
households histogram has 1,578,528 cells, so one level's queries, cross constraints and pass plan
came to 164 MB (the persons' to 128 MB, and each node's equality targets to 31 MB more). An
engine ships a level's function to its workers with every job (Spark broadcasts it, writes it to
disk and reads it back), which cost about 1.5 s a level on the Puerto Rico households run; the
node's own work at most levels is milliseconds.

How: `remember(array, recipe, *args)` notes, on the driver, that ``array`` is what
``recipe(*args)`` returns (a schema and a query: a few kilobytes). `pack` replaces each
remembered array in a unit's inputs (attrs classes, tuples, lists, dicts, walked) by a
`_Remade` holding its recipe; `unpack`, in the worker, makes each array again, once per process
for a recipe (kept in a small cache, as the driver keeps its maps). The arrays are the same
numbers either way: a recipe is a pure function of its arguments. The local engine calls the
solver in the driver and needs none of this.
"""

from __future__ import annotations

import collections
import weakref

import attrs

_REMEMBERED: dict = {}  # id(array) -> (weak reference to the array, recipe, args)
_MADE: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()  # in a worker: (recipe, args) -> array
_MADE_SIZE = 48


def remember(array, recipe, *args):
    """Note that ``array`` is ``recipe(*args)`` (a module-level function and hashable, picklable
    arguments); returns ``array``."""
    key = id(array)
    for stale in [k for k, (ref, _, _) in _REMEMBERED.items() if ref() is None]:
        del _REMEMBERED[stale]
    _REMEMBERED[key] = (weakref.ref(array), recipe, args)
    return array


@attrs.frozen
class _Remade:
    """A remembered array in transit: its recipe."""

    recipe: object
    args: tuple


def _recipe_of(array):
    hit = _REMEMBERED.get(id(array))
    if hit is None or hit[0]() is not array:
        return None
    return _Remade(hit[1], hit[2])


def pack(obj):
    """``obj`` with every remembered array replaced by its recipe (the rest as it is)."""
    return _walk(obj, _pack_leaf)


def unpack(obj):
    """``obj`` with every recipe made into its array again (once per process for each recipe)."""
    return _walk(obj, _unpack_leaf)


def _pack_leaf(value):
    return _recipe_of(value) if id(value) in _REMEMBERED else None


def _unpack_leaf(value):
    if not isinstance(value, _Remade):
        return None
    key = (value.recipe, value.args)
    made = _MADE.get(key)
    if made is None:
        made = value.recipe(*value.args)
        _MADE[key] = made
        while len(_MADE) > _MADE_SIZE:
            _MADE.popitem(last=False)
    else:
        _MADE.move_to_end(key)
    return made


def _walk(obj, leaf):
    """``obj`` rebuilt with ``leaf(value)`` in place of each value for which it is not None
    (attrs instances, tuples, lists and dicts are walked; anything else is a leaf)."""
    swapped = leaf(obj)
    if swapped is not None:
        return swapped
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        items = [_walk(v, leaf) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else tuple(items)
    if isinstance(obj, list):
        items = [_walk(v, leaf) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else items
    if isinstance(obj, dict):
        items = {k: _walk(v, leaf) for k, v in obj.items()}
        return obj if all(items[k] is v for k, v in obj.items()) else items
    if attrs.has(type(obj)):
        changes = {}
        for f in attrs.fields(type(obj)):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = _walk(value, leaf)
            if new is not value:
                changes[f.alias] = new
        return attrs.evolve(obj, **changes) if changes else obj
    return obj
