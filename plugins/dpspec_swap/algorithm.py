"""The permutation swapping algorithm (PSA), vectorized over strata.

Records are grouped by their match key; in each stratum with two or more records every record
is selected with probability p (a stratum whose draw selects exactly one record is redrawn,
since one record cannot be deranged), and the selected records receive the swapping values of
the record that a uniformly random derangement maps them to. Theorem II.1 needs the
derangement to be uniform over all derangements, which is why a random n-cycle is not used
(`dpspec_swap.derangements` draws it at about the cost of one shuffle).

Only loops over redraw rounds (and the few column values a redraw scans) are Python loops; the
number of records still in play shrinks geometrically from round to round. Stratum codes are
computed for the selected records only where the match columns allow it (`frame_keys`): coding
every record would cost about as much as the selection itself.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, MechanismError, bernoulli, shown
from dpspec_swap.derangements import stable_order, uniform_derangements
from dpspec_swap.theorem import as_rate

# Codes are kept dense enough that arrays indexed by stratum stay about as small as the data.
_DENSE_FACTOR = 4
_INT32_MAX = np.iinfo(np.int32).max


def largest_stratum(df: pd.DataFrame, match, other_cols) -> tuple[int, dict | None]:
    """b and the match key of the stratum that attains it (None when b == 0).

    A stratum counts only if two of its records differ in some swapping or holding column:
    swapping identical records changes nothing, so such strata cannot leak. Ties go to the
    stratum whose key appears first in the data. Row identities are exact integer codes
    (no hashing), so b is exact.
    """
    match = list(match)
    other = [c for c in other_cols if c not in match]
    check_columns(df, match + other)
    n = len(df)
    if n == 0 or not other:
        return 0, None
    s_codes, n_strata = stratum_codes(df, match)
    r_codes, n_rows = stratum_codes(df, match + other)
    # Each distinct row code lies in exactly one stratum; count distinct rows per stratum.
    stratum_of_row = np.full(n_rows, -1, dtype=np.int64)
    stratum_of_row[r_codes] = s_codes
    present = stratum_of_row[stratum_of_row >= 0]
    distinct = np.bincount(present, minlength=n_strata)
    sizes = np.bincount(s_codes, minlength=n_strata)
    sizes = np.where(distinct >= 2, sizes, 0)
    if sizes.max(initial=0) == 0:
        return 0, None
    b = int(sizes.max())
    winners = np.flatnonzero(sizes == b)
    rows_in_winners = np.flatnonzero(np.isin(s_codes, winners))
    first_row = int(rows_in_winners[0])
    key = {c: plain_value(df[c].iloc[first_row]) for c in match}
    return b, key


def plain_value(value):
    """numpy scalars to Python scalars, so keys serialize to JSON."""
    return value.item() if hasattr(value, "item") else value


# ---------------------------------------------------------------------------------------------
# stratum codes
# ---------------------------------------------------------------------------------------------


def stratum_codes(df: pd.DataFrame, cols) -> tuple[np.ndarray, int]:
    """Integer codes in [0, n_codes) that are equal exactly when the rows agree on ``cols``.

    Some codes in the range may be unused. Missing values are a value of their own (they are
    data to the invariants, too). Categorical and small-range integer columns are coded
    without hashing, which keeps this linear and cheap on census-sized frames.
    """
    cols = list(cols)
    check_columns(df, cols)
    n = len(df)
    if not cols or n == 0:
        return np.zeros(n, dtype=np.int32), (1 if n else 0)
    parts = [_column_codes(df[c]) for c in cols]
    cards = [card for _, card in parts]
    total = 1
    for card in cards:
        total *= card
    limit = max(_DENSE_FACTOR * n, 1 << 16)
    if total <= min(limit, _INT32_MAX):
        acc = parts[0][0].astype(np.int32)
        for codes, card in parts[1:]:
            acc *= card
            acc += codes
        return acc, total
    # Wide keys: combine in int64 and re-densify whenever the code space gets too large.
    acc = parts[0][0].astype(np.int64)
    card_acc = cards[0]
    for codes, card in parts[1:]:
        if card_acc * card >= 1 << 62:
            acc, card_acc = _densify(acc)
        acc *= card
        acc += codes
        card_acc *= card
    if card_acc > limit:
        acc, card_acc = _densify(acc)
    if card_acc <= _INT32_MAX:
        acc = acc.astype(np.int32)
    return acc, card_acc


def _densify(codes: np.ndarray) -> tuple[np.ndarray, int]:
    dense, uniques = pd.factorize(codes)
    return dense.astype(np.int64, copy=False), len(uniques)


def _column_codes(s: pd.Series) -> tuple[np.ndarray, int]:
    """(codes, cardinality) for one column; codes are small non-negative integers."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy()
        # -1 marks a missing value: shift so it becomes code 0.
        wide = np.int16 if len(s.cat.categories) < (1 << 15) - 1 else np.int32
        return codes.astype(wide) + 1, len(s.cat.categories) + 1
    if s.dtype == bool:
        return s.to_numpy().view(np.uint8), 2
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "iu" and len(s):
        values = s.to_numpy()
        lo, hi = int(values.min()), int(values.max())
        if hi - lo < max(2 * len(s), 1 << 16):
            # Subtract in the unsigned type of the same width: wraps exactly, never overflows.
            unsigned = np.dtype(f"u{values.dtype.itemsize}")
            offset = (
                values - np.array(lo, dtype=values.dtype)[()]
                if values.dtype.kind == "u"
                else values.view(unsigned) - np.array(lo, dtype=values.dtype).view(unsigned)[()]
            )
            return offset.astype(np.int32 if hi - lo <= _INT32_MAX else np.int64), hi - lo + 1
    codes, uniques = pd.factorize(s, use_na_sentinel=False)
    return codes, max(len(uniques), 1)


