"""The detailed histogram: one cell per combination of the histogram variables' categories.

Why a schema object: every query in TopDown is a marginal of this histogram, and a marginal is
only a relabelling of cells ("which group does each cell fall into"). Keeping that relabelling
as an integer array per query, instead of a dense query matrix, is what lets 2,016-cell
histograms over tens of thousands of units fit in memory and solve quickly.

Cells are numbered in C order over the variables in declaration order; a marginal's groups are
numbered in C order over its variables in the same (declaration) order, whatever order the
query lists them in.

Recodes: a query factor may also be a recode of one variable (production's ``hhinstlevels``
groups the eight ``hhgq`` codes into household / institutional / non-institutional). It is
still a relabelling of cells, so the solver sees no difference; the recode must partition its
variable (every category in exactly one group), or a marginal would double count or drop
persons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    import pandas as pd
    import scipy.sparse as sp

import collections
import math

import attrs

from dpspec.api import DataError, Diagnostic, SpecError, LazyModule

from .allocation import query_name
from .shipping import remember
from ..wording import counted

np = LazyModule("numpy", "np", globals())  # imported when an array is first built, not by `dpspec check`
# heavy libraries, imported on first use
sp = LazyModule("scipy.sparse", "sp", globals())  # pandas and scipy lazily: `dpspec check` uses Schema without them
pd = LazyModule("pandas", "pd", globals())


@attrs.frozen
class Recode:
    """A query factor that groups the categories of one histogram variable."""

    name: str
    variable: str
    labels: tuple  # group labels, in declaration order
    group_of: tuple  # for every category of the variable (in its order), its group index

    @classmethod
    def build(cls, name: str, variable: str, categories: Sequence, groups: Mapping) -> "Recode":
        """Check that ``groups`` (label -> values) partitions ``categories``; SpecError otherwise,
        its diagnostic carrying the path of what it is about inside the recode as written: (LABEL,)
        an empty group, (LABEL, i) its i-th value, () categories in no group."""
        categories = list(categories)
        where = {}

        def refused(message, *path):
            return SpecError(Diagnostic(message, path=path))

        for label, values in groups.items():
            values = list(values)
            if not values:
                raise refused(f"recode {name!r} of {variable!r}: group {label!r} is empty", label)
            for i, v in enumerate(values):
                if v not in categories:
                    raise refused(
                        f"recode {name!r} of {variable!r}: group {label!r} lists {v!r}, "
                        f"which is not a category of {variable!r} ({categories})",
                        label,
                        i,
                    )
                if v in where:
                    raise refused(
                        f"recode {name!r} of {variable!r} does not partition {variable!r}: "
                        f"{v!r} is in both {where[v]!r} and {label!r}",
                        label,
                        i,
                    )
                where[v] = label
        missing = [c for c in categories if c not in where]
        if missing:
            raise refused(
                f"recode {name!r} of {variable!r} does not partition {variable!r}: categories {missing} are in no group"
            )
        labels = tuple(groups)
        return cls(name, variable, labels, tuple(labels.index(where[c]) for c in categories))


_GROUPS_CACHE: "collections.OrderedDict[tuple, np.ndarray]" = collections.OrderedDict()
_GROUPS_CACHE_SIZE = 48  # cell -> group maps kept (about 10 MB each for the DHC persons histogram)


def groups_of(schema: "Schema", query: tuple) -> np.ndarray:
    """``schema.groups(query)``: the recipe an engine's worker makes a group map from."""
    return schema.groups(query)


