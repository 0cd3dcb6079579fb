"""The S-DHC tables counted from person and unit records, vectorized: the join by household,
the truncation to tau persons per household, the cell and iteration of every record, and the
counts with exact discrete Gaussian noise keyed per cell (so a count's noise depends on the run
key and the cell only, on any engine and in any order)."""

from __future__ import annotations


import numpy as np
import pandas as pd

from dpspec.api import (
    DataError,
    KeyColumns,
    keyed_discrete_gaussian,
    record_measurement,
    shown,
    discrete_gaussian_variance,
)

from .design import PERSON_COLUMNS, TABLES, UNIT_COLUMNS, Design

NOISE_STREAM = "phsafe cell noise"  # first part of every cell's stream key
ITERATION_CODES = {"A-G": ("A", "B", "C", "D", "E", "F", "G"), "H,I": ("H", "I"), "*": ("*",)}
# the released cells of each table (production's *_DATA_CELL codes, constants.py)
CELLS = {
    "PH1_num": (2, 3),
    "PH1_denom": (1,),
    "PH2": (3, 4, 6, 7, 9, 10, 12, 13),
    "PH3": (2, 4, 5, 6, 7, 9, 10),
    "PH4": (2, 3),
    "PH5_denom": (1,),
    "PH6": (3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 18, 19, 20, 21),
    "PH7": (2, 3, 4),
    "PH8_denom": (2, 3),
}
# the tables derived from a measured one (`_postprocessed`, no budget) and their cells
POSTPROCESSED = {"PH4": {"PH5_num": (2, 3)}, "PH7": {"PH8_num": (2, 3)}}
FAMILY_RELATIONSHIPS = (20, 21, 23, 25, 26, 27, 28, 29, 30, 31, 32, 33)  # PH4's universe
OWN_CHILD = (25, 26, 27)  # biological, adopted, stepchild
# HHT2 of a family with own children -> the first cell of its block in PH3 and PH6
OWN_CHILD_FAMILY_PH3 = {1: 4, 3: 5, 10: 6, 6: 7}
OWN_CHILD_FAMILY_PH6 = {1: 3, 3: 8, 10: 13, 6: 18}


def _isin(values: np.ndarray, allowed) -> np.ndarray:
    return np.isin(values, np.asarray(allowed, dtype=values.dtype))


def _lookup(values: np.ndarray, table: dict) -> np.ndarray:
    """table[value] elementwise, -1 where the value has no entry."""
    out = np.full(values.shape, -1, dtype=np.int64)
    for k, v in table.items():
        out[values == k] = v
    return out


def _as_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """Every code column as int64 and the state as text: the loader gives a column declared as
    an enum (RTYPE : {2, 4}) as a categorical of its values' text."""
    out = {}
    for name in frame.columns:
        col = frame[name]
        if name == "state":
            out[name] = col.astype(str).to_numpy(dtype=object)
        elif isinstance(col.dtype, pd.CategoricalDtype) or col.dtype == object:
            out[name] = pd.to_numeric(col.astype(str)).to_numpy(dtype=np.int64)
        else:
            out[name] = col.to_numpy(dtype=np.int64)
    return pd.DataFrame(out, index=frame.index)


class Records:
    """The person records joined to their household's unit record (inner join on MAFID, units
    with a repeated MAFID dropped as production's DropNonUnique does), sorted so that the persons
    of a household are adjacent in a fixed order (a hash of the record), and the unit records."""

    def __init__(self, persons: pd.DataFrame, units: pd.DataFrame, states: tuple, source: str):
        """states: the declared states (`cells.released_states`), never read from the units."""
        self.source = source
        units = _as_codes(units[list(UNIT_COLUMNS)])
        units = units[units["state"].isin(states)]  # production's state_filter
        units = units[~units["MAFID"].duplicated(keep=False)]
        self.states = tuple(states)
        # each unit's state as an index into self.states, once; persons carry it through the join
        units = units.assign(region=pd.Categorical(units["state"], categories=self.states).codes.astype(np.int64))
        self.units = {c: units[c].to_numpy() for c in units.columns}
        persons = _as_codes(persons[list(PERSON_COLUMNS)])
        joined = persons.merge(units.drop(columns="state"), on="MAFID", how="inner", suffixes=("", "_UNIT"))
        order = pd.util.hash_pandas_object(joined[list(PERSON_COLUMNS)], index=False).to_numpy()
        joined = joined.iloc[np.lexsort((order, joined["MAFID"].to_numpy()))]
        self.persons = {c: joined[c].to_numpy() for c in joined.columns}

    def cap(self, mask: np.ndarray, tau: int) -> np.ndarray:
        """`mask` with every household past its first tau selected persons dropped."""
        idx = np.flatnonzero(mask)
        if not idx.size:
            return mask
        mafid = self.persons["MAFID"][idx]
        pos = np.arange(idx.size)
        starts = np.r_[True, mafid[1:] != mafid[:-1]]
        rank = pos - np.maximum.accumulate(np.where(starts, pos, 0))
        out = np.zeros_like(mask)
        out[idx[rank < tau]] = True
        return out


