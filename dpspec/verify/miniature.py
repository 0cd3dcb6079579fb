"""Miniature datasets from a spec's domain, neighbours in one universe, and runs on them.

For mechanisms that supply no neighbouring pairs of their own, the verifier builds them here:
a few units per table with values from each column's declared value set (nesting and links
respected), then neighbours under the spec's relation (change one unit, or remove one) that
agree on every declared invariant and public statistic. Outputs are flattened to numbers: the
generic statistic is everything the spec publishes, in the order it is published.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec import ir, progress
from dpspec.errors import DpspecError
from dpspec.contract.mechanism import NeighbourPair, RunContext, call_run
from dpspec.contract.streamed import StreamedTable
from dpspec.lazy import LazyModule

# imported on first use: at import they would load randomgen with this module
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())

UNITS = 3  # units per miniature table
MAX_PAIRS = 4
BATCH = 200_000  # runs per call of a mechanism's batched runner
_MISSING = -1.0e300  # stands for "no value here in this run" (outputs of varying length)


class VerifyError(DpspecError):
    """Verification cannot proceed (no mechanism, no neighbours, a mechanism refusing the miniature
    data in words, an infinite claim); the user must fix the spec. Crashes of plugin code are
    `dpspec.verify.PluginFailure` instead: bugs, not the user's fault."""


def _children(table: ir.Table, column: str) -> list[str]:
    """Columns nested (transitively) in `column`."""
    out, frontier = [], [column]
    while frontier:
        parent = frontier.pop()
        for c in table.columns:
            if c.type.kind == "category" and c.type.parent == parent and c.name not in out:
                out.append(c.name)
                frontier.append(c.name)
    return out


def _value(col: ir.Column, variant: int, parent_code: str | None):
    """The variant-th value of a column's value set (0 = the base value, 1 = an alternative)."""
    ty = col.type
    if ty.kind == "enum":
        return ty.values[min(variant, len(ty.values) - 1)]
    if ty.kind == "bool":
        return bool(variant % 2)
    if ty.kind == "int":
        return min(ty.low + variant, ty.high)
    prefix = f"{parent_code}." if parent_code is not None else "c"
    return f"{prefix}{variant + 1}"


def _has_alternative(col: ir.Column) -> bool:
    ty = col.type
    return not ((ty.kind == "enum" and len(ty.values) < 2) or (ty.kind == "int" and ty.high <= ty.low))


def record(table: ir.Table, variants: dict[str, int]) -> dict:
    """One record: each column at its variant, nested codes built from their parents' codes."""
    row: dict = {}
    pending = list(table.columns)
    while pending:
        col = pending.pop(0)
        parent = col.type.parent if col.type.kind == "category" else None
        if parent and parent not in row and table.column(parent) is not None:
            pending.append(col)
            continue
        row[col.name] = _value(col, variants.get(col.name, 0), row.get(parent) if parent else None)
    return row


def typed_frame(table: ir.Table, rows: list[dict]) -> pd.DataFrame:
    """Rows as the data loader types them (categoricals over the declared values, int64, bool)."""
    out = {}
    for col in table.columns:
        values = [r[col.name] for r in rows]
        ty = col.type
        if ty.kind == "enum":
            out[col.name] = pd.Categorical(values, categories=list(ty.values))
        elif ty.kind == "bool":
            out[col.name] = np.array(values, dtype=bool)
        elif ty.kind == "int":
            out[col.name] = np.array(values, dtype=np.int64)
        else:
            out[col.name] = pd.Series(values, dtype="category")
    return pd.DataFrame(out)


def id_columns(spec: ir.Spec) -> dict[str, str]:
    """{table: link column} for tables whose units are pointed to by a finer table."""
    return {t.parent: t.link for t in spec.domain.tables if t.parent and t.link}


def miniature_rows(spec: ir.Spec) -> dict[str, list[dict]]:
    """UNITS records per table; linked tables get one child per parent unit."""
    ids = id_columns(spec)
    rows = {}
    for table in spec.domain.tables:
        records = [record(table, {}) for _ in range(UNITS)]
        for key in {ids.get(table.name), table.link} - {None}:
            col = table.column(key)
            if col is not None:
                for i, r in enumerate(records):
                    r[key] = _value(col, i, None)
        rows[table.name] = records
    return rows


def _frames(spec: ir.Spec, rows: dict[str, list[dict]]) -> dict[str, pd.DataFrame]:
    return {t.name: typed_frame(t, rows[t.name]) for t in spec.domain.tables}


def _count_key(frame: pd.DataFrame, cols) -> dict:
    if not cols:
        return {(): len(frame)}
    counts = frame[list(cols)].astype(str).value_counts()
    return {tuple(k) if isinstance(k, tuple) else (k,): int(v) for k, v in counts.items()}


def same_universe(spec: ir.Spec, queries, left: dict, right: dict) -> str | None:
    """None when every query has the same counts on both datasets; else the first that differs."""
    for q in queries:
        if q.table not in left or q.table not in right:
            continue
        if _count_key(left[q.table], q.columns) != _count_key(right[q.table], q.columns):
            return q.describe()
    return None