@attrs.frozen
class Schema:
    """Histogram variables and their categories, in declaration order, and the declared recodes."""

    names: tuple
    categories: tuple  # tuple of tuples, one per variable
    recodes: tuple = ()  # of Recode

    def with_recodes(self, recodes: Sequence[Recode]) -> "Schema":
        seen = set(self.names)
        for r in recodes:
            if r.name in seen:
                raise SpecError(f"recode {r.name!r}: the name is already a variable or another recode")
            if r.variable not in self.names:
                raise SpecError(f"recode {r.name!r} recodes {r.variable!r}, which is not a histogram variable")
            if len(r.group_of) != len(self.categories[self.names.index(r.variable)]):
                raise SpecError(f"recode {r.name!r} does not cover the categories of {r.variable!r}")
            seen.add(r.name)
        return attrs.evolve(self, recodes=tuple(recodes))

    def _factor(self, name: str):
        """(axis, category -> group map or None, size) of a query factor."""
        if name in self.names:
            axis = self.names.index(name)
            return axis, None, len(self.categories[axis])
        for r in self.recodes:
            if r.name == name:
                return self.names.index(r.variable), r.group_of, len(r.labels)
        raise KeyError(name)

    @classmethod
    def from_variables(cls, variables: Mapping[str, Sequence]) -> "Schema":
        if not variables:
            raise SpecError("the histogram needs at least one variable")
        names, cats = [], []
        for name, values in variables.items():
            values = tuple(values)
            if not values:
                raise SpecError(f"histogram variable {name!r} has no categories")
            if len(set(values)) != len(values):
                raise SpecError(f"histogram variable {name!r} lists a category twice")
            names.append(str(name))
            cats.append(values)
        return cls(tuple(names), tuple(cats))

    @property
    def shape(self) -> tuple:
        return tuple(len(c) for c in self.categories)

    @property
    def n_cells(self) -> int:
        return math.prod(self.shape)

    def canonical(self, query: Sequence[str]) -> tuple:
        """The query's factors in variable declaration order; unknown or repeated are SpecErrors."""
        query = tuple(query)
        known = list(self.names) + [r.name for r in self.recodes]
        unknown = [v for v in query if v not in known]
        if unknown:
            raise SpecError(
                f"query {query_name(query)!r} names {unknown}, which are not histogram variables "
                f"or recodes (known: {known})"
            )
        if len(set(query)) != len(query):
            raise SpecError(f"query {query_name(query)!r} names a variable twice")
        axes = [self._factor(v)[0] for v in query]
        if len(set(axes)) != len(axes):
            raise SpecError(
                f"query {query_name(query)!r} uses the variable "
                f"{self.names[max(axes, key=axes.count)]!r} twice (a recode and its variable?)"
            )
        return tuple(v for _, v in sorted(zip(axes, query)))

    def marginal_size(self, query: Sequence[str]) -> int:
        q = self.canonical(query)
        return math.prod(self._factor(v)[2] for v in q)

    def groups(self, query: Sequence[str]) -> np.ndarray:
        """For every cell, the index of the marginal group (query cell) it falls into (read-only:
        the map is cached, since a run asks for the same query at every level and pass and the
        DHC histogram has 1.2M cells)."""
        q = self.canonical(query)
        key = (self.names, self.shape, tuple((r.name, r.variable, tuple(r.group_of)) for r in self.recodes), q)
        hit = _GROUPS_CACHE.get(key)
        if hit is not None:
            _GROUPS_CACHE.move_to_end(key)
            return hit
        out = self._groups(q)
        out.setflags(write=False)
        _GROUPS_CACHE[key] = out
        remember(out, groups_of, self, q)  # an engine's workers make it again (shipping.py)
        while len(_GROUPS_CACHE) > _GROUPS_CACHE_SIZE:
            _GROUPS_CACHE.popitem(last=False)
        return out

    def _groups(self, q: tuple) -> np.ndarray:
        if not q:
            return np.zeros(self.n_cells, dtype=np.int64)
        coords = np.unravel_index(np.arange(self.n_cells), self.shape)
        index, sizes = [], []
        for v in q:
            axis, mapping, size = self._factor(v)
            index.append(coords[axis] if mapping is None else np.asarray(mapping, dtype=np.int64)[coords[axis]])
            sizes.append(size)
        return np.ravel_multi_index(index, sizes).astype(np.int64)

    def factor_values(self, name: str, column: pd.Series) -> pd.Series:
        """A record column expressed in a query factor's categories (a recode's group labels)."""
        for r in self.recodes:
            if r.name == name:
                cats = self.categories[self.names.index(r.variable)]
                lookup = {c: r.labels[g] for c, g in zip(cats, r.group_of)}
                return column.map(lookup)
        return column

    def indicator(self, query: Sequence[str]) -> sp.csr_matrix:
        """Sparse (cells x groups) 0/1 matrix: a histogram row times it is the marginal."""
        g = self.groups(query)
        n = self.n_cells
        return sp.csr_matrix((np.ones(n, dtype=np.int64), (np.arange(n), g)), shape=(n, self.marginal_size(query)))

    def cell_index(self, frame: pd.DataFrame, weights: np.ndarray | None = None) -> np.ndarray:
        """Cell of every record; a value outside its variable's categories is a DataError.

        weights: the frame's rows are counts of records (how many each): the error then says
        how many records hold the value instead of a row number."""
        idx = np.zeros(len(frame), dtype=np.int64)
        for name, cats in zip(self.names, self.categories):
            if name not in frame.columns:
                raise DataError(f"column {name!r} (a histogram variable) is missing from the data")
            codes = pd.Index(list(cats)).get_indexer(frame[name]).astype(np.int64)
            bad = np.flatnonzero(codes < 0)
            if bad.size and weights is not None:
                raise DataError(
                    f"column {name!r}: value {frame[name].iloc[bad[0]]!r} is not one of its categories "
                    f"{list(cats)} ({counted(np.asarray(weights)[bad].sum(), 'record')} with such values)"
                )
            if bad.size:
                row = bad[0]
                raise DataError(
                    f"column {name!r}, row {row}: value {frame[name].iloc[row]!r} is not one of its "
                    f"categories {list(cats)} ({bad.size} such rows)"
                )
            idx = idx * len(cats) + codes
        return idx

    def decode(self, cells: np.ndarray) -> dict:
        """Category values of each variable for an array of cell indices."""
        coords = np.unravel_index(np.asarray(cells, dtype=np.int64), self.shape)
        out = {}
        for name, cats, c in zip(self.names, self.categories, coords):
            out[name] = pd.Index(list(cats)).take(c).to_numpy()
        return out


