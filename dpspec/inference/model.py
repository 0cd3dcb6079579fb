"""The latent model `dpspec infer` samples: the target's cells, what the release says about them.

    target "count persons by PUMA, HISP"  ->  K cells (one per PUMA x HISP value)
    noisy released answers whose cells are sums of target cells  ->  likelihood blocks (A: rows x K)
    exact answers (invariants, public statistics) on coarser groups  ->  public totals per group
    earlier periods' counts a base measure is built from (`used as base`)  ->  known constants

Why only answers that are sums of target cells: any other answer (one broken down by a variable
the target is not) would need a finer latent table. Leaving it out conditions on less of the
release, which keeps the posterior valid but less sharp; the result lists what was left out.
"""

from __future__ import annotations

import itertools
import re

import attrs
import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec import ir
from dpspec.language.diagnostics import unknown
from dpspec.contract.mechanism import CountLikelihood

from .release import InferError
from dpspec.check.keys import declared_values

MAX_CELLS = 5000
MAX_TABLE_CELLS = 1000  # a released table is looked for up to here (a dense rank test, cubic in the cells)
_SEP = "\x1f"
_TARGET = re.compile(r"^\s*count\s+([A-Za-z_][\w]*)(?:\s+by\s+(.+?))?\s*$")


def parse_target(text: str, spec: ir.Spec) -> ir.CountQuery:
    """'count TABLE by COL, COL' checked against the spec's domain."""
    m = _TARGET.match(text or "")
    if not m:
        raise InferError(f"--target '{text}': expected a count query such as 'count persons by PUMA, HISP'")
    table_name, cols = m.group(1), m.group(2)
    tables = [t.name for t in spec.domain.tables] if spec.domain else []
    table = spec.domain.table(table_name) if spec.domain else None
    if table is None:
        message, hint = unknown("table", table_name, tables)
        raise InferError(f"--target: {message}" + (f"; {hint}" if hint else ""))
    columns = tuple(c.strip() for c in cols.split(",")) if cols else ()
    for c in columns:
        if table.column(c) is None:
            message, hint = unknown("column", c, table.column_names, f"table '{table_name}'")
            raise InferError(f"--target: {message}" + (f"; {hint}" if hint else ""))
    if len(set(columns)) != len(columns):
        raise InferError(f"--target '{text}': a column is named twice")
    return ir.CountQuery(table_name, columns)


@attrs.frozen
class Block:
    """Noisy released answers that are sums of target cells: row r is A[r] @ cells."""

    likelihood: CountLikelihood
    matrix: sp.csr_matrix  # rows x K, 0/1


@attrs.frozen
class Model:
    target: ir.CountQuery
    cells: pd.DataFrame  # K rows, one column per target column (text), ordered by group
    blocks: tuple  # Block, noisy answers that inform the target
    group: np.ndarray  # (K,) public-total group of each cell (contiguous)
    totals: np.ndarray  # (G,) public totals
    group_query: ir.CountQuery  # the public statistic that defines the groups
    postprocessed: np.ndarray | None  # (K,) the mechanism's post-processed counts, if released
    used: tuple  # descriptions of what was conditioned on
    ignored: tuple  # descriptions of released answers left out, with why

    @property
    def n_cells(self) -> int:
        return len(self.cells)

    def labels(self) -> list[str]:
        if not len(self.cells.columns):
            return ["all"]
        return [
            ", ".join(f"{c}={v}" for c, v in zip(self.cells.columns, row)) for row in self.cells.itertuples(index=False)
        ]


def _keys(frame: pd.DataFrame, columns) -> np.ndarray:
    if not columns:
        return np.full(len(frame), "", dtype=object)
    parts = [frame[c].astype(str).to_numpy(dtype=object) for c in columns]
    out = parts[0]
    for p in parts[1:]:
        out = out + _SEP + p
    return out


def _column_values(spec: ir.Spec, table: str, column: str, seen: list) -> list[str]:
    """A target column's values: the declared ones (a value list, a range, a bool, a public key
    file); for an undeclared category, those the release shows."""

    ty = spec.domain.table(table).column(column).type
    if ty.kind == "bool":
        return ["False", "True"]
    if ty.kind in ("enum", "category") or (ty.kind == "int" and ty.high - ty.low < MAX_CELLS):
        declared = declared_values(spec, table, column)
        if declared is not None:
            return [str(v) for v in declared]
    values = sorted({str(v) for frame in seen for v in frame})
    if not values:
        raise InferError(
            f"the release says nothing about the values of '{column}' (no released answer is broken down by it)"
        )
    return values


