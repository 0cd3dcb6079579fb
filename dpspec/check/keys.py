"""Declared key sets: the values a release may be keyed by, from the spec and its public key files.

Why: a release's structure is part of what it reveals. A county found in the data (and so in the
release) only when someone lives there tells an attacker that someone does, whatever the noise.
So every key set a release has comes from what the spec declares (a value list `{a, b}`, an
integer range, a bool, or `category values from "FILE"` with FILE named in `public { keys ... }`),
never from the records. The checker refuses a released column whose values are not declared, and
the compiler compares every released key set with the declared one after the run.
"""

from __future__ import annotations

import csv
import functools
import os

import attrs

from dpspec import ir
from dpspec.errors import Diagnostic, MechanismError
from dpspec.language.reading import require_regular
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())
np = LazyModule("numpy", "np", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_streamed = LazyModule("dpspec.contract.streamed", "_streamed", globals())

MAX_KEY_ROWS = 10_000_000  # a declared key set larger than this is refused rather than built


def key_file_path(spec: ir.Spec, path: str) -> str:
    """A key file's path: relative to the spec's folder, unless absolute."""
    return path if os.path.isabs(path) else os.path.join(spec.base_dir, path)


@attrs.frozen
class KeyFile:
    """A key file's header and rows, as stripped text (read with the csv module: `dpspec check`
    reads key files and stays free of pandas)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def column(self, name: str) -> list[str]:
        """One column's values, row by row."""
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def frame(self, columns):
        """Some columns as a pandas frame of text (for the run, where pandas is loaded anyway)."""
        idx = [self.columns.index(c) for c in columns]
        return pd.DataFrame([[row[i] for i in idx] for row in self.rows], columns=list(columns), dtype=object)


@functools.lru_cache(maxsize=64)
def _read_key_file(path: str, mtime: float) -> KeyFile:
    """The key file's rows (public data: read at check time, cached while unchanged)."""

    require_regular(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = [[cell.strip() for cell in row] for row in csv.reader(f) if row]
    if not lines:
        raise ValueError("the file is empty: a key file's first row names its columns")
    header = tuple(lines[0])
    for n, row in enumerate(lines[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"row {n} has {len(row)} fields, the header {len(header)}")
    return KeyFile(header, tuple(tuple(row) for row in lines[1:]))


def read_key_file(spec: ir.Spec, path: str) -> KeyFile:
    """The rows of a declared key file, or MechanismError if unreadable."""
    full = key_file_path(spec, path)
    try:
        return _read_key_file(full, os.stat(full).st_mtime)
    except (OSError, ValueError, UnicodeDecodeError, csv.Error) as e:
        raise MechanismError(f"cannot read the key file {path!r}: {e}") from None


def _column(spec: ir.Spec, table: str, column: str) -> ir.Column | None:
    t = spec.domain.table(table) if spec.domain else None
    return t.column(column) if t is not None else None


def declared_values(spec: ir.Spec, table: str, column: str) -> list | None:
    """The declared values of one column, in declared order (text for categories and enums, ints
    for an integer range, booleans), or None when the spec does not declare them."""
    col = _column(spec, table, column)
    if col is None:
        return None
    ty = col.type
    if ty.kind == "enum":
        return list(ty.values)
    if ty.kind == "int":
        return list(range(ty.low, ty.high + 1)) if ty.high - ty.low < MAX_KEY_ROWS else None
    if ty.kind == "bool":
        return [False, True]
    if ty.kind == "category" and ty.keys_from:
        frame = read_key_file(spec, ty.keys_from)
        if column not in frame.columns:
            raise MechanismError(f"the key file {ty.keys_from!r} has no column {column!r}")
        return list(dict.fromkeys(frame.column(column)))
    return None


def materialized(spec: ir.Spec, table: ir.Table) -> ir.Table:
    """The table with each `values from FILE` column's values read into its type, so the data's
    values are validated against them (a record outside the declared keys is a DataError) and
    its frame is categorical over the declared values."""
    if not any(c.type.keys_from for c in table.columns):
        return table
    columns = tuple(
        attrs.evolve(c, type=attrs.evolve(c.type, values=tuple(declared_values(spec, table.name, c.name))))
        if c.type.keys_from
        else c
        for c in table.columns
    )
    return attrs.evolve(table, columns=columns)


def undeclared(spec: ir.Spec, table: str, columns) -> list[str]:
    """The columns among `columns` whose values the spec does not declare."""
    out = []
    for c in columns:
        col = _column(spec, table, c)
        if col is not None and col.type.kind == "category" and not col.type.keys_from:
            out.append(c)
        elif col is not None and col.type.kind == "int" and col.type.high - col.type.low >= MAX_KEY_ROWS:
            out.append(c)
    return out


def declared_keys(spec: ir.Spec, table: str, columns) -> "object":
    """Every declared combination of `columns` (a pandas frame of text, one row per cell, in
    declared order), or MechanismError naming a column whose values are not declared.

    Columns read from one key file take that file's rows together (a county is declared within
    its state, not in every state); the others combine as a full product."""
    columns = list(columns)
    if missing := undeclared(spec, table, columns):
        raise MechanismError(
            f"column {missing[0]!r} of table {table!r} keys a release, but its values are not declared"
        )
    by_file: dict[str, list[str]] = {}
    groups: list = []
    for c in columns:
        ty = _column(spec, table, c).type
        if ty.kind == "category" and ty.keys_from:
            by_file.setdefault(ty.keys_from, []).append(c)
        else:
            groups.append(pd.DataFrame({c: [_text(v) for v in declared_values(spec, table, c)]}))
    for path, cols in by_file.items():
        frame = read_key_file(spec, path)
        absent = [c for c in cols if c not in frame.columns]
        if absent:
            raise MechanismError(f"the key file {path!r} has no column {absent[0]!r}")
        groups.append(frame.frame(cols).drop_duplicates().reset_index(drop=True))
    size = 1
    for g in groups:
        size *= len(g)
    if size > MAX_KEY_ROWS:
        raise MechanismError(
            f"the declared keys of {', '.join(columns)} have {size:,} combinations, more than "
            f"{MAX_KEY_ROWS:,}: release a coarser table"
        )
    out = pd.DataFrame(index=range(1))
    for g in groups:
        out = out.merge(g, how="cross")
    return out[columns] if columns else out


def typed_keys(spec: ir.Spec, table: str, keys):
    """Declared keys (text, as `declared_keys` gives them) typed as the domain declares each
    column: ints as int64, bools as booleans, the rest as text, as the table's data is."""
    out = keys.copy()
    t = spec.domain.table(table)
    for c in out.columns:
        kind = t.column(c).type.kind
        if kind == "int":
            out[c] = out[c].astype(np.int64)
        elif kind == "bool":
            out[c] = out[c] == "True"
    return out


def _text(value) -> str:
    return str(value)


def refusal(spec: ir.Spec, table: str, column: str, why: str) -> Diagnostic:
    """The checker's error at a column that keys a release without declared values: how to declare them."""
    col = _column(spec, table, column)
    loc = col.loc if col is not None else None
    return Diagnostic(
        f"column '{column}' of table '{table}' {why}, but its values are not declared: a release keyed by values "
        "found in the data shows which cells are occupied (a person alone in a cell would be revealed)",
        loc.line if loc else None,
        loc.column if loc else None,
        hint=f"declare them: '{column} : {{a, b, c}}', or '{column} : category values from \"{column}_values.csv\"' with "
        f'\'keys "{column}_values.csv" released "SOURCE"\' in the public block (a public key file or geography file)',
    )


def key_file_problems(spec: ir.Spec) -> list[Diagnostic]:
    """Every `values from FILE` must name a key file the public block declares, readable, with the column."""
    out: list[Diagnostic] = []
    public = {k.path for k in spec.public_keys}
    for table in spec.domain.tables if spec.domain else ():
        for col in table.columns:
            path = col.type.keys_from
            if not path:
                continue
            at = (col.loc.line, col.loc.column) if col.loc else (None, None)
            if path not in public:
                out.append(
                    Diagnostic(
                        f"column '{col.name}' reads its values from {path!r}, which the public block does "
                        "not declare: only a public key file may say which cells a release has",
                        *at,
                        hint=f'add \'keys "{path}" released "WHO PUBLISHED IT"\' to the public block',
                    )
                )
                continue
            try:
                frame = read_key_file(spec, path)
            except MechanismError as e:
                out.append(Diagnostic(str(e), *at))
                continue
            if col.name not in frame.columns:
                out.append(
                    Diagnostic(
                        f"the key file {path!r} has no column '{col.name}' (its columns: "
                        f"{', '.join(map(str, frame.columns))})",
                        *at,
                    )
                )
            elif "" in frame.column(col.name):
                out.append(Diagnostic(f"the key file {path!r} has empty values in column '{col.name}'", *at))
    return out


def released_key_set(frame, columns) -> set:
    """The distinct key rows an output holds, as tuples of text."""
    if not columns:
        return {()}

    if isinstance(frame, _streamed.StreamedTable):
        rows = frame.count(list(columns))[list(columns)]
    else:
        rows = frame[list(columns)].drop_duplicates()
    return {tuple(_text(x) for x in row) for row in rows.itertuples(index=False, name=None)}
