"""Characteristic iterations: which population groups a record falls into, and the fan-out.

A record carries up to `max_race_codes` detailed race codes and one ethnicity code. The
mapping table (codes -> iterations, bundled as data) gives every code its iterations; each
iteration has a kind (race or ethnicity), a level (0 = the major groups, not tabulated; 1, 2),
an "alone" flag (race only: alone iterations count a record only if every one of its codes
maps there; "alone or in combination" ones if any does) and two flags restricting where it is
tabulated: detailed-only iterations only at detailed geographies, coarse-only ones only at
coarse geographies.

The fan-out of one (level, granularity) selection is what production bounds as
h_r * max(2, r) + h_e, with h_r (h_e) the largest number of selected race (ethnicity)
iterations a single code maps to and r the maximum number of race codes per record; it is the
number of group cells one record can change, hence the L2 sensitivity squared of the group
counts. Flattening is vectorized: one merge per kind, no per-record Python loop.
"""

from __future__ import annotations

import os

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, require_regular

from .combinations import Origin, rows_text, text_codes

GRANULARITIES = ("detailed", "coarse")
_LOADED: dict = {}  # (path, mtime, size) of each file -> its IterationTable: a sweep reads it once, not per run


def _file_key(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None  # reported by the read itself
    return (os.path.abspath(path), st.st_mtime_ns, st.st_size, st.st_ino)


@attrs.frozen
class IterationTable:
    """The bundled code table, iteration table and code -> iteration mapping (read-only once built)."""

    codes: pd.Index  # every known race/ethnicity code (str)
    iterations: pd.DataFrame  # iteration, name, kind, level, alone, detailed_only, coarse_only
    mapping: pd.DataFrame  # code, iteration
    bounds: dict = attrs.field(factory=dict, eq=False, repr=False)  # fanout_bound's answers, computed once

    @classmethod
    def load(cls, base_dir: str, paths: dict) -> "IterationTable":
        """The tables at `paths`; the same files unchanged (path, modification time, size, inode)
        give the same table without reading them again (the budget, the expected error and every
        run of a sweep ask for it)."""
        full = {key: rel if os.path.isabs(rel) else os.path.join(base_dir, rel) for key, rel in paths.items()}
        key = tuple((k, _file_key(p)) for k, p in sorted(full.items()))
        cached = _LOADED.get(key) if all(fk is not None for _, fk in key) else None
        if cached is not None:
            return cached
        frames = {}
        for key_name, path in full.items():
            try:
                require_regular(path)  # never a device such as /dev/zero
                frames[key_name] = (
                    pd.read_parquet(path)
                    if path.endswith(".parquet")
                    else pd.read_csv(path, dtype=str, keep_default_na=False)
                )
            except FileNotFoundError:
                raise DataError(f"{path}: the {key_name} table does not exist") from None
            except (OSError, ValueError) as exc:
                raise DataError(f"{path}: cannot read the {key_name} table: {exc}") from None
            frames[key_name + "_path"] = path
        table = cls.build(frames["codes"], frames["iterations"], frames["mapping"], frames)
        if all(fk is not None for _, fk in key):
            if len(_LOADED) >= 8:
                _LOADED.clear()
            _LOADED[key] = table
        return table

    @classmethod
    def build(
        cls, codes: pd.DataFrame, iterations: pd.DataFrame, mapping: pd.DataFrame, where: dict | None = None
    ) -> "IterationTable":
        where = where or {}
        its = iterations.copy()
        its["iteration"] = its["iteration"].astype(str)
        for flag in ("alone", "detailed_only", "coarse_only"):
            its[flag] = its[flag].astype("boolean").fillna(False).astype(bool)
        its["level"] = its["level"].astype(int)
        code_index = pd.Index(codes["code"].astype(str).unique())
        mp = pd.DataFrame({"code": mapping["code"].astype(str), "iteration": mapping["iteration"].astype(str)})
        bad_code = ~mp["code"].isin(code_index)
        bad_it = ~mp["iteration"].isin(its["iteration"])
        for mask, what, table in ((bad_code, "code", "codes"), (bad_it, "iteration", "iterations")):
            if mask.any():
                rows = np.flatnonzero(mask.to_numpy())
                first = rows[0]
                raise DataError(
                    f"{where.get('mapping_path', 'code -> iteration mapping')}: row {first + 1}: the {what} "
                    f"'{mp.iloc[first][what]}' is not in the {table} table"
                    + (f" ({len(rows)} rows in all)" if len(rows) > 1 else "")
                )
        both = its["detailed_only"] & its["coarse_only"]
        if both.any():
            first = int(np.flatnonzero(both.to_numpy())[0])
            raise DataError(
                f"{where.get('iterations_path', 'iterations')}: row {first + 1}: iteration "
                f"'{its.iloc[first]['iteration']}' is both detailed-only and coarse-only"
            )
        return cls(code_index, its.reset_index(drop=True), mp.drop_duplicates().reset_index(drop=True))

    def selection(self, level: int, granularity: str) -> pd.DataFrame:
        """Iterations tabulated at this iteration level and geography granularity."""
        its = self.iterations
        excluded = its["coarse_only"] if granularity == "detailed" else its["detailed_only"]
        return its[(its["level"] == level) & ~excluded].reset_index(drop=True)

    def fanout_bound(self, level: int, granularity: str, max_race_codes: int) -> dict:
        """h_r, h_e and the production bound h_r * max(2, r) + h_e for one selection."""
        memo = (level, granularity, max_race_codes)
        if memo not in self.bounds:
            self.bounds[memo] = self._fanout_bound(level, granularity, max_race_codes)
        return dict(self.bounds[memo])

    def _fanout_bound(self, level: int, granularity: str, max_race_codes: int) -> dict:
        sel = self.selection(level, granularity)
        m = self.mapping.merge(sel[["iteration", "kind", "alone"]], on="iteration")

        def h(mask) -> int:
            return int(m[mask]["code"].value_counts().max()) if mask.any() else 0

        race = m["kind"] == "race"
        # alone and alone-or-in-combination iterations form the same hierarchy (production's
        # assumption); the larger depth of the two is used, so a mapping breaking it stays safe
        h_r = max(h(race & m["alone"]), h(race & ~m["alone"]))
        h_e = h(m["kind"] == "ethnicity")
        return {
            "h_race": h_r,
            "h_ethnicity": h_e,
            "max_race_codes": max_race_codes,
            "fanout": h_r * max(2, max_race_codes) + h_e,
        }


@attrs.frozen
class RecordCodes:
    """The records' codes as integers: race (row, code) pairs and one ethnicity code per row.

    A row is one record or, from `combinations`, a distinct combination standing for
    `origin.weight` records; `origin` also says how to name a bad row in a message."""

    n: int
    race_rows: np.ndarray
    race_codes: np.ndarray  # positions in IterationTable.codes
    n_race: np.ndarray  # race codes per record
    eth_codes: np.ndarray
    origin: Origin | None = None
    table: IterationTable | None = None  # for naming a record's codes in a message


def encode_records(
    frame: pd.DataFrame,
    race_columns,
    eth_column: str,
    table: IterationTable,
    max_race_codes: int,
    source: str = "data",
    origin: Origin | None = None,
) -> RecordCodes:
    """Check and encode the records' codes; unknown codes and too many codes are DataErrors.

    origin: what the rows stand for (default: each row one record, numbered as it stands)."""
    n = len(frame)
    origin = origin if origin is not None else Origin.records(n)
    rows_list, codes_list = [], []
    for col in race_columns:
        found, labels = text_codes(frame[col])
        present = found >= 0
        if not present.any():
            continue
        rows = np.flatnonzero(present)
        idx = table.codes.get_indexer(labels)[found[rows]]
        _unknown(idx, rows, labels, found[rows], col, source, origin)
        rows_list.append(rows)
        codes_list.append(idx)
    race_rows = np.concatenate(rows_list) if rows_list else np.zeros(0, dtype=np.int64)
    race_codes = np.concatenate(codes_list) if codes_list else np.zeros(0, dtype=np.int64)
    # the same code twice in one record counts once
    key, _ = sorted_unique(race_rows.astype(np.int64) * (len(table.codes) + 1) + race_codes)
    race_rows, race_codes = key // (len(table.codes) + 1), key % (len(table.codes) + 1)
    n_race = np.bincount(race_rows, minlength=n)
    if n and n_race.min() == 0:
        none = n_race == 0
        row = int(np.flatnonzero(none)[0])
        where = f"row {origin.row(row)}: the record has" if origin.numbered else f"{rows_text(origin.count(none))} have"
        raise DataError(f"{source}: {where} no race code (columns {', '.join(race_columns)})")
    if n and n_race.max() > max_race_codes:
        over = n_race > max_race_codes
        row = int(np.flatnonzero(over)[0])
        if origin.numbered:
            raise DataError(
                f"{source}: row {origin.row(row)}: the record has {n_race[row]} race codes, more than "
                f"max_race_codes = {max_race_codes}"
            )
        shown = ", ".join(f"'{c}'" for c in table.codes[race_codes[race_rows == row]])
        raise DataError(
            f"{source}: {rows_text(origin.count(over))} have more race codes than max_race_codes = "
            f"{max_race_codes}, such as the {n_race[row]} codes {shown} ({rows_text(int(origin.weight[row]))})"
        )
    found, labels = text_codes(frame[eth_column])
    if (found < 0).any():
        missing = found < 0
        row = int(np.flatnonzero(missing)[0])
        where = f"row {origin.row(row)}: " if origin.numbered else ""
        many = "" if origin.numbered else f" in {rows_text(origin.count(missing))}"
        raise DataError(f"{source}: {where}column '{eth_column}' has no ethnicity code{many}")
    eth_idx = table.codes.get_indexer(labels)[found]
    _unknown(eth_idx, np.arange(n), labels, found, eth_column, source, origin)
    return RecordCodes(n, race_rows, race_codes, n_race, eth_idx, origin, table)


def sorted_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct int64 keys and their multiplicities, by one sort (faster than np.unique's
    hashing on tens of millions of keys)."""
    keys = np.sort(keys, kind="stable")
    if not keys.size:
        return keys, np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.diff(np.r_[first, keys.size])


def _unknown(idx, rows, labels, found, column, source, origin: Origin):
    """A DataError for the first code not in the code table: rows' codes are labels[found]."""
    bad = idx < 0
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        total = origin.count(rows[bad])
        value = labels[found[first]]
        if origin.numbered:
            raise DataError(
                f"{source}: row {origin.row(rows[first])}: column '{column}' holds the code '{value}', "
                f"which is not in the code table ({total} such values in all)"
            )
        same = rows[found == found[first]]
        raise DataError(
            f"{source}: column '{column}' holds the code '{value}' in {rows_text(origin.count(same))}, "
            f"which is not in the code table ({total} such values in all)"
        )


def flatten(
    records: RecordCodes, table: IterationTable, selection: pd.DataFrame, max_groups: int, source: str = "data"
) -> tuple[np.ndarray, np.ndarray]:
    """(row, iteration position in `selection`) for every group a record falls into.

    Alone iterations need every race code of the record; alone-or-in-combination ones any;
    ethnicity iterations come from the ethnicity code. A record in more than `max_groups`
    groups is a DataError: the declared fan-out would understate the sensitivity."""
    sel_index = pd.Index(selection["iteration"])
    m = table.mapping
    pos = sel_index.get_indexer(m["iteration"])
    keep = pos >= 0
    code_pos = table.codes.get_indexer(m["code"][keep])
    it_pos = pos[keep]
    kinds = selection["kind"].to_numpy()[it_pos]
    alone = selection["alone"].to_numpy()[it_pos]
    out_rows, out_its = [], []

    def pairs(codes_of_rows, rows, mask):
        """Join (row, code) with the code -> iteration pairs under `mask` (sparse, vectorized)."""
        c = code_pos[mask]
        it = it_pos[mask]
        order = np.argsort(c, kind="stable")
        c, it = c[order], it[order]
        start = np.searchsorted(c, codes_of_rows, side="left")
        stop = np.searchsorted(c, codes_of_rows, side="right")
        counts = stop - start
        rep_rows = np.repeat(rows, counts)
        offsets = np.repeat(start - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        return rep_rows, it[offsets]

    n_sel = len(selection)
    # alone: a (row, iteration) pair that every one of the record's codes reaches
    r, i = pairs(records.race_codes, records.race_rows, (kinds == "race") & alone)
    if r.size:
        key = r.astype(np.int64) * n_sel + i
        uniq, hits = sorted_unique(key)
        full = hits == records.n_race[uniq // n_sel]
        out_rows.append(uniq[full] // n_sel)
        out_its.append(uniq[full] % n_sel)
    r, i = pairs(records.race_codes, records.race_rows, (kinds == "race") & ~alone)
    if r.size:
        uniq, _ = sorted_unique(r.astype(np.int64) * n_sel + i)
        out_rows.append(uniq // n_sel)
        out_its.append(uniq % n_sel)
    r, i = pairs(records.eth_codes, np.arange(records.n), kinds == "ethnicity")
    if r.size:
        out_rows.append(r)
        out_its.append(i)
    rows = np.concatenate(out_rows) if out_rows else np.zeros(0, dtype=np.int64)
    its = np.concatenate(out_its) if out_its else np.zeros(0, dtype=np.int64)
    per_record = np.bincount(rows, minlength=records.n)
    if records.n and per_record.max() > max_groups:
        _beyond_fanout(records, per_record, max_groups, source)
    return rows.astype(np.int64), its.astype(np.int64)


def _beyond_fanout(records: RecordCodes, per_record: np.ndarray, max_groups: int, source: str):
    """The DataError for records in more groups than the declared fan-out: the first one's row,
    or (rows without numbers) how many rows and the codes of the first such combination."""
    over = per_record > max_groups
    row = int(np.argmax(over))
    origin = records.origin if records.origin is not None else Origin.records(records.n)
    if origin.numbered:
        raise DataError(
            f"{source}: row {origin.row(row)}: the record falls into {per_record[row]} population groups, "
            f"more than the declared maximum fan-out {max_groups}"
        )
    codes = records.table.codes
    race = ", ".join(f"'{c}'" for c in codes[records.race_codes[records.race_rows == row]])
    raise DataError(
        f"{source}: {rows_text(origin.count(over))} fall into more population groups than the declared "
        f"maximum fan-out {max_groups}, such as {per_record[row]} for race codes {race} and ethnicity "
        f"code '{codes[records.eth_codes[row]]}' ({rows_text(int(origin.weight[row]))})"
    )
