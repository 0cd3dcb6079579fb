"""A synthetic, state-sized person file with the P.L. 94-171 histogram variables.

Why synthetic: real block-level census microdata is confidential, yet TopDown's cost depends on
the shape of real data (heavily skewed block sizes, group quarters concentrated in a few
blocks, race mixes that vary between neighbourhoods, a detailed histogram that is mostly
zeros). This generator reproduces those features at any scale so the engine can be tested and
benchmarked; none of its numbers are census figures.

Geography: nation (implicit) > state > county > tract > block group > block, with full
geocodes (a block code contains its block group's, and so on), so codes are unique per level.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
import pandas as pd

LEVELS = ["state", "county", "tract", "blockgroup", "block"]

# P.L. 94 histogram: hhgq (0 household, 1-7 group quarters types), voting age, Hispanic origin,
# and the 63 combinations of six major race groups: 8 x 2 x 2 x 63 = 2,016 cells.
RACES = ("white", "black", "aian", "asian", "nhpi", "sor")
CENRACE = tuple("+".join(c) for r in range(1, 7) for c in combinations(RACES, r))
PL94_VARIABLES = {
    "hhgq": list(range(8)),
    "votingage": [0, 1],
    "hispanic": [0, 1],
    "cenrace": list(range(len(CENRACE))),
}

# A P.L. 94-like strategy (query names follow production; the shares are illustrative).
PL94_QUERIES = [
    ((), Fraction(1, 10)),
    (("cenrace",), Fraction(1, 10)),
    (("hispanic",), Fraction(1, 20)),
    (("votingage",), Fraction(1, 20)),
    (("hhgq",), Fraction(1, 10)),
    (("hispanic", "cenrace"), Fraction(1, 10)),
    (("votingage", "cenrace"), Fraction(1, 10)),
    (("votingage", "hispanic"), Fraction(1, 20)),
    (("votingage", "hispanic", "cenrace"), Fraction(1, 4)),
    (("hhgq", "votingage", "hispanic", "cenrace"), Fraction(1, 10)),
]

# Production P.L. 94-171 person-file level shares (Census Bureau, 2021).
PRODUCTION_LEVEL_SHARES = {
    "nation": Fraction(104, 4099),
    "state": Fraction(1440, 4099),
    "county": Fraction(447, 4099),
    "tract": Fraction(687, 4099),
    "blockgroup": Fraction(1256, 4099),
    "block": Fraction(165, 4099),
}
PRODUCTION_RHO = Fraction(542, 339) ** 2

_SINGLE_RACE_MIX = np.array([0.60, 0.12, 0.01, 0.06, 0.002, 0.08])
_GQ_TYPE_MIX = np.array([0.22, 0.02, 0.25, 0.03, 0.30, 0.03, 0.15])  # types 1..7


def pl94_strategy(levels=("nation",) + tuple(LEVELS)) -> dict:
    """The same query list and shares at every level."""
    return {lv: list(PL94_QUERIES) for lv in levels}


def _race_probabilities() -> np.ndarray:
    """Base probabilities of the 63 cenrace categories: singles dominate, combinations decay."""
    p = np.zeros(len(CENRACE))
    for i, name in enumerate(CENRACE):
        parts = name.split("+")
        if len(parts) == 1:
            p[i] = _SINGLE_RACE_MIX[RACES.index(parts[0])]
        else:
            weight = np.prod([_SINGLE_RACE_MIX[RACES.index(r)] for r in parts]) ** 0.5
            p[i] = weight * 0.4 ** (len(parts) - 2)
    singles = p[:6].sum()
    p[6:] *= (1.0 - singles) / p[6:].sum()
    return p / p.sum()


def generate_population(
    n_persons: int = 1_000_000, n_blocks: int = 25_000, seed: int = 0, state: str = "01"
) -> pd.DataFrame:
    """Person records with block-level geography and the P.L. 94 variables (see module doc)."""
    rng = np.random.default_rng(seed)
    blocks_per_bg = 30
    n_bg = max(1, n_blocks // blocks_per_bg)
    n_tract = max(1, n_bg // 3)
    n_county = max(1, n_tract // 16)
    # skewed sizes at every level: lognormal weights, nested
    county_of_tract = np.sort(rng.integers(0, n_county, n_tract))
    county_of_tract[:n_county] = np.arange(n_county)
    county_of_tract.sort()
    tract_of_bg = np.sort(np.concatenate([np.arange(n_tract), rng.integers(0, n_tract, n_bg - n_tract)]))
    bg_of_block = np.sort(np.concatenate([np.arange(n_bg), rng.integers(0, n_bg, max(0, n_blocks - n_bg))]))
    w = rng.lognormal(0.0, 1.3, n_blocks) * rng.lognormal(0.0, 0.5, n_bg)[bg_of_block]
    w[rng.random(n_blocks) < 0.25] *= 0.02  # many nearly empty blocks
    block_of_person = np.sort(rng.choice(n_blocks, size=n_persons, p=w / w.sum()))
    bg = bg_of_block[block_of_person]
    tract = tract_of_bg[bg]
    county = county_of_tract[tract]

    # race: a neighbourhood (tract) mix drawn around the state mix
    base = _race_probabilities()
    cenrace = np.empty(n_persons, dtype=np.int64)
    tract_starts = np.searchsorted(tract, np.arange(n_tract + 1))
    for t in range(n_tract):
        a, b = tract_starts[t], tract_starts[t + 1]
        if b > a:
            mix = rng.dirichlet(base * 8.0 + 1e-3)
            cenrace[a:b] = np.minimum(np.searchsorted(np.cumsum(mix), rng.random(b - a)), len(base) - 1)
    hisp_rate = rng.beta(2.0, 9.0, n_county)[county]
    hispanic = (rng.random(n_persons) < hisp_rate).astype(np.int64)
    votingage = (rng.random(n_persons) < 0.78).astype(np.int64)

    # group quarters: about 1.5% of blocks hold one facility of one type
    hhgq = np.zeros(n_persons, dtype=np.int64)
    gq_blocks = np.flatnonzero(rng.random(n_blocks) < 0.015)
    gq_type = 1 + rng.choice(7, size=gq_blocks.size, p=_GQ_TYPE_MIX)
    in_gq = np.isin(block_of_person, gq_blocks)
    block_type = np.zeros(n_blocks, dtype=np.int64)
    block_type[gq_blocks] = gq_type
    share = rng.random(n_persons) < 0.6
    hhgq[in_gq & share] = block_type[block_of_person[in_gq & share]]
    adult_gq = np.isin(hhgq, [1, 3, 5, 6])  # correctional, nursing, college, military: adults
    votingage[adult_gq] = 1

    county_code = np.char.add(state, np.char.zfill((2 * np.arange(n_county) + 1).astype(str), 3))
    tract_code = np.char.add(
        county_code[county_of_tract], np.char.zfill((np.arange(n_tract) * 100 + 100).astype(str), 6)
    )
    bg_rank = np.arange(n_bg) - np.searchsorted(tract_of_bg, tract_of_bg)
    bg_code = np.char.add(tract_code[tract_of_bg], (bg_rank + 1).astype(str))
    blk_rank = np.arange(n_blocks) - np.searchsorted(bg_of_block, bg_of_block)
    block_code = np.char.add(bg_code[bg_of_block], np.char.zfill(blk_rank.astype(str), 3))
    return pd.DataFrame(
        {
            "state": np.full(n_persons, state, dtype=object),
            "county": county_code[county].astype(object),
            "tract": tract_code[tract].astype(object),
            "blockgroup": bg_code[bg].astype(object),
            "block": block_code[block_of_person].astype(object),
            "hhgq": hhgq,
            "votingage": votingage,
            "hispanic": hispanic,
            "cenrace": cenrace,
        }
    )


def generate_facilities(persons: pd.DataFrame, seed: int = 0, gq_rate: float = 0.05) -> pd.DataFrame:
    """A facilities table for ``persons``: one row per housing unit (``gqtype`` 0: households of
    about 2.5 persons plus a few vacant units) and per occupied group-quarters facility (1 +
    Binomial(residents - 1, gq_rate) per block and type, so never more than the residents)."""
    rng = np.random.default_rng(seed)
    by = persons.groupby(["block", "hhgq"], observed=True).size()
    n = by.to_numpy()
    kind = by.index.get_level_values("hhgq").to_numpy().astype(np.int64)
    housing = np.ceil(n / 2.5).astype(np.int64) + rng.binomial(n, 0.04)
    rows = np.where(kind == 0, housing, 1 + rng.binomial(np.maximum(n - 1, 0), gq_rate))
    return pd.DataFrame(
        {"block": np.repeat(by.index.get_level_values("block").astype(str), rows), "gqtype": np.repeat(kind, rows)}
    )


def aian_blocks(frame, seed: int, n_tracts: int) -> set:
    """Blocks inside a synthetic AIAN area: some block groups of a few tracts, so that the area
    cuts across counties, tracts and block groups (production's AIAN spine splits them all)."""
    rng = np.random.default_rng(seed)
    tracts = np.unique(frame["tract"].astype(str))
    chosen = rng.choice(tracts, size=n_tracts, replace=False)
    bgs = frame.loc[frame["tract"].astype(str).isin(chosen), ["tract", "blockgroup"]].astype(str).drop_duplicates()
    picked = bgs.groupby("tract", sort=True)["blockgroup"].apply(
        lambda s: list(s.sort_values()[: max(1, (len(s) + 1) // 2)])
    )
    inside = {bg for group in picked for bg in group}
    return set(frame.loc[frame["blockgroup"].astype(str).isin(inside), "block"].astype(str))