def check_columns(df: pd.DataFrame, cols) -> None:
    """DataError naming the columns a mechanism needs that the data does not have."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(
            f"column(s) {', '.join(map(repr, missing))} not in the data "
            f"(it has {', '.join(map(repr, map(str, df.columns)))})"
        )


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


# ---------------------------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------------------------


def select(strata_codes, p, rng) -> np.ndarray:
    """Which records the PSA swaps: a boolean mask over the records (see `selected_rows`)."""
    codes = np.asarray(strata_codes)
    mask = np.zeros(codes.size, dtype=bool)
    if codes.size:
        mask[selected_rows(codes, int(codes.max()) + 1, p, _rng(rng))] = True
    return mask


def selected_rows(codes: np.ndarray, n_codes: int, p, rng: np.random.Generator) -> np.ndarray:
    """The positions of the records the PSA swaps, in increasing order.

    Each record of a stratum with two or more records is selected with probability p; a
    stratum whose draw selects exactly one record is redrawn as a whole until it does not.
    Records alone in their stratum are never selected: such a stratum is found only when its
    record was drawn (redrawing it until unselected would end the same way), which spares a
    count of every stratum's size.
    """
    return _select(_CodeArray(codes, n_codes), as_rate(p), rng)[0]


def _select(keys, q: Fraction, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """`selected_rows` on stratum keys that may be computed only where asked (`_FrameKeys`):
    (chosen rows, their codes, the count of chosen per code, or None after a redraw)."""
    sel = bernoulli(q, keys.n, rng)
    chosen = np.flatnonzero(sel)
    chosen_codes = keys.at(chosen)
    counts = np.bincount(chosen_codes, minlength=keys.n_codes)
    bad = np.flatnonzero(counts == 1)
    if bad.size == 0:
        return chosen, chosen_codes, counts
    rows = keys.rows_in(bad)
    in_bad = rows
    local = np.searchsorted(bad, keys.at(rows))
    n_bad = bad.size
    alone = np.bincount(local, minlength=n_bad) == 1
    if alone.any():
        sel[rows[alone[local]]] = False
        keep = ~alone[local]
        rows, local = rows[keep], local[keep]
    while rows.size:
        draw = bernoulli(q, rows.size, rng)
        sel[rows] = draw
        again = np.bincount(local[draw], minlength=n_bad) == 1
        if not again.any():
            break
        keep = again[local]
        rows, local = rows[keep], local[keep]
    # Only the redrawn strata's records changed: merge them back instead of another pass over sel.
    member = np.zeros(keys.n_codes, dtype=bool)
    member[bad] = True
    kept = ~member[chosen_codes]
    redrawn = in_bad[sel[in_bad]]
    chosen = np.concatenate([chosen[kept], redrawn])
    order = np.argsort(chosen, kind="stable")  # two sorted runs: a linear merge
    return chosen[order], np.concatenate([chosen_codes[kept], keys.at(redrawn)])[order], None


class _CodeArray:
    """Stratum keys held as one code per record (what `stratum_codes` returns)."""

    def __init__(self, codes: np.ndarray, n_codes: int):
        self.codes, self.n, self.n_codes = codes, codes.size, n_codes

    def at(self, rows: np.ndarray) -> np.ndarray:
        return self.codes[rows]

    def rows_in(self, strata: np.ndarray) -> np.ndarray:
        """The records whose code is in ``strata``, in increasing order."""
        member = np.zeros(self.n_codes, dtype=bool)
        member[strata] = True
        return np.flatnonzero(member[self.codes])


# A redraw finds its strata's records by one comparison pass per distinct value of the most
# selective column; beyond this many values, one pass coding every record is cheaper.
_SCAN_VALUES = 8


class _FrameKeys:
    """The codes of `stratum_codes`, computed only for the records asked about.

    The PSA needs the codes of the selected records (a few percent of them) and, when a
    stratum must be redrawn, the records of a few strata; coding every record costs more than
    the selection itself. Only for columns whose code is a function of the value alone
    (categorical, boolean: see `frame_keys`), so every code equals the one `stratum_codes` gives.
    """

    def __init__(self, df: pd.DataFrame, names: list, columns: list[tuple[np.ndarray, int, int]], n_codes: int):
        self.df, self.names, self.n, self.n_codes = df, names, len(df), n_codes
        self.columns = columns  # (raw codes, shift, cardinality) per column, most significant first
        self.wide = [np.int16 if card <= (1 << 15) - 1 else np.int32 for _, _, card in columns]

    def at(self, rows: np.ndarray) -> np.ndarray:
        acc = None
        for (raw, shift, card), wide in zip(self.columns, self.wide):
            part = raw[rows].astype(wide)
            if shift:
                part += shift
            if acc is None:
                acc = part.astype(np.int32)
            else:
                acc *= card
                acc += part
        return acc

    def rows_in(self, strata: np.ndarray) -> np.ndarray:
        cards = [card for _, _, card in self.columns]
        lead = int(np.argmax(cards))  # the most selective column: fewest records per value
        below = 1
        for card in cards[lead + 1 :]:
            below *= card
        values = np.unique(strata // below % cards[lead])
        if values.size > _SCAN_VALUES:
            return _CodeArray(*stratum_codes(self.df, self.names)).rows_in(strata)
        member = np.zeros(self.n_codes, dtype=bool)
        member[strata] = True
        raw, shift, _ = self.columns[lead]
        found = []
        for v in values.tolist():
            rows = np.flatnonzero(raw == raw.dtype.type(v - shift))
            found.append(rows[member[self.at(rows)]])
        return np.sort(np.concatenate(found)) if len(found) > 1 else found[0]


def frame_keys(df: pd.DataFrame, cols) -> _CodeArray | _FrameKeys:
    """The stratum keys of ``df`` on ``cols``: computed on demand when every column is
    categorical or boolean and the codes need no densifying, else `stratum_codes` in full."""
    cols = list(cols)
    check_columns(df, cols)
    n = len(df)
    columns, total = [], 1
    for c in cols:
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            columns.append((s.array.codes, 1, len(s.cat.categories) + 1))  # a view, not a copy
        elif s.dtype == bool:
            columns.append((s.to_numpy().view(np.uint8), 0, 2))
        else:
            break
        total *= columns[-1][2]
    if not cols or n == 0 or len(columns) < len(cols) or total > min(max(_DENSE_FACTOR * n, 1 << 16), _INT32_MAX):
        return _CodeArray(*stratum_codes(df, cols))
    return _FrameKeys(df, cols, columns, total)


# ---------------------------------------------------------------------------------------------
# swapping
# ---------------------------------------------------------------------------------------------


@attrs.frozen(eq=False)
class SwapResult:
    """The swapped data and what a report or a carry-along step needs to know about it.

    Row ``rows[i]`` received the swapping values of row ``targets[i]``; every other row kept its own.
    """

    data: pd.DataFrame
    rows: np.ndarray = attrs.field(repr=False)
    targets: np.ndarray = attrs.field(repr=False)
    n_strata_touched: int

    @property
    def n_selected(self) -> int:
        return int(self.rows.size)

    @property
    def source(self) -> np.ndarray:
        """``source[i]``: the row whose swapping values row i received (i itself if not swapped).
        Built on demand: a whole-table index array is a cost only carrying along needs."""
        source = np.arange(len(self.data), dtype=np.int64)
        source[self.rows] = self.targets
        return source


def check_roles(df: pd.DataFrame, match, swap) -> tuple[list, list]:
    """(match, swap) as lists; MechanismError or DataError if the PSA cannot run with them."""
    match, swap = list(match), list(swap)
    if not swap:
        raise MechanismError("the PSA needs at least one swapping variable")
    overlap = sorted(set(match) & set(swap), key=str)
    if overlap:
        raise MechanismError(f"column(s) {', '.join(map(repr, overlap))} cannot both match and be swapped")
    check_columns(df, match + swap)
    return match, swap


def swap_records(df: pd.DataFrame, match, swap, p, rng) -> SwapResult:
    """Run the PSA on ``df``: match key ``match``, swapping variables ``swap``, rate ``p``.

    The input frame is never modified; the result has the same columns, dtypes and index.
    """
    match, swap = check_roles(df, match, swap)
    rng = _rng(rng)
    q = as_rate(p)
    keys = frame_keys(df, match)
    chosen, chosen_codes, counts = _select(keys, q, rng)
    grouped = chosen[stable_order(chosen_codes, keys.n_codes)]
    seg_sizes = np.bincount(chosen_codes) if counts is None else counts
    seg_sizes = seg_sizes[seg_sizes > 0]
    targets = grouped[uniform_derangements(seg_sizes, rng)]
    out = _swapped_frame(df, swap, grouped, targets)
    return SwapResult(data=out, rows=grouped, targets=targets, n_strata_touched=int(seg_sizes.size))


def _swapped_frame(df: pd.DataFrame, swap, rows: np.ndarray, targets: np.ndarray) -> pd.DataFrame:
    """A new frame whose swap columns take, at ``rows``, the values found at ``targets``."""
    # Copy-on-write (always on from pandas 3) makes a shallow copy safe; older pandas copies.
    out = df.copy(deep=not _copy_on_write())
    for col in swap:
        # As a Series on the frame's own index: set without the copy an array would get.
        out[col] = pd.Series(_scatter(df[col], rows, targets), index=out.index, copy=False)
    return out


def _scatter(s: pd.Series, rows: np.ndarray, targets: np.ndarray):
    """The column's values with ``values[rows] = values[targets]`` (positional, a new array)."""
    if isinstance(s.dtype, pd.CategoricalDtype):  # on the codes: no re-validation of categories
        codes = s.array.codes.copy()
        codes[rows] = codes[targets]
        return pd.Categorical.from_codes(codes, dtype=s.dtype, validate=False)
    values = s.array.copy()
    if rows.size:
        values[rows] = s.array.take(targets)
    return values


