"""Build the bundled synthetic DHC files in specs/data/dhc/ (seeded: the same files every run).

Run from the repository root: `python scripts/make_dhc_synthetic.py`.

Why synthetic: the Census Edited File is confidential. These files have the shape the DHC
production specs need, not census figures: persons with relationship / group-quarters type
(relgq, 42 values), sex, single years of age, Hispanic origin and 63 race combinations, living in
households (a householder, perhaps a spouse or partner, children, relatives, non-relatives) or
in group-quarters facilities of 24 detailed types; housing units with tenure, household size and
vacancy; the production spine's levels (state > county > prim > tract subset group > tract
subset > block group > block, the nation implicit), an AIAN area and single-child geounits at
every level that can be bypassed. Ages respect every structural zero of the DHC persons schema
(the relgq x age sets below), so the data are valid input.

Files:
  dhc_persons.parquet     one row per person
  dhc_facilities.parquet  one row per housing unit ('hh') and per occupied GQ facility (its type)
  dhc_units.parquet       one row per housing unit (tenure or vacancy status, household size) and
                          per GQ facility (its detailed type): production's tenvacgq, and gqhh_vect
  dhc_pl94.parquet        the P.L. 94-171 release the DHC persons file must reproduce: a TopDown
                          release of the same persons under the P.L. 94 production shares (one row
                          per released person, block x hhgq x voting age x Hispanic x race)
  dhc_h1.parquet          the released H1 table: occupied / vacant housing units and GQ facilities per block
  dhc_households.parquet  one row per occupied housing unit: the householder's sex, age group, Hispanic
                          origin and race, the elderly present, the unit's tenure, and production's
                          522-value household type hhtype (hhtype_table), for the DHC
                          households spec (households_of: drawn from its own seed, so the other
                          files do not change)
  dhc_geography.csv       the synthetic state's public geography file: one row per block, every spine
                          level's code and the AIAN flag (the specs declare it public: the generator
                          defines the geography, so it is public by construction)
The Puerto Rico files (dhc_pr_*.parquet) are the same generator with another seed and state code.
`--geography` writes only the geography files, from the person files already built.
"""

from __future__ import annotations

import itertools
import os
import sys
from fractions import Fraction

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plugins"))

from dpspec_topdown.synthetic import _race_probabilities  # noqa: E402

OUT = os.path.join(ROOT, "specs", "data", "dhc")
GEO = ["state", "county", "prim", "tsg", "tsubset", "blockgroup", "block"]
AGES = np.arange(116)

# relgq: 0-17 persons in households, 18-41 the 24 detailed group-quarters types (production's
# programs/schema/attributes/relgq.py getLevels). The major type of each GQ value (hhgq_8lev).
GQ_TYPES = list(range(18, 42))
GQ_LABELS = [
    "gq101",
    "gq102",
    "gq103",
    "gq104",
    "gq105",
    "gq106",
    "gq201",
    "gq202",
    "gq203",
    "gq301",
    "gq401",
    "gq402",
    "gq403",
    "gq404",
    "gq405",
    "gq501",
    "gq601",
    "gq602",
    "gq701",
    "gq801",
    "gq802",
    "gq900",
    "gq901",
    "gq997",
]
MAJOR = {
    r: m
    for m, values in {
        1: range(18, 24),
        2: range(24, 27),
        3: [27],
        4: range(28, 33),
        5: [33],
        6: [34, 35],
        7: range(36, 42),
    }.items()
    for r in values
}
HHGQ8_LABELS = ["household", "correctional", "juvenile", "nursing", "otherinst", "college", "military", "othernoninst"]


# The structural zeros of production's DHCP constraints (programs/constraints/Constraints_DHCP.py):
# relgq value -> the ages it may not have.
def _ages(*ranges):
    return sorted(a for lo, hi in ranges for a in range(lo, hi + 1))