def _covered(cells: pd.DataFrame, answers) -> pd.DataFrame:
    """The cells some released answer covers. A declared cell none does (an earlier period the
    mechanism reads only as its base) is no part of what the release informs, and is left out
    rather than taken to hold zero."""
    keep = np.zeros(len(cells), dtype=bool)
    for columns, frame in answers:
        keep |= pd.Index(_keys(frame, columns)).get_indexer(_keys(cells, columns)) >= 0 if columns else True
    return cells[keep].reset_index(drop=True)


def _matrix(cells: pd.DataFrame, frame: pd.DataFrame, columns) -> sp.csr_matrix:
    """rows x K 0/1 matrix: row r covers the cells that agree with it on `columns`."""
    pairs = pd.DataFrame({"key": _keys(frame, columns), "row": np.arange(len(frame))}).merge(
        pd.DataFrame({"key": _keys(cells, columns), "cell": np.arange(len(cells))}), on="key"
    )
    r, c = pairs["row"].to_numpy(), pairs["cell"].to_numpy()
    return sp.csr_matrix((np.ones(r.size, dtype=np.int64), (r, c)), shape=(len(frame), len(cells)))


def _microdata_counts(outputs: dict, query: ir.CountQuery) -> pd.DataFrame | None:
    """A count table for `query`: a released one (`count_TABLE_COLS`, as `release` names it), or
    one tabulated from released microdata of its table; None if neither is there."""
    table = outputs.get("_".join(["count", query.table, *query.columns]))
    if table is not None and "count" in table.columns and set(query.columns) <= set(table.columns):
        return table[[*query.columns, "count"]].astype({c: str for c in query.columns})
    frame = outputs.get(query.table)
    if frame is None or not set(query.columns) <= set(frame.columns):
        return None
    if not query.columns:
        return pd.DataFrame({"count": [len(frame)]})
    keys = frame[list(query.columns)].astype(str)
    return keys.value_counts(sort=False).rename("count").reset_index()


def _released_table(blocks, n_cells: int) -> np.ndarray | None:
    """The table of target cells the noisy answers pin down exactly, if they do: every cell
    determined (full column rank) by a nonnegative integer solution that reproduces every answer
    (cases and deaths released together give alive = cases - deaths, dead = deaths). Such a release
    is synthetic data, so its contractions (a rate published as 0 or 1) can be checked against the
    posterior; None otherwise."""
    if not blocks or n_cells > MAX_TABLE_CELLS:
        return None
    a = sp.vstack([b.matrix for b in blocks]).toarray().astype(float)
    y = np.concatenate([np.asarray(b.likelihood.value, dtype=float) for b in blocks])
    if a.shape[0] < n_cells or np.linalg.matrix_rank(a) < n_cells:
        return None
    x = np.rint(np.linalg.lstsq(a, y, rcond=None)[0])
    if np.any(x < 0) or not np.array_equal(a @ x, y):
        return None
    return x.astype(np.int64)