def unit_histograms(
    unit: np.ndarray, cell: np.ndarray, n_units: int, n_cells: int, weights: np.ndarray | None = None
) -> sp.csr_matrix:
    """Sparse (units x cells) counts from one (unit, cell) pair per record, or per count of
    records (`weights`: how many records each pair stands for)."""
    data = np.ones(unit.size, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    h = sp.csr_matrix((data, (unit, cell)), shape=(n_units, n_cells), dtype=np.int64)
    h.sum_duplicates()
    return h


def marginal(hist: sp.spmatrix, schema: Schema, query: Sequence[str]) -> np.ndarray:
    """Dense (units x groups) answers of a marginal query for every unit."""
    return np.asarray((hist @ schema.indicator(query)).toarray(), dtype=np.int64)


def aggregate(hist: sp.spmatrix, parent: np.ndarray, n_parents: int) -> sp.csr_matrix:
    """Sum the rows of a (children x cells) histogram into their parents' rows."""
    n = hist.shape[0]
    up = sp.csr_matrix((np.ones(n, dtype=np.int64), (parent, np.arange(n))), shape=(n_parents, n))
    return (up @ hist).tocsr()


def crossing_groups(schema: Schema, a: Sequence[str], b: Sequence[str]) -> tuple[str, str] | None:
    """A group of marginal `a` and one of `b` that share cells without either holding the other
    ("hhgq=1", "sex=0": each named by the variable that shows it), or None when their groups nest
    (a laminar family: every group of one within a group of the other, or apart from it).

    Why: fixed at every child of a node, two crossing marginals are two margins of a three-way
    table the parent's already fixed histogram may not admit (the reason TopDown needs its
    invariants nested). Compared group by group, not by name, so that two recodes of one
    variable that nest group by group (the units' h1 and gqhh_vect) pass. A marginal's groups are
    products of one partition per variable (its categories, a recode's groups, or all in one), so
    the test runs on the variables' categories, never on the histogram's cells: per variable the
    two partitions must nest, and where one is strictly finer on one variable it may not be
    strictly coarser on another (a group of each would then cross)."""
    a, b = schema.canonical(a), schema.canonical(b)
    finer = {"a": {}, "b": {}}  # "a": {axis: (a group, b group)} where an a group is strictly within a b group
    for axis in range(len(schema.names)):
        pa, pb = _partition(schema, a, axis), _partition(schema, b, axis)
        size_a, size_b = collections.Counter(pa), collections.Counter(pb)
        for (x, y), shared in collections.Counter(zip(pa, pb)).items():
            if shared < size_a[x] and shared < size_b[y]:
                return _group_name(schema, a, axis, x), _group_name(schema, b, axis, y)
            if size_a[x] != size_b[y]:
                finer["a" if size_a[x] < size_b[y] else "b"].setdefault(axis, (x, y))
    # one variable may be finer either way (h1 and gqhh_vect): a crossing needs two variables
    for axis_a, (x, _) in finer["a"].items():
        for axis_b, (_, y) in finer["b"].items():
            if axis_a != axis_b:
                return _group_name(schema, a, axis_a, x), _group_name(schema, b, axis_b, y)
    return None


def _partition(schema: Schema, query: tuple, axis: int) -> list:
    """Each category of variable `axis`: its group in `query`'s factor on that variable (its
    index for the variable itself, its recode group, 0 when the query does not read it)."""
    n = len(schema.categories[axis])
    for factor in query:
        at, mapping, _ = schema._factor(factor)
        if at == axis:
            return list(range(n)) if mapping is None else list(mapping)
    return [0] * n


def _group_name(schema: Schema, query: tuple, axis: int, group: int) -> str:
    """Group `group` of `query`'s partition of variable `axis`, as "factor=label"."""
    for factor in query:
        at, mapping, _ = schema._factor(factor)
        if at == axis:
            labels = (
                schema.categories[axis]
                if mapping is None
                else next(r for r in schema.recodes if r.name == factor).labels
            )
            return f"{factor}={labels[group]}"
    return f"every {schema.names[axis]}"