def _copy_on_write() -> bool:
    if int(pd.__version__.split(".")[0]) >= 3:
        return True
    return bool(pd.get_option("mode.copy_on_write"))


# ---------------------------------------------------------------------------------------------
# units above and below the swap unit
# ---------------------------------------------------------------------------------------------


def carry_along(
    child_df: pd.DataFrame, parent_key_col: str, parent_df_before: pd.DataFrame, result: SwapResult, swap
) -> pd.DataFrame:
    """Give every child record (a person) the swapped values of its parent (its household).

    Households are the swap unit, so their geography moves with all their members. The key
    column has the same name in both frames and must be unique among the parents. A child
    column that disagrees with its household before the swap is a data error: carrying it
    along would silently overwrite a real inconsistency.
    """
    swap = list(swap)
    check_columns(parent_df_before, [parent_key_col, *swap])
    check_columns(child_df, [parent_key_col])
    source = result.source
    if len(source) != len(parent_df_before):
        raise MechanismError("the swap result does not belong to this parent table")
    keys = pd.Index(parent_df_before[parent_key_col])
    if not keys.is_unique:
        dup = keys[keys.duplicated()][0]
        raise DataError(f"column {parent_key_col!r}: key {shown(dup)} names more than one parent record")
    pos = keys.get_indexer(child_df[parent_key_col])
    if (pos < 0).any():
        row = int(np.flatnonzero(pos < 0)[0])
        raise DataError(
            f"column {parent_key_col!r}, row {shown(child_df.index[row])}: value "
            f"{shown(child_df[parent_key_col].iloc[row])} matches no parent record"
        )
    out = child_df.copy(deep=not _copy_on_write())
    for col in swap:
        before = parent_df_before[col].array.take(pos)
        if col in child_df.columns:
            mismatch = ~_equal_or_both_missing(child_df[col].array, before)
            if mismatch.any():
                row = int(np.flatnonzero(mismatch)[0])
                raise DataError(
                    f"column {col!r}, row {shown(child_df.index[row])}: value "
                    f"{shown(child_df[col].iloc[row])} differs from its parent's "
                    f"{shown(before[row])} before the swap"
                )
        after = parent_df_before[col].array.take(source[pos])
        if col in child_df.columns and after.dtype != child_df[col].dtype:
            after = after.astype(child_df[col].dtype)
        out[col] = after
    return out


