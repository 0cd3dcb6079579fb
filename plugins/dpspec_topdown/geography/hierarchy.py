"""The geographic hierarchy: levels of units, each unit with exactly one parent.

Why a strict tree: top-down estimation fixes a parent's histogram and then splits it among its
children. A block recorded under two tracts would be split twice, and its persons counted in
both, so the hierarchy is checked up front and a violation is a DataError naming the unit.

Codes identify units within a level column (use full geocodes, e.g. a county code that
includes its state). Units of a level are ordered by parent, then code, so the children of one
parent are a contiguous run.
"""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, SpecError, shown

from ..broken import Broken


@attrs.frozen
class Level:
    """One geographic level: its unit codes and each unit's parent (index into the level above)."""

    name: str
    codes: np.ndarray  # unit codes, ordered by (parent, code)
    parent: np.ndarray | None  # int64 index of each unit's parent; None for the root
    implicit: bool = False  # the root added because the data has no single-unit top level
    labels: np.ndarray | None = None  # published code of each unit when the spine splits the level (spine.py)

    @property
    def n_units(self) -> int:
        return int(self.codes.size)


@attrs.frozen
class Hierarchy:
    """All levels, root first, and the unit of every record at every level."""

    levels: tuple
    record_unit: tuple  # per level: int64 unit index of each record

    @property
    def names(self) -> list[str]:
        return [lv.name for lv in self.levels]

    def level(self, name: str) -> Level:
        return self.levels[self.index(name)]

    def index(self, name: str) -> int:
        for i, lv in enumerate(self.levels):
            if lv.name == name:
                return i
        raise SpecError(f"unknown geographic level {name!r} (levels: {self.names})")

    def with_labels(self, labels: dict) -> "Hierarchy":
        """The same tree with published codes for split levels: {level: {spine code: code}}."""
        levels = tuple(
            attrs.evolve(lv, labels=np.array([labels[lv.name][c] for c in lv.codes], dtype=object))
            if lv.name in labels
            else lv
            for lv in self.levels
        )
        return attrs.evolve(self, levels=levels)

    def ancestor(self, level: int, above: int) -> np.ndarray:
        """For every unit of ``level``, the index of its ancestor at level ``above`` (<= level)."""
        idx = np.arange(self.levels[level].n_units)
        for k in range(level, above, -1):
            idx = self.levels[k].parent[idx]
        return idx


def build_hierarchy(
    records: pd.DataFrame, levels: Sequence[str], root: str = "nation", counted: bool = False
) -> Hierarchy:
    """Levels from record columns, top first; a single-unit root is added when the data has none.

    The root is implicit when ``levels`` starts with a name that is not a column (it is then the
    root's name) or when the first column holds more than one unit (the root is then ``root``).
    counted: the rows are distinct combinations of records (counts), not records: errors then
    name no row numbers.
    """
    levels = [str(v) for v in levels]
    if not levels:
        raise SpecError("the geography needs at least one level")
    if len(set(levels)) != len(levels):
        raise SpecError(f"geographic levels must be distinct, got {levels}")
    n = len(records)
    if n == 0:
        raise DataError("the data has no records")
    columns = list(levels)
    root_name = None
    if levels[0] not in records.columns:
        root_name, columns = levels[0], levels[1:]
        if not columns:
            raise SpecError(f"level {levels[0]!r} is not a column and no other level is given")
    for col in columns:
        if col not in records.columns:
            raise Broken(f"geography column {col!r} is missing from the data", ("geography",))
        if records[col].isna().any():
            if counted:
                raise Broken(f"geography column {col!r}: some records have no value", ("geography",))
            row = int(np.flatnonzero(records[col].isna().to_numpy())[0])
            raise Broken(f"geography column {col!r}, row {row}: the value is missing", ("geography",))
    if root_name is None and records[columns[0]].nunique() > 1:
        root_name = root if root not in columns else "__root__"
    out_levels: list[Level] = []
    out_units: list[np.ndarray] = []
    if root_name is not None:
        out_levels.append(Level(root_name, np.array([root_name], dtype=object), None, implicit=True))
        out_units.append(np.zeros(n, dtype=np.int64))
    parent_unit = out_units[0] if out_units else None
    parent_col = None
    for col in columns:
        values = records[col].to_numpy()
        codes, unit_of_record = _factorize(values)
        if parent_unit is None:  # explicit single-unit root
            out_levels.append(Level(col, codes, None))
            out_units.append(unit_of_record)
            parent_unit, parent_col = unit_of_record, col
            continue
        parent_of_unit = _unique_parent(
            unit_of_record, parent_unit, codes, col, parent_col or out_levels[-1].name, out_levels[-1].codes
        )
        order = np.lexsort((np.arange(codes.size), parent_of_unit))  # codes are sorted already
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        out_levels.append(Level(col, codes[order], parent_of_unit[order]))
        unit_of_record = rank[unit_of_record]
        out_units.append(unit_of_record)
        parent_unit, parent_col = unit_of_record, col
    return Hierarchy(tuple(out_levels), tuple(out_units))


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values, sort=True)
    return np.asarray(uniques, dtype=object), codes.astype(np.int64)


def _unique_parent(
    child: np.ndarray, parent: np.ndarray, child_codes, child_col: str, parent_col: str, parent_codes
) -> np.ndarray:
    """The parent of each child unit, or a DataError naming a child found under two parents."""
    pairs = np.unique(child * (int(parent.max()) + 1) + parent)
    n_par = int(parent.max()) + 1
    c, p = pairs // n_par, pairs % n_par
    dup = np.flatnonzero(np.diff(c) == 0)
    if dup.size:
        i = dup[0]
        code = child_codes[c[i]]
        others = [parent_codes[x] for x in p[c == c[i]]]
        raise Broken(
            f"geography is not a tree: {child_col} {shown(code)} lies in more than one {parent_col} "
            f"({', '.join(shown(o) for o in others)}); codes must identify a unit within its level "
            f"(use full geocodes)",
            ("geography",),
        )
    out = np.empty(child_codes.size, dtype=np.int64)
    out[c] = p
    return out