def table_records(name: str, rec: Records, tau: int | None) -> tuple[dict, np.ndarray, np.ndarray, str, str]:
    """(the columns, the rows in the table's universe, each row's data cell, race column,
    ethnicity column) of one table. A row in the universe that maps to no cell is a data error,
    as in production."""
    if TABLES[name][0] == "units":
        u = rec.units
        occupied = (u["RTYPE"] == 2) & (u["HHT"] != 0)
        if name == "PH5_denom":
            mask, cell = _isin(u["HHT"], (1, 2, 3)), np.ones(len(u["HHT"]), dtype=np.int64)
        elif name == "PH1_denom":
            mask, cell = occupied, np.ones(len(u["HHT"]), dtype=np.int64)
        else:  # PH8_denom: owner (2) or renter (3) occupied
            mask, cell = occupied, _lookup(u["TEN"], {1: 2, 2: 2, 3: 3, 4: 3})
        return u, mask, cell, "HHRACE", "HHSPAN"
    p = rec.persons
    in_hu = p["RTYPE"] == 3
    child = p["QAGE"] < 18
    race, eth = "HHRACE", "HHSPAN"
    if name == "PH1_num":
        mask, cell = in_hu, np.where(child, 2, 3)
    elif name == "PH2":
        hht2, cplt = p["HHT2"], p["CPLT"]
        cell = np.select(
            [
                _isin(hht2, (1, 2)) & (cplt == 1),
                _isin(hht2, (1, 2)) & (cplt == 2),
                _isin(hht2, (3, 4)) & (cplt == 3),
                _isin(hht2, (3, 4)) & (cplt == 4),
                hht2 == 9,
                _isin(hht2, (10, 11, 12)),
                hht2 == 5,
                _isin(hht2, (6, 7, 8)),
            ],
            [3, 4, 6, 7, 9, 10, 12, 13],
            -1,
        )
        mask = in_hu
    elif name == "PH3":
        rel = p["RELSHIP"]
        own = _lookup(p["HHT2"], OWN_CHILD_FAMILY_PH3)
        cell = np.select(
            [
                _isin(rel, (20, 21, 22, 23, 24, 34, 35, 36)),
                _isin(rel, OWN_CHILD) & (own > 0),
                rel == 30,
                _isin(rel, (28, 29, 31, 32, 33)),
            ],
            [2, own, 9, 10],
            -1,
        )
        mask, race, eth = in_hu & child, "CENRACE", "CENHISP"
    elif name == "PH4":
        mask, cell = _isin(p["RELSHIP"], FAMILY_RELATIONSHIPS) & _isin(p["HHT"], (0, 1, 2, 3)), np.where(child, 2, 3)
    elif name == "PH6":
        base = _lookup(p["HHT2"], OWN_CHILD_FAMILY_PH6)
        age = np.digitize(p["QAGE"], (4, 6, 12))
        cell = np.where(base > 0, base + age, -1)
        mask = child & _isin(p["RELSHIP"], OWN_CHILD)
    elif name == "PH7":
        mask, cell = in_hu, _lookup(p["TEN"], {1: 2, 2: 3, 3: 4, 4: 4})
    else:
        raise AssertionError(name)
    bad = mask & (cell < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = ", ".join(f"{c} {shown(p[c][i])}" for c in ("MAFID", "RELSHIP", "QAGE", "HHT2", "CPLT", "TEN"))
        raise DataError(
            f"{rec.source}: {int(bad.sum())} person record(s) of {name}'s universe fit none of its "
            f"cells (the person's relationship and age disagree with the household's type or tenure); "
            f"the first: {what}"
        )
    return p, rec.cap(mask, tau), cell, race, eth


def iterations(level: str, race: np.ndarray, eth: np.ndarray) -> np.ndarray:
    """Each record's iteration code index at `level`, -1 when it has none (H,I)."""
    if level == "A-G":
        return np.where(race >= 7, 6, race - 1).astype(np.int64)
    if level == "H,I":
        return np.select([eth == 2, (race == 1) & (eth == 1)], [0, 1], -1).astype(np.int64)
    return np.zeros(race.shape, dtype=np.int64)


def truths(design: Design, rec: Records):
    """(measurement, true counts over its full grid, region ids, iteration codes, cells) for
    every measured (table, geography, iteration level); grid index (region * codes + code) *
    cells + cell. Each table's records are mapped once."""
    tables: dict = {}
    levels: dict = {}
    for m in design.measured():
        cells = np.asarray(CELLS[m.table])
        if m.table not in tables:
            cols, mask, cell, race, eth = table_records(m.table, rec, design.tau.get(m.table))
            mask = mask & (cols["region"] >= 0)
            index = np.zeros(cell.shape, dtype=np.int64)
            index[mask] = np.searchsorted(cells, cell[mask])
            tables[m.table] = (cols, mask, index, race, eth)
        cols, mask, index, race, eth = tables[m.table]
        if (m.table, m.level) not in levels:  # shared by the nation and the states
            it = iterations(m.level, cols[race], cols[eth])
            keep = mask & (it >= 0)
            levels[(m.table, m.level)] = (it[keep] * len(cells) + index[keep], cols["region"][keep])
        code_cell, region = levels[(m.table, m.level)]
        codes = ITERATION_CODES[m.level]
        region_ids = ["US"] if m.geography == "usa" else list(rec.states)
        flat = code_cell if m.geography == "usa" else region * (len(codes) * len(cells)) + code_cell
        truth = np.bincount(flat, minlength=len(region_ids) * len(codes) * len(cells)).astype(np.int64)
        yield m, truth, region_ids, codes, cells


def measure(design: Design, rec: Records, run_key: int) -> pd.DataFrame:
    """Every measured (table, geography, iteration level): the full grid of cells with their
    noisy counts. Long form: table, region_type, region_id, iteration_code, data_cell, count,
    noise_variance (the discrete Gaussian's exact variance at sigma^2 = D^2 / (2 rho))."""

    frames = []
    for m, truth, region_ids, codes, cells in truths(design, rec):
        grid = np.arange(truth.size)
        region, code, cell = grid // (len(codes) * len(cells)), grid // len(cells) % len(codes), grid % len(cells)
        sigma2 = design.sigma2(m)
        keys = KeyColumns(
            (NOISE_STREAM, m.table, m.geography, m.level),
            (
                pd.Categorical.from_codes(region, categories=region_ids),
                pd.Categorical.from_codes(code, categories=list(codes)),
                pd.Categorical.from_codes(cell, categories=[str(c) for c in cells]),
            ),
        )
        record_measurement(
            f"{m.table}/{m.geography}/{m.level}",
            truth,
            "discrete_gaussian",
            sigma2,
            sensitivity=design.sensitivity(m.table),
            keys=lambda: (np.asarray(region_ids)[region], code, cell),
        )
        noisy = truth + keyed_discrete_gaussian(sigma2, run_key, keys, 1)
        frames.append(
            pd.DataFrame(
                {
                    "table": m.table,
                    "region_type": m.geography.upper(),
                    "region_id": np.asarray(region_ids, dtype=object)[region],
                    "iteration_code": np.asarray(codes, dtype=object)[code],
                    "data_cell": cells[cell],
                    "count": noisy,
                    "noise_variance": float(discrete_gaussian_variance(sigma2)),
                }
            )
        )
    out = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(
            columns=["table", "region_type", "region_id", "iteration_code", "data_cell", "count", "noise_variance"]
        )
    )
    return pd.concat([out, *_postprocessed(out)], ignore_index=True)