def _equal_or_both_missing(a, b) -> np.ndarray:
    """Elementwise equality in which two missing values count as equal."""
    if a.dtype != b.dtype:
        a, b = a.astype(object), b.astype(object)
    a_na, b_na = np.asarray(pd.isna(a)), np.asarray(pd.isna(b))
    eq = pd.Series(a, copy=False) == pd.Series(b, copy=False)
    eq = eq.to_numpy(dtype=bool, na_value=False)
    return (eq & ~a_na & ~b_na) | (a_na & b_na)


def induced_invariants(match, swap, hold) -> list[tuple[str, ...]]:
    """The count queries the PSA keeps exactly: match x hold, and match x swap.

    Swapping moves the swapping values only among records with the same match key, so the
    multiset of (match, hold) rows and the multiset of (match, swap) values never change;
    every statistic that is a function of those two tables is invariant too.
    """
    match, swap, hold = list(match), list(swap), list(hold)
    queries = [tuple(match + [c for c in hold if c not in match]), tuple(match + [c for c in swap if c not in match])]
    return list(dict.fromkeys(queries))


# ---------------------------------------------------------------------------------------------
# the PSA on an execution engine: one unit of work per stratum, each with its own keyed stream
# ---------------------------------------------------------------------------------------------

ROW, SOURCE = "__swap_row", "__swap_source"


