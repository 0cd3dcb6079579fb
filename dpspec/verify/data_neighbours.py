"""Neighbours of the spec's own data for `dpspec verify --replay`: one record changed, added or removed, aimed at small cells and keys.

Why these: a release whose structure comes from the data shows it where a cell holds one record
or none, so the designed neighbours empty the smallest cell, fill an empty declared cell, and
move a record from the largest cell to an empty one; a few seeded random ones follow.
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from dpspec import ir
from dpspec.check.keys import declared_keys, undeclared
from dpspec.verify.miniature import VerifyError

KEY_KINDS = ("category", "enum", "bool", "int")
MAX_CELLS = 200_000  # declared cells of the stressed columns; coarser columns beyond it


@attrs.frozen
class DataNeighbour:
    """The data with one record of `table` changed, added or removed."""

    label: str  # how it was made, in words
    change: str  # "changed", "added" or "removed"
    row: int | None  # the record's position in the data (changed, removed, or the one copied)
    record: dict | None  # the new or added record's values that differ from the original (text)
    data: dict  # {table: frame}
    steps: int = 1  # distance under the spec's relation
    records: int = 1  # records of the table changed, added or removed at once (a unit's, up to K)

    def describe(self) -> str:
        what = f"record {self.row}" if self.row is not None else "a record"
        if self.records > 1:
            what = f"{self.records} records (from record {self.row})"
        if self.record:
            what += " (" + ", ".join(f"{k}={v}" for k, v in self.record.items()) + ")"
        return f"{self.label}: {self.change} {what}"

    def to_json(self) -> dict:
        return {"label": self.label, "change": self.change, "row": self.row, "record": self.record, "steps": self.steps}


def cell_columns(spec: ir.Spec, mechanism, params: dict, table: ir.Table) -> list[str]:
    """The columns whose declared values key the release: those the mechanism's `output_keys` name
    for `table`, else the table's declared categorical columns; with the parents they nest in."""
    named = [
        c
        for keys in mechanism.output_keys(spec, params).values()
        if keys.table == table.name
        for c in (*keys.columns, *keys.fixed)
    ]
    if not named:
        named = [c.name for c in table.columns if c.type.kind in ("category", "enum", "bool")]
    cols = [c for c in dict.fromkeys(named) if table.column(c) is not None and table.column(c).type.kind in KEY_KINDS]
    cols = [c for c in cols if not undeclared(spec, table.name, [c])]
    for c in list(cols):  # a county is changed with its state
        parent = table.column(c).type.parent
        while parent and table.column(parent) is not None:
            if parent not in cols:
                cols.insert(cols.index(c), parent)
            parent = table.column(parent).type.parent
    while cols and _size(spec, table, cols) > MAX_CELLS:
        cols.pop()
    return cols


def fixed_values(spec: ir.Spec, mechanism, params: dict, table: ir.Table) -> dict:
    """{column: value} an output holds on every row (the released period): the cells aimed at lie there."""
    out = {}
    for keys in mechanism.output_keys(spec, params).values():
        if keys.table == table.name:
            out.update({c: str(v) for c, v in keys.fixed.items() if v is not None})
    return out


def _size(spec, table, cols) -> int:
    out = 1
    for c in cols:
        ty = table.column(c).type
        out *= (ty.high - ty.low + 1) if ty.kind == "int" else len(ty.values) if ty.values else 2
    return out


def neighbours(spec: ir.Spec, mechanism, params: dict, data: dict, count: int = 6, seed: int = 0):
    """(table name, cell columns, [DataNeighbour]) on the unit's table under the spec's relation."""
    table = _table(spec, mechanism, params)
    frame = data.get(table.name)
    if frame is None or not isinstance(frame, pd.DataFrame):
        raise VerifyError(f"no data for table '{table.name}' to build neighbours from")
    if len(frame) < 2:
        raise VerifyError(f"table '{table.name}' has {len(frame)} record(s): too few to change one")
    cols = cell_columns(spec, mechanism, params, table)
    relation = spec.unit.relation if spec.unit else mechanism.flavor(spec, params).relation
    build = _Builder(spec, table, data, cols, np.random.default_rng(seed), fixed_values(spec, mechanism, params, table))
    out = build.whole_unit(relation, *group_bound(spec, table)) + build.designed(relation)
    while len(out) < count:
        out.append(build.random(relation, len(out)))
    return table.name, cols, out[:count]


def group_bound(spec: ir.Spec, table: ir.Table) -> tuple:
    """(K, the unit's id column or None) when the spec's unit is a coarser table holding at most K
    of `table`'s records (`holds at most K`, or `in P by ID at most K`); (None, None) otherwise."""
    unit = spec.unit
    if unit is None or unit.table == table.name:
        return None, None
    link = table.link if table.parent == unit.table and table.link else None
    k = (
        unit.bound.k
        if unit.bound is not None and unit.bound.finer == table.name
        else table.link_bound
        if link
        else None
    )
    return (int(k), link) if k else (None, None)