def _postprocessed(out: pd.DataFrame) -> list[pd.DataFrame]:
    """PH5_num is PH4, PH8_num is PH7 by owner (2: cells 2 + 3) and renter (3: cell 4): no budget."""
    parts = []
    ph4 = out[out["table"] == "PH4"]
    if len(ph4):
        parts.append(ph4.assign(table="PH5_num"))
    ph7 = out[out["table"] == "PH7"]
    if len(ph7):
        keys = ["region_type", "region_id", "iteration_code", "data_cell"]
        ph8 = ph7.assign(data_cell=np.where(ph7["data_cell"] == 4, 3, 2))
        ph8 = ph8.groupby(keys, sort=False, as_index=False).agg(
            count=("count", "sum"), noise_variance=("noise_variance", "sum")
        )
        parts.append(ph8.assign(table="PH8_num")[out.columns])
    return parts


def measure_exact(design: Design, rec: Records) -> pd.DataFrame:
    """The true counts of every measured table (only the nonzero cells): for tests and the
    benchmark's floor, never released."""
    rows = []
    for m in design.measured():
        cols, mask, cell, race, eth = table_records(m.table, rec, design.tau.get(m.table))
        it = iterations(m.level, cols[race].astype(np.int64), cols[eth].astype(np.int64))
        keep = mask & (it >= 0)
        frame = pd.DataFrame(
            {
                "region_id": "US" if m.geography == "usa" else np.asarray(rec.states)[cols["region"][keep]],
                "iteration_code": np.asarray(ITERATION_CODES[m.level])[it[keep]],
                "data_cell": cell[keep],
            }
        )
        counts = frame.groupby(["region_id", "iteration_code", "data_cell"]).size().rename("count").reset_index()
        rows.append(counts.assign(table=m.table, region_type=m.geography.upper()))
    return pd.concat(rows, ignore_index=True)