def stratum_sources(n: int, p, rng) -> tuple[np.ndarray, np.ndarray]:
    """The PSA inside one stratum of n records: (chosen, targets), positions in [0, n).

    Record chosen[i] receives the swapping values of record targets[i]; the same selection
    rule and uniform derangement as `swap_records`, drawn from the stratum's own stream.
    """
    chosen = selected_rows(np.zeros(n, dtype=np.int32), 1, p, rng)
    if chosen.size == 0:
        return chosen, chosen
    return chosen, chosen[uniform_derangements([chosen.size], rng)]


def swap_unit(key, rows: pd.DataFrame, rng, rate) -> pd.DataFrame:
    """One stratum as a unit of work: its rows arrive sorted by row number, so the draw is
    the same on every engine; only the swapped rows and their sources go back."""
    row = rows[ROW].to_numpy()
    chosen, targets = stratum_sources(len(row), rate, rng)
    return pd.DataFrame({ROW: row[chosen], SOURCE: row[targets]})


def swap_records_on(engine, df: pd.DataFrame, match, swap, p) -> SwapResult:
    """`swap_records` with one unit of work per stratum on `engine` (a `dpspec.engine.EngineRun`).

    Each stratum draws from a stream keyed by the run key and its match values, so the result
    is the same on every engine and partitioning. Only the match columns and a row number go
    to the engine; the swapped frame is assembled here from the (row, source) pairs.
    """
    match, swap = check_roles(df, match, swap)
    q = as_rate(p)
    table = pd.DataFrame(
        {c: df[c].to_numpy() if not isinstance(df[c].dtype, pd.CategoricalDtype) else df[c].array for c in match},
        index=pd.RangeIndex(len(df)),
    )
    table[ROW] = np.arange(len(df), dtype=np.int64)
    pairs = engine.map_groups(
        table, match, functools.partial(swap_unit, rate=q), stage="swap", schema={ROW: "int64", SOURCE: "int64"}
    )
    rows, targets = pairs[ROW].to_numpy(), pairs[SOURCE].to_numpy()
    codes, _ = stratum_codes(df, match)
    return SwapResult(
        data=_swapped_frame(df, swap, rows, targets),
        rows=rows,
        targets=targets,
        n_strata_touched=int(np.unique(codes[rows]).size),
    )