def _table(spec: ir.Spec, mechanism, params: dict) -> ir.Table:
    """The spec's unit table when the mechanism reads it, else the mechanism's own (a coarser unit's
    group privacy is the budget stage's: the replay changes the finer records one at a time)."""
    name = mechanism.flavor(spec, params).table
    if spec.unit is not None and spec.unit.table == name:
        return spec.domain.table(name)
    table = spec.domain.table(name) if spec.domain else None
    if table is None:
        raise VerifyError(f"the mechanism's table '{name}' is not a table of the domain")
    return table


class _Builder:
    def __init__(self, spec, table, data, cols, rng, fixed: dict):
        self.spec, self.table, self.data, self.cols, self.rng = spec, table, data, cols, rng
        self.frame = data[table.name].reset_index(drop=True)
        self.children = [t for t in spec.domain.tables if t.parent == table.name and t.link and t.name in data]
        if cols:
            text = self.frame[cols].astype(str)
            sizes = text.value_counts(sort=False)
            self.sizes = sizes.sort_values(kind="stable")
            self.text = text
            observed = (
                set(sizes.index) if len(cols) > 1 else {(v,) if not isinstance(v, tuple) else v for v in sizes.index}
            )
            try:
                declared = declared_keys(spec, table.name, cols)
            except Exception:  # noqa: BLE001 - too many cells or an unreadable key file: no empty cells to aim at
                declared = pd.DataFrame(columns=cols)
            rows = [tuple(r) for r in declared.itertuples(index=False, name=None)]
            at = [(cols.index(c), v) for c, v in fixed.items() if c in cols]

            def released(cell) -> bool:
                cell = cell if isinstance(cell, tuple) else (cell,)
                return all(cell[i] == v for i, v in at)

            self.sizes = self.sizes[[released(c) for c in self.sizes.index]] if at else self.sizes
            self.empty = [r for r in rows if r not in observed and released(r)]
            self.declared = [r for r in rows if released(r)]
        else:
            self.sizes, self.text, self.empty, self.declared = pd.Series(dtype=int), None, [], []

    # -- the designed neighbours --
    def designed(self, relation: str) -> list[DataNeighbour]:
        out = []
        small = self._row_of(self.sizes.index[0]) if len(self.sizes) else None
        large = self._row_of(self.sizes.index[-1]) if len(self.sizes) else None
        empty = self.empty[0] if self.empty else None
        if relation == "symdiff":
            if small is not None:
                out.append(
                    self._remove(
                        small,
                        f"remove a record of the smallest cell ({self._cell(small)}, "
                        f"{int(self.sizes.iloc[0])} record(s))",
                    )
                )
            if empty is not None:
                out.append(
                    self._add(self._copyable(), empty, f"add a record in the empty declared cell {self._words(empty)}")
                )
            if empty is not None and large is not None:
                out.append(
                    self._change(large, empty, "change a record of the largest cell to an empty declared cell", 2)
                )
        else:
            if small is not None and large is not None and small != large:
                target = tuple(self.text.iloc[large])
                out.append(
                    self._change(
                        small,
                        target,
                        f"change a record of the smallest cell ({self._cell(small)}, "
                        f"{int(self.sizes.iloc[0])} record(s)) to the largest",
                    )
                )
            if empty is not None and large is not None:
                out.append(self._change(large, empty, "change a record of the largest cell to an empty declared cell"))
        return out

    def whole_unit(self, relation: str, k: int | None, link: str | None) -> list[DataNeighbour]:
        """A coarser unit's neighbours: up to K records changed (or removed) at once, as one unit
        holds them (the rows sharing its id; without an id column, K records of the largest cell)."""
        if not k or k < 2:
            return []
        frame = self.frame
        if link is not None and link in frame.columns:
            sizes = frame[link].astype(str).value_counts(sort=False)
            sizes = sizes[sizes <= k]
            if not len(sizes):
                return []
            unit = sizes.sort_values(kind="stable").index[-1]  # the largest unit within the bound
            rows = np.flatnonzero((frame[link].astype(str) == unit).to_numpy())
            what = f"one unit ({link}={unit}, {len(rows)} records)"
        else:
            pick = self._row_of(self.sizes.index[-1]) if len(self.sizes) else 0
            same = (
                (self.text == list(self.text.iloc[pick])).all(axis=1).to_numpy()
                if self.text is not None
                else np.ones(len(frame), dtype=bool)
            )
            rows = np.flatnonzero(same)[:k]
            what = f"{len(rows)} records of one cell, as one unit may hold"
        if len(rows) < 2:
            return []
        if relation == "symdiff":
            data = self._with(frame.drop(index=rows))
            return [DataNeighbour(f"remove {what} at once", "removed", int(rows[0]), None, data, records=len(rows))]
        target = (
            self.empty[0]
            if self.empty
            else (tuple(self.text.iloc[self._row_of(self.sizes.index[0])]) if len(self.sizes) else None)
        )
        if target is None:
            return []
        changed = frame.copy()
        for c, text in zip(self.cols, target):
            for r in rows:
                changed[c] = _assign(changed[c], r, _typed(self.table.column(c), text))
        record = {c: t for c, t in zip(self.cols, target)}
        return [
            DataNeighbour(
                f"change {what} at once to {self._words(target)}",
                "changed",
                int(rows[0]),
                record,
                self._with(changed),
                records=len(rows),
            )
        ]

    def random(self, relation: str, i: int) -> DataNeighbour:
        row = int(self.rng.integers(len(self.frame)))
        if relation == "symdiff":
            if i % 2:
                return self._remove(row, "remove a random record")
            return self._add(row, None, "add a copy of a random record")
        if len(self.declared) > 1 and i % 2 == 0:
            here = tuple(self.text.iloc[row])
            target = here
            while target == here:
                target = self.declared[int(self.rng.integers(len(self.declared)))]
            return self._change(row, target, "change a random record to another declared cell")
        return self._change(
            row, None, "change a random record to another's values", other=int(self.rng.integers(len(self.frame)))
        )

    # -- helpers --
    def _row_of(self, cell) -> int:
        cell = cell if isinstance(cell, tuple) else (cell,)
        match = np.flatnonzero((self.text == list(cell)).all(axis=1).to_numpy())
        return int(match[0])

    def _cell(self, row: int) -> str:
        return self._words(tuple(self.text.iloc[row]))

    def _words(self, cell: tuple) -> str:
        return ", ".join(f"{c}={v}" for c, v in zip(self.cols, cell))

    def _copyable(self) -> int:
        """A record whose copy keeps its parent unit within a declared size bound."""
        if self.table.link and self.table.link_bound:
            sizes = self.frame[self.table.link].map(self.frame[self.table.link].value_counts())
            ok = np.flatnonzero(sizes.to_numpy() < self.table.link_bound)
            if len(ok):
                return int(ok[0])
        return 0

    def _with(self, frame: pd.DataFrame) -> dict:
        return {**self.data, self.table.name: frame.reset_index(drop=True)}

    def _remove(self, row: int, label: str) -> DataNeighbour:
        data = self._with(self.frame.drop(index=row))
        for child in self.children:  # a removed unit takes its linked records with it
            gone = self.frame.at[row, child.link] if child.link in self.frame.columns else None
            kept = data[child.name]
            data[child.name] = kept[kept[child.link].astype(str) != str(gone)].reset_index(drop=True)
        return DataNeighbour(label, "removed", row, None, data)

    def _add(self, row: int, cell: tuple | None, label: str) -> DataNeighbour:
        new = self.frame.iloc[[row]].copy()
        changed = self._set(new, cell) if cell is not None else {}
        for child in self.children:  # an added unit gets an id of its own (and no linked records)
            if child.link in new.columns:
                changed[child.link] = self._fresh_id(new, child.link)
        return DataNeighbour(
            label, "added", row, changed or None, self._with(pd.concat([self.frame, new], ignore_index=True))
        )

    def _change(
        self, row: int, cell: tuple | None, label: str, steps: int = 1, other: int | None = None
    ) -> DataNeighbour:
        frame = self.frame.copy()
        new = frame.iloc[[row]].copy()
        if other is not None:
            new = frame.iloc[[other]].copy()
            new.index = [row]
            keep = [c for c in (self.table.link, *(ch.link for ch in self.children)) if c in new.columns]
            new[keep] = frame.iloc[[row]][keep].to_numpy()
            changed = {
                c: str(new.iat[0, new.columns.get_loc(c)])
                for c in new.columns
                if str(new.iat[0, new.columns.get_loc(c)]) != str(frame.at[row, c])
            }
        else:
            new.index = [row]
            changed = self._set(new, cell)
        for c in new.columns:
            value = new.iat[0, new.columns.get_loc(c)]
            if str(value) != str(frame.at[row, c]):
                frame[c] = _assign(frame[c], row, value)
        return DataNeighbour(label, "changed", row, changed or None, self._with(frame), steps)

    def _set(self, new: pd.DataFrame, cell: tuple) -> dict:
        """Give the one-row frame `new` the cell's values (text, typed as the column)."""
        changed = {}
        for c, text in zip(self.cols, cell):
            if str(new.iat[0, new.columns.get_loc(c)]) != text:
                changed[c] = text
            new[c] = _assign(new[c], new.index[0], _typed(self.table.column(c), text))
        return changed

    def _fresh_id(self, new: pd.DataFrame, column: str) -> str:
        series = self.frame[column]
        if pd.api.types.is_integer_dtype(series.dtype):
            value = int(series.max()) + 1
        else:
            value = f"replay-added-{len(series)}"
        new[column] = _assign(new[column], new.index[0], value)
        return str(value)


def _typed(col: ir.Column, text: str):
    if col.type.kind == "int":
        return int(text)
    if col.type.kind == "bool":
        return text == "True"
    return text


def _assign(series: pd.Series, row, value) -> pd.Series:
    """series with `value` at `row`, a categorical widened when the value is not among its categories."""
    series = series.copy()
    if isinstance(series.dtype, pd.CategoricalDtype) and not pd.isna(value) and value not in series.cat.categories:
        series = series.cat.add_categories([value])
    series.loc[row] = value
    return series


__all__ = ["DataNeighbour", "cell_columns", "neighbours"]