def build_model(spec: ir.Spec, target: ir.CountQuery, likelihoods: list, outputs: dict) -> Model:
    """Cells, likelihood blocks, public totals and post-processed values for `target`."""
    tcols = target.columns
    used, ignored = [], []
    informative, exact = [], []
    for lk in likelihoods:
        q = lk.query
        what = q.describe()
        if q.table != target.table:
            ignored.append(f"{what}: another table than the target's")
        elif not set(q.columns) <= set(tcols):
            extra = ", ".join(c for c in q.columns if c not in tcols)
            ignored.append(f"{what} ({len(lk.value)} answers): broken down by {extra}, which the target is not")
        else:
            (exact if lk.is_exact else informative).append(lk)
    if not informative:
        table = spec.domain.table(target.table)
        foreign = sorted({c for lk in likelihoods for c in lk.query.columns if table.column(c) is None})
        why = "".join(
            f"; '{c}' is not a column of table '{target.table}' but a dimension the mechanism publishes, "
            "so no target over the table's columns is a sum of its answers"
            for c in foreign
        )
        shown = ignored[:4] + ([f"and {len(ignored) - 4} more"] if len(ignored) > 4 else [])
        raise InferError(
            f"the release does not inform '{target.describe()}': no released noisy answer is a sum of its cells"
            + (f" (left out: {'; '.join(shown)})" if ignored else "")
            + why
        )
    # public statistics: exact answers in the release, and declared invariants / public
    # statistics tabulated from released microdata (the mechanism keeps them exact)
    public = [(lk.query, lk.cells.assign(count=lk.value)) for lk in exact]
    # earlier periods' counts (`used as base`): exact and public, but of other periods than the
    # released one, so constants of the likelihood rather than totals the target's cells must meet
    constants = [
        f"{p.query.describe()}: the earlier period's counts the base measure is built from (Z, exact), "
        "known constants of the likelihood; they count other periods, so they constrain none of the target's cells"
        for p in spec.public
        if p.use == "base" and p.query.table == target.table
    ]
    for q in [*spec.invariants, *(p.query for p in spec.public if p.use != "base")]:
        if q.table != target.table or any(q.key() == p.key() for p, _ in public):
            continue
        if not set(q.columns) <= set(tcols):
            ignored.append(f"public statistic '{q.describe()}': broken down by a column the target is not")
            continue
        counts = _microdata_counts(outputs, q)
        if counts is None:
            raise InferError(
                f"the spec declares '{q.describe()}' as published exactly, but the release holds neither "
                "its values nor microdata to tabulate them"
            )
        public.append((q, counts))
    if not public:
        raise InferError(
            f"no public total covers '{target.describe()}': the default prior (a Dirichlet-multinomial "
            "consistent with the public totals) needs at least one declared invariant or public count "
            "of the target's table whose columns are among the target's"
        )
    seen = {c: [] for c in tcols}
    for lk in informative:
        for c in lk.query.columns:
            seen[c].append(lk.cells[c])
    for q, counts in public:
        for c in q.columns:
            seen[c].append(counts[c])
    values = [_column_values(spec, target.table, c, seen[c]) for c in tcols]
    n_cells = int(np.prod([len(v) for v in values])) if values else 1
    if n_cells > MAX_CELLS:
        raise InferError(
            f"'{target.describe()}' has {n_cells:,} cells; dpspec infer handles at most {MAX_CELLS:,} "
            "(choose a coarser target)"
        )
    # groups: the finest public statistic; every other one must be coarser (nested) and agree
    public.sort(key=lambda item: len(item[0].columns))
    finest_q, finest = public[-1]
    for q, _ in public[:-1]:
        if not set(q.columns) <= set(finest_q.columns):
            raise InferError(
                f"public statistics '{q.describe()}' and '{finest_q.describe()}' are not nested; "
                "dpspec infer conditions on nested public totals only"
            )
    cells = (
        pd.DataFrame(list(itertools.product(*values)), columns=list(tcols))
        if values
        else pd.DataFrame(index=pd.RangeIndex(1))
    )
    if values:
        cells = _covered(
            cells, [(lk.query.columns, lk.cells) for lk in informative] + [(q.columns, counts) for q, counts in public]
        )
    gkeys = _keys(cells, finest_q.columns)
    fkeys = _keys(finest, finest_q.columns)
    ftotals = pd.Series(finest["count"].to_numpy(dtype=np.int64), index=fkeys).groupby(level=0).sum()
    missing = sorted(set(gkeys) - set(ftotals.index))
    if missing:
        ftotals = pd.concat([ftotals, pd.Series(0, index=missing)])  # groups absent from a count table hold 0
    order = np.argsort(pd.Index(ftotals.index).get_indexer(gkeys), kind="stable")
    cells = cells.iloc[order].reset_index(drop=True)
    gkeys = gkeys[order]
    group_names = list(dict.fromkeys(gkeys))  # first-appearance order: contiguous by construction
    group = pd.Index(group_names).get_indexer(gkeys)
    totals = ftotals.reindex(group_names).to_numpy(dtype=np.int64)
    first = np.searchsorted(group, np.arange(len(totals)))  # a representative cell per group
    for q, counts in public[:-1]:
        coarse = pd.Series(totals, index=_keys(cells.iloc[first], q.columns)).groupby(level=0).sum()
        given = (
            pd.Series(counts["count"].to_numpy(dtype=np.int64), index=_keys(counts, q.columns)).groupby(level=0).sum()
        )
        if not np.array_equal(coarse.reindex(given.index, fill_value=0).to_numpy(), given.to_numpy()):
            raise InferError(
                f"the release contradicts itself: '{q.describe()}' does not equal the sum of '{finest_q.describe()}'"
            )
    blocks = tuple(Block(lk, _matrix(cells, lk.cells, lk.query.columns)) for lk in informative)
    for b in blocks:
        used.append(
            f"{b.likelihood.query.describe()} ({len(b.likelihood.value)} noisy answers): {b.likelihood.description}"
        )
    for q, _ in public:
        used.append(f"{q.describe()}: published exactly")
    used.extend(constants)
    post = _microdata_counts(outputs, target)
    postprocessed = None
    if post is not None:
        s = pd.Series(post["count"].to_numpy(dtype=np.int64), index=_keys(post, tcols))
        postprocessed = s.reindex(_keys(cells, tcols), fill_value=0).to_numpy(dtype=np.int64)
    else:
        postprocessed = _released_table(blocks, len(cells))
        if postprocessed is not None:
            used.append(
                "the released answers determine one table of the target's cells (a synthetic release, as "
                "the Wasserstein mechanisms' cases and deaths): compared with the posterior as its published values"
            )
    return Model(
        target, cells, blocks, group.astype(np.int64), totals, finest_q, postprocessed, tuple(used), tuple(ignored)
    )
