"""A seeded synthetic population of households in the shape of the PHSafe input (units and
persons joined by MAFID, production's codes), consistent enough that every record fits its
tables' cells. Built column-wise with numpy (the benchmark asks for millions of persons)."""

from __future__ import annotations

import numpy as np
import pandas as pd

# (HHT2 without / with own children under 18) by household kind; see tabulate's code tables
_MARRIED, _COHAB, _FEMALE, _MALE = 0, 1, 2, 3


def _race(n: int, rng: np.random.Generator) -> np.ndarray:
    """CENRACE codes 1..63: mostly one race, a few two or more."""
    alone = rng.choice(np.arange(1, 7), size=n, p=[0.6, 0.13, 0.02, 0.07, 0.01, 0.17])
    return np.where(rng.random(n) < 0.1, rng.integers(7, 64, size=n), alone)


def population(
    households: int, states: list[str], seed: int = 2020, gq_share: float = 0.02, vacant_share: float = 0.08
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(units, persons): `households` occupied housing units, plus vacant units and group
    quarters, spread over `states`."""
    rng = np.random.default_rng(seed)
    n = households
    kind = rng.choice(4, size=n, p=[0.48, 0.08, 0.25, 0.19])
    partnered = kind <= _COHAB
    children = rng.poisson(np.where(partnered, 1.0, 0.4))
    relatives = rng.poisson(0.25, size=n)
    nonrel = rng.poisson(np.where(partnered, 0.05, 0.3))
    big = rng.random(n) < 0.01  # a few very large households: truncation has work to do
    relatives = relatives + np.where(big, rng.integers(6, 14, size=n), 0)
    size = 1 + partnered + children + relatives + nonrel
    hh_index = np.repeat(np.arange(n), size)
    pos = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    p_partner = np.repeat(partnered.astype(int), size)
    c_end = 1 + p_partner + np.repeat(children, size)
    r_end = c_end + np.repeat(relatives, size)
    same_sex = rng.random(n) < 0.02
    role = np.select([pos == 0, pos < 1 + p_partner, pos < c_end, pos < r_end], [0, 1, 2, 3], 4)
    m = size.sum()
    age = np.where(role == 2, rng.integers(0, 30, size=m), rng.integers(18, 90, size=m))
    age = np.where(role == 3, rng.integers(0, 90, size=m), age)
    hh_kind = np.repeat(kind, size)
    relship = np.select(
        [role == 0, (role == 1) & (hh_kind == _MARRIED), role == 1, role == 2, role == 3],
        [
            20,
            np.where(np.repeat(same_sex, size), 23, 21),
            np.where(np.repeat(same_sex, size), 24, 22),
            rng.choice([25, 26, 27], size=m, p=[0.85, 0.05, 0.1]),
            rng.choice([28, 29, 30, 31, 32, 33], size=m),
        ],
        rng.choice([34, 35, 36], size=m, p=[0.5, 0.1, 0.4]),
    )
    age = np.where(relship == 30, rng.integers(0, 25, size=m), age)
    race = _race(m, rng)
    hisp = np.where(rng.random(m) < 0.18, 2, 1)
    # household figures from its members
    own_minor = np.bincount(hh_index, weights=(role == 2) & (age < 18), minlength=n) > 0
    family_rel = np.bincount(hh_index, weights=(role == 2) | (role == 3), minlength=n) > 0
    female = rng.random(n) < 0.5
    alone = size == 1
    hht2 = np.select(
        [kind == _MARRIED, kind == _COHAB],
        [np.where(own_minor, 1, 2), np.where(own_minor, 3, 4)],
        np.where(alone, 5, np.where(own_minor, 6, np.where(family_rel, 7, 8))) + np.where(kind == _MALE, 4, 0),
    )
    hht = np.select(
        [kind == _MARRIED, family_rel],
        [1, np.where(female & (kind != _MALE), 3, 2)],
        np.where(alone, 4, 5) + np.where(female & (kind != _MALE), 2, 0),
    )
    hht = np.where(kind == _MALE, np.where(family_rel, 2, np.where(alone, 4, 5)), hht)
    cplt = np.select([kind == _MARRIED, kind == _COHAB], [np.where(same_sex, 2, 1), np.where(same_sex, 4, 3)], 5)
    state = rng.choice(states, size=n)
    head = np.flatnonzero(pos == 0)
    units = pd.DataFrame(
        {
            "MAFID": np.arange(100_000_001, 100_000_001 + n),
            "state": state,
            "RTYPE": 2,
            "HHT": hht,
            "HHT2": hht2,
            "CPLT": cplt,
            "TEN": rng.choice([1, 2, 3, 4], size=n, p=[0.4, 0.25, 0.33, 0.02]),
            "HHRACE": race[head],
            "HHSPAN": hisp[head],
        }
    )
    persons = pd.DataFrame(
        {
            "MAFID": units["MAFID"].to_numpy()[hh_index],
            "RTYPE": 3,
            "RELSHIP": relship,
            "QAGE": age,
            "CENRACE": race,
            "CENHISP": hisp,
        }
    )
    # vacant housing units (no persons, HHT 0) and group quarters (RTYPE 4 / 5)
    n_vac, n_gq = int(n * vacant_share), max(1, int(n * gq_share / 10))
    extra = pd.DataFrame(
        {
            "MAFID": np.arange(300_000_001, 300_000_001 + n_vac + n_gq),
            "state": rng.choice(states, size=n_vac + n_gq),
            "RTYPE": np.r_[np.full(n_vac, 2), np.full(n_gq, 4)],
            "HHT": 0,
            "HHT2": 0,
            "CPLT": 0,
            "TEN": 0,
            "HHRACE": 1,
            "HHSPAN": 1,
        }
    )
    gq_size = rng.integers(5, 40, size=n_gq)
    gq_mafid = np.repeat(extra["MAFID"].to_numpy()[n_vac:], gq_size)
    k = gq_size.sum()
    gq = pd.DataFrame(
        {
            "MAFID": gq_mafid,
            "RTYPE": 5,
            "RELSHIP": rng.choice([37, 38], size=k),
            "QAGE": rng.integers(18, 100, size=k),
            "CENRACE": _race(k, rng),
            "CENHISP": np.where(rng.random(k) < 0.18, 2, 1),
        }
    )
    return (pd.concat([units, extra], ignore_index=True), pd.concat([persons, gq], ignore_index=True))