ZERO_AGES = {
    0: _ages((0, 14)),
    1: _ages((0, 14)),
    2: _ages((0, 14)),
    3: _ages((0, 14)),
    4: _ages((0, 14)),
    5: _ages((0, 14)),
    6: _ages((90, 115)),
    7: _ages((90, 115)),
    8: _ages((90, 115)),
    10: _ages((0, 29)),
    11: _ages((75, 115)),
    12: _ages((0, 29)),
    13: _ages((0, 14), (90, 115)),
    16: _ages((21, 115)),
    18: _ages((0, 14)),
    19: _ages((0, 14)),
    20: _ages((0, 14)),
    21: _ages((0, 14)),
    22: _ages((0, 14)),
    23: _ages((0, 16), (66, 115)),
    24: _ages((26, 115)),
    25: _ages((26, 115)),
    26: _ages((26, 115)),
    27: _ages((0, 19)),
    31: _ages((0, 16), (66, 115)),
    32: _ages((0, 2), (31, 115)),
    33: _ages((0, 15), (66, 115)),
    34: _ages((0, 16), (66, 115)),
    35: _ages((0, 16), (66, 115)),
    37: _ages((0, 15)),
    38: _ages((0, 15)),
    39: _ages((0, 15), (76, 115)),
    40: _ages((0, 15), (76, 115)),
}
# the residents' age range a facility type draws from (inside its structural-zero bounds)
GQ_AGE = {
    27: (70, 100),
    33: (18, 24),
    34: (18, 40),
    35: (18, 40),
    24: (12, 20),
    25: (12, 20),
    26: (12, 20),
    32: (5, 25),
}


def _age_weights() -> np.ndarray:
    w = np.where(AGES < 65, 1.0, np.exp(-(AGES - 65) / 9.0))
    return w / w.sum()


def _draw_ages(rng, relgq: np.ndarray, prefer: dict) -> np.ndarray:
    """Ages by relgq: an age pyramid restricted to the ages the value allows (and, for some
    values, a typical range), vectorised per relgq value."""
    base = _age_weights()
    out = np.empty(relgq.size, dtype=np.int64)
    for r in np.unique(relgq):
        idx = np.flatnonzero(relgq == r)
        w = base.copy()
        w[ZERO_AGES.get(int(r), [])] = 0.0
        if int(r) in prefer:
            lo, hi = prefer[int(r)]
            w[(AGES < lo) | (AGES > hi)] *= 0.01
        out[idx] = rng.choice(AGES, size=idx.size, p=w / w.sum())
    return out


def _geography(rng, n_blocks: int, state: str) -> pd.DataFrame:
    """Nested codes for the seven spine levels; about a third of the units at each level above the
    block have a single child (so the optimized spine bypasses some of each)."""
    parents = {"block": n_blocks}
    sizes = [n_blocks]
    for level, fanout in [("blockgroup", 3), ("tsubset", 2), ("tsg", 1.5), ("prim", 1.5), ("county", 1)]:
        sizes.append(max(1, round(sizes[-1] / fanout)))
        parents[level] = sizes[-1]
    counts = sizes[::-1]  # county .. block
    frame = pd.DataFrame({"idx0": np.arange(counts[0])})
    code = np.char.add(state, np.char.zfill((2 * np.arange(counts[0]) + 1).astype(str), 3))
    codes = [code]
    parent_of = [np.zeros(counts[0], dtype=np.int64)]
    for k in range(1, len(counts)):
        n, m = counts[k], counts[k - 1]
        # every parent gets one child, the rest go to a random half of the parents
        extra = rng.choice(np.arange(m)[rng.random(m) < 0.6] if m > 1 else np.arange(m), size=n - m) if n > m else []
        par = np.sort(np.concatenate([np.arange(m), np.asarray(extra, dtype=np.int64)]))
        rank = np.arange(n) - np.searchsorted(par, par)
        codes.append(np.char.add(codes[-1][par], np.char.zfill((rank + 1).astype(str), 2)))
        parent_of.append(par)
    del frame
    block_code = codes[-1]
    cols = {}
    idx = np.arange(len(block_code))
    for k in range(len(counts) - 1, -1, -1):
        cols[GEO[1 + k]] = codes[k][idx]
        idx = parent_of[k][idx]
    cols["state"] = np.full(len(block_code), state)
    return pd.DataFrame({g: cols[g] for g in GEO})