def universe_queries(spec: ir.Spec, induced=()) -> list[ir.CountQuery]:
    """Every statistic that fixes the universe: declared and induced invariants, public information.

    A public item `used as base` is left out: it is the earlier periods' counts a base measure is
    built from, not the released period's (which the release protects), so it fixes no universe of
    the pairs a mechanism compares; `infer` reads it the same way (constants, not totals)."""
    queries = list(spec.invariants) + list(induced) + [p.query for p in spec.public if p.use != "base"]
    return list({q.key(): q for q in queries}.values())


def generic_pairs(spec: ir.Spec, induced=()) -> list[NeighbourPair]:
    """Neighbours under the spec's relation on its unit table that keep every invariant."""
    if spec.unit is None or spec.domain is None or spec.domain.table(spec.unit.table) is None:
        raise VerifyError("the spec declares no unit on a table of its domain: no neighbours to build")
    table = spec.domain.table(spec.unit.table)
    rows = miniature_rows(spec)
    left = _frames(spec, rows)
    queries = universe_queries(spec, induced)
    pairs = []
    if spec.unit.relation == "symdiff":
        right_rows = dict(rows)
        right_rows[table.name] = rows[table.name][1:]
        for child in spec.domain.tables:  # a removed unit takes its linked records with it
            if child.parent == table.name and child.link:
                gone = rows[table.name][0].get(child.link)
                right_rows[child.name] = [r for r in rows[child.name] if r.get(child.link) != gone]
        right = _frames(spec, right_rows)
        if same_universe(spec, queries, left, right) is None:
            pairs.append(NeighbourPair(f"remove one {table.name} unit", left, right))
    else:
        fixed = {id_columns(spec).get(table.name), table.link} - {None}
        free = [c for c in table.columns if c.name not in fixed and _has_alternative(c)]
        candidates = [[c.name for c in free]] + [[c.name] for c in free]
        seen = set()
        for columns in candidates:
            if not columns or tuple(columns) in seen:
                continue
            seen.add(tuple(columns))
            variants = {c: 1 for c in columns}
            for c in columns:
                variants.update({k: 1 for k in _children(table, c)})
            changed = dict(record(table, variants))
            for key in fixed:
                changed[key] = rows[table.name][0][key]
            right_rows = dict(rows)
            right_rows[table.name] = [changed] + rows[table.name][1:]
            right = _frames(spec, right_rows)
            if same_universe(spec, queries, left, right) is None:
                pairs.append(NeighbourPair(f"change one {table.name} unit's {', '.join(columns)}", left, right))
            # a change of every free column at once is the worst case for most mechanisms; single
            # columns are tried only when it moves an invariant (each pair costs confidence)
            if len(pairs) >= MAX_PAIRS or (pairs and len(columns) > 1):
                break
    if not pairs:
        raise VerifyError(
            f"no neighbouring miniature datasets ({spec.unit.relation} on {table.name}) keep the declared "
            "invariants: every change the relation allows moves an invariant, so there is nothing to test"
        )
    return pairs


# ---- runs ---------------------------------------------------------------------------------


class Flattener:
    """Published outputs as one row of numbers; text values get codes stable across runs."""

    def __init__(self):
        self.codes: dict = {}
        self.labels: list[str] | None = None

    def _numbers(self, series: pd.Series) -> np.ndarray:
        if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
            return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        values = series.astype(object).to_numpy()
        return np.array([self.codes.setdefault(v, len(self.codes)) for v in values], dtype=float)

    def __call__(self, outputs: dict) -> np.ndarray:
        parts, labels = [], []
        for name in sorted(outputs):
            frame = outputs[name]
            if isinstance(frame, StreamedTable):  # a miniature release is small: read it whole
                frame = frame.to_pandas()
            if not isinstance(frame, pd.DataFrame):
                frame = pd.DataFrame({name: np.atleast_1d(np.asarray(frame))})
            for col in frame.columns:
                values = self._numbers(frame[col])
                parts.append(values)
                labels += [f"{name}.{col}[{i}]" for i in range(len(values))]
        if self.labels is None:
            self.labels = labels
        out = np.concatenate(parts) if parts else np.zeros(0)
        return np.where(np.isnan(out), _MISSING, out)


def stack(rows: list[np.ndarray]) -> np.ndarray:
    """Rows of possibly different lengths as one matrix (short rows padded), length appended."""
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width + 1), _MISSING)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
        out[i, width] = len(r)
    return out


def run_many(
    mechanism, spec: ir.Spec, params: dict, pair: NeighbourPair, data: dict, n: int, rng, flatten: Flattener, what: str
) -> np.ndarray:
    """n runs of the mechanism on `data`; each row the statistic of one run."""
    if pair.batch is not None:  # in chunks, so memory stays bounded whatever --runs is
        chunks = []
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            progress.report(what, start, n)
            chunks.append(np.asarray(pair.batch(data, m, rng), dtype=float).reshape(m, -1))
        if len({c.shape[1] for c in chunks}) > 1:
            raise VerifyError("the mechanism's batched runner returned statistics of different lengths")
        return np.concatenate(chunks)
    rows = []
    step = max(n // 100, 1)
    for i in range(n):
        if i % step == 0:
            progress.report(what, i, n)
        release = call_run(mechanism, spec, params, data, RunContext(rng=rng))
        if pair.statistic is not None:
            rows.append(np.asarray(pair.statistic(release), dtype=float).reshape(-1))
        else:
            rows.append(flatten(_compiler.published_outputs(spec, release)))
    return stack(rows)
