"""A seeded synthetic state for SafeTab: households and their persons, with counties, tracts,
places that straddle county lines, AIAN/NH areas, and detailed race/ethnicity codes drawn from
the real 2020 code table with realistic multiplicity.

Nothing here comes from confidential data. The shape follows published 2020 figures in round
numbers: about 86% of persons report one race code, 10% two, the rest three to eight; race
groups weighted roughly as the 2020 national shares (White 60%, Black 13%, Asian 6%, Some
Other Race 8%, AIAN 2.4% rising to 45% inside AIAN/NH areas, NHPI 0.3%); 19% Hispanic; within
a major group detailed codes follow a Zipf law (a few large groups, a long tail of small ones,
which is what the adaptive design is for). Household types and tenure follow the 2020 DHC
national shares in round numbers. Everything is vectorized; one seed gives one population.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# major race group (first digit of the code) -> share; Hispanic write-ins (2xxx) also occur as race
RACE_GROUPS = {"1": 0.60, "3": 0.13, "4": 0.06, "5": 0.012, "6": 0.012, "7": 0.003, "8": 0.08, "2": 0.103}
TRIBAL_RACE_GROUPS = {"1": 0.35, "3": 0.03, "4": 0.01, "5": 0.25, "6": 0.20, "7": 0.002, "8": 0.05, "2": 0.108}
N_CODES = {1: 0.86, 2: 0.10, 3: 0.025, 4: 0.008, 5: 0.003, 6: 0.002, 7: 0.001, 8: 0.001}
HISPANIC_SHARE = 0.19
NOT_HISPANIC_CODE = "1000"  # any code mapped to "Not Hispanic or Latino" serves
AGE_WEIGHTS = [
    0.057,
    0.060,
    0.062,
    0.064,
    0.068,
    0.067,
    0.065,
    0.062,
    0.060,
    0.062,
    0.065,
    0.066,
    0.062,
    0.053,
    0.040,
    0.028,
    0.018,
    0.011,
    0.005,
    0.002,
]  # 5-year bands 0-4 .. 95-99
AGE4_BINS = [18, 45, 65]
AGE9_BINS = [5, 18, 25, 35, 45, 55, 65, 75]
AGE23_BINS = [5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85]
HHT_SHARES = {1: 0.47, 2: 0.05, 3: 0.12, 4: 0.28, 5: 0.08}  # married, male/female no spouse, alone, not alone
TEN_SHARES = {1: 0.40, 2: 0.23, 3: 0.35, 4: 0.02}  # mortgage, free and clear, rented, no rent
HH_SIZE = {2: 0.35, 3: 0.16, 4: 0.13, 5: 0.06, 6: 0.025, 7: 0.015}  # non-alone households


def _zipf_codes(codes: list[str], rng, size: int, s: float = 1.2) -> np.ndarray:
    weights = 1.0 / np.arange(1, len(codes) + 1) ** s
    order = rng.permutation(len(codes))  # which detailed groups are large is itself random
    return np.asarray(codes, dtype=object)[order][rng.choice(len(codes), size=size, p=weights / weights.sum())]


def geography(n_households: int, rng, state: str = "25") -> pd.DataFrame:
    """Counties, tracts (~1,000 households each), places over runs of tracts that may cross
    county lines, and AIAN/NH areas over a few tracts in different counties."""
    n_tracts = max(4, n_households // 1000)
    n_counties = max(2, min(14, n_tracts // 3))
    tract_county = np.sort(rng.integers(0, n_counties, n_tracts))
    tract_county[:n_counties] = np.arange(n_counties)  # every county has a tract
    tract_county.sort()
    county = np.array([f"{state}{2 * c + 1:03d}" for c in range(n_counties)], dtype=object)[tract_county]
    tract = np.array([f"{county[t]}{t:06d}" for t in range(n_tracts)], dtype=object)
    place = np.full(n_tracts, None, dtype=object)
    t, p = 0, 0
    while t < n_tracts:  # runs of 1-4 tracts form a place (a run can cross a county line); gaps between
        run = int(rng.integers(1, 5))
        if rng.random() < 0.75:
            place[t : t + run] = f"{state}{10000 + 137 * p:05d}"
            p += 1
        t += run + int(rng.integers(0, 3))
    aiannh = np.full(n_tracts, None, dtype=object)
    n_areas = max(1, n_tracts // 40)
    for a in range(n_areas):
        chosen = rng.choice(n_tracts, size=min(n_tracts, int(rng.integers(1, 4))), replace=False)
        aiannh[chosen] = f"{1000 + 37 * a:04d}"
    weights = rng.gamma(4.0, 1.0, n_tracts)
    hh_tract = rng.choice(n_tracts, size=n_households, p=weights / weights.sum())
    return pd.DataFrame(
        {
            "state": state,
            "county": county[hh_tract],
            "tract": tract[hh_tract],
            "place": place[hh_tract],
            "aiannh": aiannh[hh_tract],
        }
    )


def race_codes(n: int, tribal: np.ndarray, codes: pd.Series, rng, max_codes: int = 8) -> np.ndarray:
    """(n, max_codes) object array of race codes, None-padded; distinct codes per record."""
    by_group = {g: sorted(c for c in codes if c[0] == g and not c.endswith("000")) for g in RACE_GROUPS}
    k = rng.choice(list(N_CODES), size=n, p=np.array(list(N_CODES.values())) / sum(N_CODES.values()))
    k = np.minimum(k, max_codes)
    out = np.full((n, max_codes), None, dtype=object)
    groups = list(RACE_GROUPS)
    for j in range(max_codes):
        rows = np.flatnonzero(k > j)
        if not rows.size:
            break
        g = np.empty(rows.size, dtype=object)
        for shares, mask in ((RACE_GROUPS, ~tribal[rows]), (TRIBAL_RACE_GROUPS, tribal[rows])):
            p = np.array([shares[x] for x in groups])
            g[mask] = np.asarray(groups, dtype=object)[rng.choice(len(groups), size=int(mask.sum()), p=p / p.sum())]
        for grp in groups:
            m = g == grp
            if m.any():
                out[rows[m], j] = _zipf_codes(by_group[grp], rng, int(m.sum()))
    # a repeated code is dropped (production counts each code once)
    for j in range(1, max_codes):
        dup = np.zeros(n, dtype=bool)
        for i in range(j):
            dup |= (out[:, j] == out[:, i]) & (out[:, j] != None)  # noqa: E711
        out[dup, j] = None
    return out


def ethnicity_codes(n: int, codes: pd.Series, rng) -> np.ndarray:
    hisp = sorted(c for c in codes if c[0] == "2" and c != "2000")
    out = np.full(n, NOT_HISPANIC_CODE, dtype=object)
    h = rng.random(n) < HISPANIC_SHARE
    out[h] = _zipf_codes(hisp, rng, int(h.sum()), s=1.0)
    return out


def _pick(shares: dict, n: int, rng) -> np.ndarray:
    keys = np.array(list(shares))
    p = np.array(list(shares.values()), dtype=float)
    return keys[rng.choice(len(keys), size=n, p=p / p.sum())]


def population(
    n_households: int, codes: pd.Series, seed: int = 2020, state: str = "25"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(households, persons). Persons inherit their household's geography; the householder
    (person 1) carries the household's race and ethnicity codes, the others share them with
    probability 0.8 and are drawn afresh otherwise."""
    rng = np.random.default_rng(seed)
    codes = pd.Series(codes).astype(str)
    geo = geography(n_households, rng, state)
    tribal_h = geo["aiannh"].notna().to_numpy()
    hh_race = race_codes(n_households, tribal_h, codes, rng)
    hh_eth = ethnicity_codes(n_households, codes, rng)
    hht = _pick(HHT_SHARES, n_households, rng)
    ten = _pick(TEN_SHARES, n_households, rng)
    size = np.where(hht == 4, 1, _pick(HH_SIZE, n_households, rng))
    households = geo.copy()
    households.insert(0, "hhid", np.arange(1, n_households + 1))
    for j in range(hh_race.shape[1]):
        households[f"QRACE{j + 1}"] = hh_race[:, j]
    households["QSPAN"] = hh_eth
    households["HHT"] = hht.astype(str)
    households["FAMILY"] = np.where(hht <= 3, "1", "2")  # family / nonfamily
    households["HHT4"] = np.select(
        [hht == 1, hht <= 3, hht == 4], ["1", "2", "3"], "4"
    )  # married, other family, alone, not alone
    households["TEN"] = ten.astype(str)
    households["TENURE3"] = np.where(ten >= 3, "3", ten.astype(str))  # renter includes occupied without rent

    hh_of = np.repeat(np.arange(n_households), size)
    n = len(hh_of)
    first = np.r_[True, hh_of[1:] != hh_of[:-1]]
    fresh = ~first & (rng.random(n) > 0.8)
    race = hh_race[hh_of].copy()
    eth = hh_eth[hh_of].copy()
    if fresh.any():
        race[fresh] = race_codes(int(fresh.sum()), tribal_h[hh_of][fresh], codes, rng)
        eth[fresh] = ethnicity_codes(int(fresh.sum()), codes, rng)
    band = rng.choice(len(AGE_WEIGHTS), size=n, p=np.array(AGE_WEIGHTS) / sum(AGE_WEIGHTS))
    age = np.minimum(band * 5 + rng.integers(0, 5, n), 115)
    age[first] = np.maximum(age[first], 18 + rng.integers(0, 5, int(first.sum())))  # householders are adults
    persons = geo.iloc[hh_of].reset_index(drop=True)
    persons.insert(0, "hhid", hh_of + 1)
    persons["QSEX"] = np.where(rng.random(n) < 0.49, "1", "2")
    persons["QAGE"] = age
    persons["AGE4"] = np.digitize(age, AGE4_BINS)
    persons["AGE9"] = np.digitize(age, AGE9_BINS)
    persons["AGE23"] = np.digitize(age, AGE23_BINS)
    for j in range(race.shape[1]):
        persons[f"QRACE{j + 1}"] = race[:, j]
    persons["QSPAN"] = eth
    return households, persons
