"""The geographic spine TopDown runs on, when it is not the tabulation hierarchy itself.

Why: production did not run on the state > county > tract > block group > block tree. Each
state was split into its part inside American Indian / Alaska Native / Native Hawaiian areas and
the rest (DAS_2020_Redistricting_Production_Code, source/programs/geographic_spines/
define_spines.py:87-132: the geocode becomes state, AIAN flag, county, ...), so that the AIAN
areas are near the spine and get accurate totals. Every level from the state down is then nested
in one part; the parts are measured as state-level geounits with the state's budget; and the
state population, which policy holds invariant, is kept only on the sum of a state's two parts
(topdown_engine.py:313-329, manipulate_nodes.py:325-344 makeChildGroups), never on a part.

A split unit keeps its published code as its label: the release names the original geography,
the noisy measurements the parts (e.g. "01/AIAN", "01/non-AIAN").
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from dpspec.api import DataError, shown

AIAN, NON_AIAN = "AIAN", "non-AIAN"


def part_code(code, inside: bool) -> str:
    """The spine code of the AIAN (inside) or non-AIAN part of a unit."""
    return f"{code}/{AIAN if inside else NON_AIAN}"


def split_geography(geography: pd.DataFrame, levels: Sequence[str], split: str, flag: str) -> tuple[pd.DataFrame, dict]:
    """(geography on the spine, {level: {spine code: published code}}).

    ``geography`` has one row per distinct combination of the geography columns and ``flag``
    (1/True: the finest unit lies in an AIAN area); ``split`` is the first level split; every
    level from it down to the one above the finest is split (the finest units are whole: each
    lies on one side). A finest unit found on both sides is a DataError naming it."""
    columns = [c for c in levels if c in geography.columns]
    finest = columns[-1]
    inside = _as_flag(geography[flag], flag)
    both = pd.Series(inside).groupby(geography[finest].to_numpy(), sort=True).nunique()
    if (both > 1).any():
        code = both.index[np.flatnonzero(both.to_numpy() > 1)[0]]
        raise DataError(f"the AIAN spine needs every {finest} wholly inside or outside the AIAN areas: "
                        f"{finest} {shown(code)} has records with {flag} = 0 and {flag} = 1")
    out = geography.drop(columns=[flag]).copy()
    labels = {}
    split_at = columns.index(split)
    for col in columns[split_at:-1]:
        original = pd.Series(out[col].astype(object).to_numpy(), dtype=object)
        codes = original.astype(str) + np.where(inside, f"/{AIAN}", f"/{NON_AIAN}")  # part_code, vectorized
        pairs = pd.DataFrame({"part": codes, "code": original}).drop_duplicates("part")
        labels[col] = dict(zip(pairs["part"].tolist(), pairs["code"].tolist()))
        out[col] = codes.to_numpy(dtype=object)
    return out.drop_duplicates().reset_index(drop=True), labels


def _as_flag(values: pd.Series, flag: str) -> np.ndarray:
    """The AIAN flag as booleans: bool, or whole numbers 0 / 1; anything else a DataError."""
    v = values.to_numpy()
    if v.dtype == bool:
        return v
    try:
        num = pd.to_numeric(pd.Series(v), errors="raise").to_numpy()
    except (TypeError, ValueError):
        raise DataError(f"the AIAN flag {flag!r} must be 0 or 1 (or a boolean)") from None
    bad = ~np.isin(num, (0, 1))
    if bad.any():
        raise DataError(f"the AIAN flag {flag!r} must be 0 or 1, found {shown(num[bad][0])}")
    return num.astype(bool)


def unit_groups(level) -> tuple[np.ndarray, int]:
    """(group of every unit, number of groups): units sharing a published code (the parts of one
    split unit) form one group; an unsplit level's units are their own groups."""
    if level.labels is None:
        return np.arange(level.n_units, dtype=np.int64), level.n_units
    codes, uniques = pd.factorize(pd.Series(level.labels, dtype=object), sort=True)
    return codes.astype(np.int64), len(uniques)


def group_sum(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Rows of ``values`` (units x k) summed by group."""
    out = np.zeros((n_groups,) + values.shape[1:], dtype=values.dtype)
    np.add.at(out, groups, values)
    return out
