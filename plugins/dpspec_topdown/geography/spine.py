"""The geographic spine TopDown runs on, when it is not the tabulation hierarchy itself.

Why: production did not run on the state > county > tract > block group > block tree. Each
state was split into its part inside American Indian / Alaska Native / Native Hawaiian areas and
the rest (DAS_2020_Redistricting_Production_Code, source/programs/geographic_spines/
define_spines.py:87-132: the geocode becomes state, AIAN flag, county, ...), so that the AIAN
areas are near the spine and get accurate totals. Every level from the state down is then nested
in one part; the parts are measured as state-level geounits with the state's budget; and the
state population, which policy holds invariant, is kept only on the sum of a state's two parts
(topdown_engine.py:313-329, manipulate_nodes.py:324-344 makeChildGroups), never on a part.

A split unit keeps its published code as its label: the release names the original geography,
the noisy measurements the parts (e.g. "01/AIAN", "01/non-AIAN").
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from dpspec.api import shown, MechanismError

from ..broken import Broken

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
        raise Broken(
            f"the AIAN spine needs every {finest} wholly inside or outside the AIAN areas: "
            f"{finest} {shown(code)} has records with {flag} = 0 and {flag} = 1",
            ("spine", "aian"),
        )
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
        raise Broken(f"the AIAN flag {flag!r} must be 0 or 1 (or a boolean)", ("spine", "aian")) from None
    bad = ~np.isin(num, (0, 1))
    if bad.any():
        raise Broken(f"the AIAN flag {flag!r} must be 0 or 1, found {shown(num[bad][0])}", ("spine", "aian"))
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


# --- the optimized spine: single-child geounits bypassed ---------------------------------------
#
# Production (optimize_spine.py:275-328 bypass_geounit, 331-359 bypassing_improves_parent, with
# epsilon_delta true for the discrete Gaussian: table_reader.py:617-620) bypasses every geounit
# of county level and below that has a single child: it is measured once, with its own budget
# plus its child's, and the child gets none (it is its parent). Down a chain of single children
# the whole chain's budget ends at its top. Every person's budgets over the levels still sum to
# rho (check_total_plb, lines 407-446), so the accounting is unchanged; only which geounit
# spends which share moves. A unit's class is how deep its chain reaches: class j at level k
# spends the shares of levels k..k+j; class BYPASSED (-1) spends nothing.

BYPASSED = -1


def bypass_classes(hier, bypass: Sequence[str]) -> dict:
    """{level index: (n_units,) int64 class of each unit} for the levels a bypass touches.

    A unit of a level in ``bypass`` with exactly one child absorbs its child's chain (class =
    child's class + 1) and the child becomes BYPASSED. Levels the bypass does not touch keep
    class 0 everywhere (absent from the result)."""
    names = hier.names
    last = len(names) - 1
    depth = {last: np.zeros(hier.levels[last].n_units, dtype=np.int64)}
    for k in range(last - 1, -1, -1):
        n = hier.levels[k].n_units
        depth[k] = np.zeros(n, dtype=np.int64)
        if names[k] not in bypass:
            continue
        parent = hier.levels[k + 1].parent
        n_children = np.bincount(parent, minlength=n)
        single = np.flatnonzero(n_children == 1)
        child = np.full(n, -1, dtype=np.int64)
        child[parent] = np.arange(parent.size)  # the (only) child of a single-child unit
        depth[k][single] = depth[k + 1][child[single]] + 1  # the child's chain moves up with it
        depth[k + 1][child[single]] = BYPASSED
    return {k: d for k, d in depth.items() if (d != 0).any()}


def class_share(level_shares: Sequence, k: int, depth: int):
    """The share of rho a class-``depth`` unit of level k spends: levels k..k+depth's shares."""
    return sum(level_shares[k : k + depth + 1], type(level_shares[k])(0))


def check_budget_per_person(hier, classes: dict, level_shares: Sequence) -> None:
    """Every finest unit's ancestors spend exactly the sum of the level shares (production's
    check_total_plb): a bypass that lost or doubled a share is an internal error."""
    last = len(hier.levels) - 1
    shares = [Fraction(s) for s in level_shares]
    den = int(np.lcm.reduce([s.denominator for s in shares])) if shares else 1
    num = [int(s * den) for s in shares]
    total = np.zeros(hier.levels[last].n_units, dtype=np.int64)
    for k in range(last + 1):
        d = classes.get(k, np.zeros(hier.levels[k].n_units, dtype=np.int64))
        own = np.array([sum(num[k : k + j + 1]) for j in range(last - k + 1)], dtype=np.int64)
        spent = np.where(d >= 0, own[np.maximum(d, 0)], 0)
        total += spent[hier.ancestor(last, k)]
    if not (total == sum(num)).all():
        raise MechanismError("the optimized spine moved budget wrongly: a block's geounits do not spend rho exactly")


# --- block groups split by the group-quarters types present -----------------------------------
#
# Production's spine block groups hold blocks with the same combination of major group-quarters
# types (define_spines.py:73-85 gq_off_spine_entities: which of the 7 types the block has,
# from the unit table, which is invariant; optimize_spine.py:628-660 groups a tract's blocks by
# it). Here each block group of the spine is split by that combination, so blocks with, say, a
# prison are measured apart from the household blocks around them.


def gq_signatures(counts: pd.DataFrame, finest: str, type_col: str, types: Sequence) -> pd.Series:
    """Per finest unit with rows in the table: which of ``types`` it has, as an integer bit mask
    (bit i: types[i] present). ``counts`` is the table counted by (finest, type) as `count`."""
    by_text = {str(t): i for i, t in enumerate(types)}
    bit = counts[type_col].astype(str).map(by_text)
    keep = bit.notna().to_numpy() & (counts["count"].to_numpy() > 0)
    codes = counts[finest].astype(str).to_numpy()[keep]
    masks = np.left_shift(1, bit.to_numpy()[keep].astype(np.int64))
    return pd.Series(masks, index=codes).groupby(level=0).agg(np.bitwise_or.reduce)


def split_by_signature(
    geography: pd.DataFrame, levels: Sequence[str], signature: pd.Series, labels: dict
) -> tuple[pd.DataFrame, dict]:
    """(geography, labels) with the level above the finest split by each finest unit's
    group-quarters signature (0: none); ``labels`` (from an earlier split) are composed, so the
    parts keep the published code."""
    columns = [c for c in levels if c in geography.columns]
    finest, above = columns[-1], columns[-2]
    sig = signature.reindex(geography[finest].astype(str).to_numpy()).fillna(0).astype(np.int64).to_numpy()
    out = geography.copy()
    original = pd.Series(out[above].astype(object).to_numpy(), dtype=object)
    codes = original.astype(str) + "/gq" + pd.Series(sig).astype(str)
    earlier = labels.get(above, {})
    published = original.map(earlier) if earlier else original  # the AIAN split's published codes
    pairs = pd.DataFrame({"part": codes, "code": published}).drop_duplicates("part")
    out[above] = codes.to_numpy(dtype=object)
    return out, {**labels, above: dict(zip(pairs["part"].tolist(), pairs["code"].tolist()))}