def generate(n_households: int, n_blocks: int, seed: int, state: str) -> dict:
    rng = np.random.default_rng(seed)
    geo = _geography(rng, n_blocks, state)
    nb = len(geo)
    weight = rng.lognormal(0.0, 1.0, nb)
    # AIAN area: the blocks of some block groups (constant within a block, cuts across levels)
    bgs = geo["blockgroup"].unique()
    aian_bgs = set(rng.choice(bgs, size=max(1, len(bgs) // 3), replace=False))
    aian = geo["blockgroup"].isin(aian_bgs).to_numpy().astype(np.int64)

    # households: size 1-7, a householder, then spouse/partner, children, relatives, non-relatives
    hh_block = np.sort(rng.choice(nb, size=n_households, p=weight / weight.sum()))
    size = 1 + rng.choice(7, size=n_households, p=[0.28, 0.34, 0.15, 0.13, 0.06, 0.025, 0.015])
    hh_id = np.repeat(np.arange(n_households), size)
    pos = np.arange(hh_id.size) - np.searchsorted(hh_id, hh_id)
    relgq = np.where(pos == 0, np.where(size[hh_id] == 1, 0, 1), 0)
    partner = rng.choice([2, 3, 4, 5], size=n_households, p=[0.8, 0.12, 0.04, 0.04])
    has_partner = rng.random(n_households) < 0.6
    others = rng.choice(
        np.arange(6, 18), size=hh_id.size, p=np.array([50, 3, 4, 3, 3, 4, 2, 1, 2, 2, 1, 4], float) / 79
    )
    relgq = np.where(pos == 0, relgq, np.where((pos == 1) & has_partner[hh_id], partner[hh_id], others))
    persons_block = hh_block[hh_id]
    tenure = rng.choice(["mortgage", "owned", "rented"], size=n_households, p=[0.4, 0.22, 0.38])

    # group quarters: some blocks hold a facility of one detailed type (a few residents each)
    gq_blocks = np.flatnonzero(rng.random(nb) < 0.12)
    gq_type = rng.choice(GQ_TYPES, size=gq_blocks.size)
    residents = 3 + rng.poisson(12, gq_blocks.size)
    gq_relgq = np.repeat(gq_type, residents)
    gq_block = np.repeat(gq_blocks, residents)

    relgq = np.concatenate([relgq, gq_relgq]).astype(np.int64)
    block_idx = np.concatenate([persons_block, gq_block])
    n = relgq.size
    age = _draw_ages(
        rng, relgq, {**GQ_AGE, 6: (0, 30), 7: (0, 30), 8: (0, 30), 16: (0, 20), 11: (0, 25), 10: (50, 95), 12: (55, 95)}
    )
    sex = rng.integers(0, 2, n)
    p_race = _race_probabilities()
    cenrace = rng.choice(len(p_race), size=n, p=p_race)
    hisp_rate = rng.beta(2.0, 9.0, nb)
    hispanic = (rng.random(n) < hisp_rate[block_idx]).astype(np.int64)
    order = np.lexsort((relgq, block_idx))
    persons = geo.iloc[block_idx[order]].reset_index(drop=True)
    persons = persons.assign(
        relgq=relgq[order],
        sex=sex[order],
        age=age[order],
        hispanic=hispanic[order],
        cenrace=cenrace[order],
        aian=aian[block_idx[order]],
    )

    # housing units: one per household, plus vacant ones; facilities: 'hh' per unit, one row per GQ
    vacant_per_block = rng.binomial(3, 0.3, nb)
    unit_block = np.concatenate([hh_block, np.repeat(np.arange(nb), vacant_per_block)])
    units = (
        geo.iloc[unit_block]
        .reset_index(drop=True)
        .assign(
            tenure=np.concatenate([tenure, np.full(vacant_per_block.sum(), "vacant")]),
            hhsize=np.concatenate([size, np.zeros(vacant_per_block.sum(), dtype=np.int64)]),
            aian=aian[unit_block],
        )
    )
    units = units.sort_values(["block", "tenure"], kind="stable").reset_index(drop=True)
    fac_block = np.concatenate([unit_block, gq_blocks])
    fac_type = np.concatenate([np.full(unit_block.size, "hh"), np.array(GQ_LABELS, dtype=object)[gq_type - 18]])
    facilities = geo.iloc[fac_block].reset_index(drop=True).assign(gqtype=fac_type)
    facilities = facilities.sort_values(["block", "gqtype"], kind="stable").reset_index(drop=True)
    return {"persons": persons, "facilities": facilities, "units": units}


# Production's household type, hhtype_dhch (522 values, programs/schema/attributes/dhch/hhtype_map.py):
# each value is one combination of seven attributes, here coded as
#   size       1-7 (7: seven or more)
#   couple     0 no spouse or partner, 1 married opposite-sex, 2 married same-sex, 3 unmarried
#              opposite-sex, 4 unmarried same-sex
#   multig     multigenerational (0/1)
#   ownchild   own children under 18: 0 none, 1 under 6 only, 2 6-17 only, 3 both
#   relatives  a relative of the householder present (0/1)
#   children   children under 18 other than the householder, spouse or partner (own or not):
#              0 none, 1 under 6 only, 2 6-17 only, 3 both
#   under18    someone under 18 present, the householder, spouse or partner included (0/1)
# The values are the combinations the rules of standalone/hhtype/hhtype.csp:120-274 allow (stated
# below as the combinations each rule forbids), numbered in that file's sort order (line 10).
HHTYPE_ATTRIBUTES = ("size", "couple", "multig", "ownchild", "relatives", "children", "under18")


def hhtype_table() -> pd.DataFrame:
    """The 522 household types: one row per hhtype_dhch value (the index), its seven attributes."""
    grid = pd.DataFrame(
        list(itertools.product(range(1, 8), range(5), range(2), range(4), range(2), range(4), range(2))),
        columns=list(HHTYPE_ATTRIBUTES),
    )
    size, couple, multig, own, rel, kids, u18 = (grid[a].to_numpy() for a in HHTYPE_ATTRIBUTES)
    paired, married, cohabiting, alone = couple > 0, np.isin(couple, [1, 2]), np.isin(couple, [3, 4]), couple == 0
    forbidden = (
        (size == 1) & paired  # csp:140, one person has no spouse or partner
        | (multig == 1) & (size < 3)  # 145
        | paired & (multig == 1) & (size < 4)  # 148-157
        | (kids > 0) & (size < 2)
        | (kids == 3) & (size < 3)  # 181, 184
        | (own > 0) & (kids == 0)  # 190: an own child is a child
        | (own == 1) & (kids == 2)
        | (own == 2) & (kids == 1)
        | (own == 3) & (kids != 3)  # 194-203
        | (kids > 0) & (u18 == 0)  # 206
        | (married | (own > 0) | (multig == 1)) & (rel == 0)  # 210, 213, 216: spouses and own children are relatives
        | paired & (kids > 0) & (size < 3)
        | paired & (kids == 3) & (size < 4)  # 219-228
        | paired & (kids == 3) & (own == 0) & (multig == 1) & (size < 5)  # 231-236
        | paired & (own == 3) & (multig == 1) & (size < 5)  # 239-243
        | alone & (u18 == 1) & (kids == 0) & (multig == 1)  # 246-250: a child householder has no adult child
        | cohabiting & (rel == 1) & (size < 3)  # 253-256: a partner is not a relative
        | alone & (own == 3) & (multig == 1) & (size < 4)  # 259-263
        | alone & (own == 0) & (kids == 3) & (multig == 1) & (size < 4)  # 266-271
        | (size == 1) & (rel == 1)  # 274
    )
    kept = grid[~forbidden]
    # hhtype.csp:10's sort order, most significant first (each flag ascending)
    order = [
        kept["couple"] == 0,
        kept["size"] > 1,
        kept["couple"] == 4,
        kept["couple"] == 3,
        kept["couple"] == 2,
        kept["couple"] == 1,
        kept["relatives"] == 0,
        kept["ownchild"] == 0,
        kept["ownchild"] == 3,
        kept["ownchild"] == 2,
        kept["ownchild"] == 1,
        kept["children"] == 0,
        kept["children"] == 3,
        kept["children"] == 2,
        kept["children"] == 1,
        kept["under18"],
        kept["multig"],
        kept["size"],
    ]
    ranked = kept.iloc[np.lexsort([np.asarray(k, dtype=np.int64) for k in order[::-1]])]
    return ranked.reset_index(drop=True).rename_axis("hhtype")


def households_of(units: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The households of the occupied units (same block, tenure and size), with householder columns
    and production's household type hhtype (hhtype_table) drawn from `seed`. Every structural zero
    production states for the DHCH households holds (Constraints_DHCH.py of das_decennial; the specs
    state them): the own-child limits by the householder's sex and age (age_child), a child living
    alone is 15-24 (living_alone_childalone), and the elderly presence the householder's age implies
    (hh_elderly), and exactly that for one person, two persons one of whom is under 18 and three with
    own children in both age ranges (living_alone, size2, size3); and a couple whose householder is
    15-24 has nobody 75 or over with them where production says so (le25_eld3)."""
    rng = np.random.default_rng(seed)
    occ = units[units["tenure"] != "vacant"].reset_index(drop=True)
    n = len(occ)
    size = occ["hhsize"].to_numpy(dtype=np.int64)
    p_race = np.array([0.6, 0.13, 0.02, 0.06, 0.01, 0.1, 0.08])
    hhage = rng.choice(9, n, p=[0.05, 0.15, 0.17, 0.17, 0.17, 0.08, 0.08, 0.08, 0.05])
    sex = rng.integers(0, 2, n)
    # the household type, drawn among the types of the unit's size that the householder's sex and
    # age allow, with weights favouring the common ones (every type has some)
    types = hhtype_table()
    t_size, t_couple, t_multig, t_own, t_rel, t_kids, t_u18 = (types[a].to_numpy() for a in HHTYPE_ATTRIBUTES)
    weight = (
        np.array([0.35, 0.45, 0.05, 0.1, 0.05])[t_couple]
        * np.where(t_multig == 1, 0.1, 1.0)
        * np.array([0.5, 0.2, 0.2, 0.1])[t_own]
        * np.where(t_kids == t_own, 1.0, 0.25)
        * np.where(t_rel == 1, 1.0, 0.4)
        * np.where((t_u18 == 1) & (t_kids == 0), 2.0, 1.0)
    )
    under6 = np.isin(t_own, [1, 3])
    hhtype = np.empty(n, dtype=np.int64)
    classes = pd.DataFrame({"size": size, "sex": sex, "hhage": hhage}).groupby(["size", "sex", "hhage"]).indices
    for (s, x, a), idx in classes.items():
        allowed = (
            (t_size == s)
            & ~((x == 0) & (a >= 7) & under6)  # age_child_1: a man 75+ has no own child under 6
            & ~((x == 1) & (a >= 7) & (t_own > 0))  # age_child_2: a woman 75+ none under 18
            & ~((x == 1) & (a >= 5) & under6)  # age_child_3: a woman 60+ none under 6
            & ~((t_u18 == 1) & (t_kids == 0) & (a > 0))
        )  # a householder or partner under 18: 15-24
        p = np.where(allowed, weight, 0.0)
        hhtype[idx] = rng.choice(len(types), size=len(idx), p=p / p.sum())
    own, u18, couple = t_own[hhtype], t_u18[hhtype], t_couple[hhtype]
    # elderly (none 60+, 60-64, 65-74, 75+ present) is at least what the householder's age implies,
    # and exactly that where nobody else may be 60 or over
    implied = np.array([0, 0, 0, 0, 0, 1, 2, 3, 3])[hhage]
    elderly = np.maximum(implied, rng.choice(4, n, p=[0.7, 0.1, 0.1, 0.1]))
    alone = (size == 1) | ((size == 2) & (u18 == 1)) | ((size == 3) & (own == 3))
    elderly[alone] = implied[alone]
    young_couple = (hhage == 0) & (couple > 0) & ((size == 2) | ((size == 3) & (own > 0)) | ((size == 4) & (own == 3)))
    elderly[young_couple & (elderly == 3)] = 0
    hisp = (rng.random(n) < 0.18).astype(np.int64)
    race = rng.choice(7, n, p=p_race)
    return occ[GEO + ["aian"]].assign(
        sex=sex,
        hhage=hhage,
        hisp=hisp,
        race=race,
        elderly=elderly,
        ten=occ["tenure"].map({"mortgage": 0, "owned": 1, "rented": 2}).to_numpy(dtype=np.int64),
        hhtype=hhtype,
    )


VACANCY = [
    "for_rent",
    "rented_not_occupied",
    "for_sale",
    "sold_not_occupied",
    "seasonal",
    "migrant_workers",
    "other_vacant",
]  # das_decennial vacs.py:15-21, the vacant levels of tenvacgq (tenvacgq.py:24-37)


def with_tenvacgq(units: pd.DataFrame, facilities: pd.DataFrame, aian: pd.Series, seed: int) -> pd.DataFrame:
    """The units with production's unit variable tenvacgq (tenvacgq.py:24-37: four tenures, seven
    vacancy statuses, 24 GQ types): the tenure of an occupied unit, a vacancy status (drawn from
    `seed`) of a vacant one, and one unit per GQ facility with its detailed type; and the
    gqhh_vect column (housing_unit, or the GQ type: tenvacgq.py:240-280), which the specs hold
    invariant per block."""
    rng = np.random.default_rng(seed)
    vacant = (units["tenure"] == "vacant").to_numpy()
    status = rng.choice(VACANCY, size=int(vacant.sum()), p=[0.25, 0.05, 0.08, 0.05, 0.3, 0.02, 0.25])
    tenvacgq = units["tenure"].to_numpy(dtype=object).copy()
    tenvacgq[vacant] = status
    housing = units.assign(tenvacgq=tenvacgq, gqhh_vect="housing_unit")
    gq = facilities[facilities["gqtype"] != "hh"]
    gq = gq[GEO].assign(
        tenure="gq",
        hhsize=0,
        aian=aian.loc[gq["block"].to_numpy()].to_numpy(),
        tenvacgq=gq["gqtype"].to_numpy(),
        gqhh_vect=gq["gqtype"].to_numpy(),
    )
    out = pd.concat([housing, gq], ignore_index=True)
    return out.sort_values("block", kind="stable").reset_index(drop=True)


def h1_of(units: pd.DataFrame) -> pd.DataFrame:
    """The released H1 table: one row per unit, occupied, vacant or gq (production's HH_STATUS 1, 2
    and 0, "NIU (or GQ)", Constraints_DHCH.py:198)."""
    status = np.where(units["tenure"] == "vacant", "vacant", np.where(units["tenure"] == "gq", "gq", "occupied"))
    return units.assign(h1=status)[GEO + ["h1"]]


def pl94_release(persons: pd.DataFrame, facilities: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The P.L. 94-171 release of these persons: TopDown at the production P.L. 94 shares over the
    same geography (hhgq x voting age x Hispanic x race, state total and facilities invariant), one
    row per released person. The DHC persons spec is held to it with `equal_to`."""
    from dpspec_topdown.params.constraints import facility_bounds_from_counts
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import Records, RunContext
    from dpspec_topdown.synthetic import PL94_QUERIES

    frame = persons.assign(
        hhgq=persons["relgq"].map(lambda r: MAJOR.get(int(r), 0)).astype(np.int64),
        votingage=(persons["age"] >= 18).astype(np.int64),
    )
    levels = ["nation"] + GEO
    shares = {lv: Fraction(1, len(levels)) for lv in levels}
    variables = {"hhgq": list(range(8)), "votingage": [0, 1], "hispanic": [0, 1], "cenrace": list(range(63))}
    strategy = {lv: list(PL94_QUERIES) for lv in levels}
    major = {**{label: MAJOR[18 + i] for i, label in enumerate(GQ_LABELS)}, "hh": 0}
    counts = (
        facilities.assign(gqtype=facilities["gqtype"].map(major))
        .groupby(["block", "gqtype"], observed=True)
        .size()
        .rename("count")
        .reset_index()
    )
    bound = {
        "name": "hhgq_total_lb_ub",
        "finest": "block",
        "type": "gqtype",
        "table": "facilities",
        "of": "hhgq",
        "occupied": list(range(1, 8)),
    }
    lower, upper = facility_bounds_from_counts(bound, counts, variables["hhgq"])
    result = run_topdown(
        Records(frame, bounds=[("hhgq_total_lb_ub", ("hhgq",), lower, upper)]),
        Design(
            levels,
            variables,
            strategy,
            Fraction(293764, 114921),
            shares,
            "hamming",
            [("state", ())],
            structural_zeros={"nurse_nva_0": {"hhgq": [3], "votingage": [0]}},
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )
    out = result.microdata
    geo = persons[GEO].drop_duplicates("block").set_index("block")
    out = out[["block", "hhgq", "votingage", "hispanic", "cenrace"]].astype({"block": str})
    out = geo.loc[out["block"]].reset_index().join(out.drop(columns="block").reset_index(drop=True))
    return pd.DataFrame(
        {
            **{g: out[g].astype(str) for g in GEO},
            "hhgq8lev": np.array(HHGQ8_LABELS, dtype=object)[out["hhgq"].astype(int)],
            "votingage": np.where(out["votingage"].astype(int) == 1, "voting", "nonvoting"),
            "hispanic": out["hispanic"].astype(np.int64),
            "cenrace": out["cenrace"].astype(np.int64),
        }
    )


def dhc_from_pl94(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """DHC person variables for a P.L. 94 person file (plugins/dpspec_topdown/synthetic.py), kept
    consistent with it: relgq within the person's hhgq major type, age within the voting-age
    class, every structural zero respected (a value the age forbids is swapped for another of
    the same major type, else the age is redrawn inside the class). Adds relgq, sex, age; the
    P.L. 94 columns stay, so both strategies run on the same persons (benchmarks/bench_topdown.py)."""
    rng = np.random.default_rng(seed)
    n = len(frame)
    hhgq = frame["hhgq"].to_numpy(dtype=np.int64)
    adult = frame["votingage"].to_numpy(dtype=np.int64) == 1
    w = _age_weights()
    p_adult, p_minor = np.where(AGES >= 18, w, 0.0), np.where(AGES < 18, w, 0.0)
    age = np.where(
        adult, rng.choice(AGES, n, p=p_adult / p_adult.sum()), rng.choice(AGES, n, p=p_minor / p_minor.sum())
    )
    candidates = {0: np.arange(18), **{m: np.array([r for r in GQ_TYPES if MAJOR[r] == m]) for m in range(1, 8)}}
    hh_mix = np.array([14, 30, 17, 3, 1, 1, 50, 3, 4, 3, 3, 4, 2, 1, 2, 2, 1, 4], float)
    relgq = np.empty(n, dtype=np.int64)
    for m, cand in candidates.items():
        idx = np.flatnonzero(hhgq == m)
        relgq[idx] = rng.choice(cand, idx.size, p=hh_mix / hh_mix.sum() if m == 0 else None)
    allowed = np.ones((42, AGES.size), dtype=bool)
    for r, ages in ZERO_AGES.items():
        allowed[r, ages] = False
    for m, cand in candidates.items():  # swap a forbidden value for an allowed one of the type
        bad = np.flatnonzero((hhgq == m) & ~allowed[relgq, age])
        if bad.size:
            ok = allowed[cand][:, age[bad]]
            fix = ok.any(axis=0)
            relgq[bad[fix]] = cand[ok.argmax(axis=0)[fix]]
    for r in range(42):  # else redraw the age inside the class and the value's allowed ages
        bad = np.flatnonzero((relgq == r) & ~allowed[relgq, age])
        for cls in (True, False):
            sel = bad[adult[bad] == cls]
            p = w * allowed[r] * ((AGES >= 18) == cls)
            if sel.size:
                age[sel] = rng.choice(AGES, sel.size, p=p / p.sum())
    return frame.assign(relgq=relgq, sex=rng.integers(0, 2, n), age=age)


def spine_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The DHC spine's levels on a county > tract > block group geography: places/MCDs (prim)
    group about three tracts of a county, tract subset groups two tracts of a prim, and the tract
    subset is the tract (codes nested by prefix)."""
    tracts = frame[["county", "tract"]].astype(str).drop_duplicates().sort_values("tract")
    rank = tracts.groupby("county").cumcount().to_numpy()
    prim = tracts["county"].to_numpy() + np.char.zfill((rank // 3).astype(str), 2).astype(object)
    tsg = prim + np.char.zfill((rank % 3 // 2).astype(str), 1).astype(object)
    lookup = pd.DataFrame({"prim": prim, "tsg": tsg}, index=tracts["tract"].to_numpy())
    got = lookup.loc[frame["tract"].astype(str).to_numpy()]
    return frame.assign(
        prim=got["prim"].to_numpy(),
        tsg=got["tsg"].to_numpy(),
        tsubset=got["tsg"].to_numpy() + frame["tract"].astype(str).to_numpy(),
    )


def write(files: dict, prefix: str) -> None:
    os.makedirs(OUT, exist_ok=True)
    for name, frame in files.items():
        frame = frame.copy()
        for g in GEO:
            if g in frame:
                frame[g] = frame[g].astype(str).astype("category")
        frame.to_parquet(os.path.join(OUT, f"{prefix}_{name}.parquet"), index=False, compression="zstd")


def write_geography(persons: pd.DataFrame, prefix: str) -> None:
    """{prefix}_geography.csv: every block with its levels' codes and AIAN flag, sorted by code
    (every block the generator made holds persons, so the releases keep their units)."""
    geo = persons[GEO + ["aian"]].astype(str).drop_duplicates().sort_values(GEO)
    if geo["block"].duplicated().any():
        raise SystemExit(f"{prefix}: a block lies on both sides of the AIAN area or in two block groups")
    geo.to_csv(os.path.join(OUT, f"{prefix}_geography.csv"), index=False)


def main() -> None:
    if "--geography" in sys.argv[1:]:
        for prefix in ("dhc", "dhc_pr"):
            write_geography(pd.read_parquet(os.path.join(OUT, f"{prefix}_persons.parquet")), prefix)
        return
    for prefix, households, blocks, seed, state in (("dhc", 240, 22, 2020, "01"), ("dhc_pr", 130, 12, 2072, "72")):
        files = generate(households, blocks, seed, state)
        files["pl94"] = pl94_release(files["persons"], files["facilities"], seed + 1)
        files["households"] = households_of(files["units"], seed + 2)
        aian = files["persons"].drop_duplicates("block").set_index("block")["aian"]
        files["units"] = with_tenvacgq(files["units"], files["facilities"], aian, seed + 3)
        files["h1"] = h1_of(files["units"])
        write(files, prefix)
        write_geography(files["persons"], prefix)
        p = files["persons"]
        gq_units = int((files["units"]["tenure"] == "gq").sum())
        print(
            f"{prefix}: {len(p)} persons, {p['block'].nunique()} blocks, {len(files['units']) - gq_units} housing units "
            f"and {gq_units} GQ units, "
            f"{int((p['relgq'] >= 18).sum())} in group quarters, {p.loc[p['aian'] == 1, 'block'].nunique()} AIAN blocks"
        )


if __name__ == "__main__":
    main()
