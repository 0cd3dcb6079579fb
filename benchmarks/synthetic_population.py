"""Census-like synthetic households for benchmarks: state, county, size, tenure, household id.

The shape matters more than the values: about 3,100 counties nested in 51 states with very
unequal populations, household sizes with present-day US frequencies (so the match key state x
size has a few huge strata and many small ones), and tenure about two thirds owned. Every
column is categorical or a small integer, as a census file loaded for processing would be.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH "
    "NJ NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY"
).split()

# Approximate share of households by size in the US today (ACS-like), 7 meaning 7 or more.
SIZE_LABELS = ["1", "2", "3", "4", "5", "6", "7+"]
SIZE_SHARES = np.array([0.28, 0.345, 0.153, 0.127, 0.058, 0.023, 0.014])
OWNED_SHARE = 0.65
N_COUNTIES = 3_143


def geography(seed: int = 0) -> pd.DataFrame:
    """Counties with their state and their share of households (heavy-tailed, like the US)."""
    rng = np.random.default_rng(seed)
    # Counties per state: a skewed split of 3,143 (Texas-like states have hundreds, DC one).
    raw = rng.lognormal(mean=0.0, sigma=0.8, size=len(STATES))
    per_state = np.maximum(1, np.floor(raw / raw.sum() * N_COUNTIES)).astype(int)
    per_state[np.argmax(per_state)] += N_COUNTIES - per_state.sum()
    state_of_county = np.repeat(np.arange(len(STATES)), per_state)
    # Household counts per county are roughly log-normal (a few metros, many rural counties).
    weight = rng.lognormal(mean=0.0, sigma=1.5, size=N_COUNTIES)
    names = [f"{STATES[s]}{i:03d}" for s, k in zip(range(len(STATES)), per_state) for i in range(k)]
    return pd.DataFrame({"state": state_of_county, "county": names, "weight": weight / weight.sum()})


def households(n: int, seed: int = 0) -> pd.DataFrame:
    """n synthetic households; deterministic for a given (n, seed)."""
    geo = geography(seed)
    rng = np.random.default_rng([seed, n])
    county = _choice(rng, geo["weight"].to_numpy(), n).astype(np.int16)
    state = geo["state"].to_numpy().astype(np.int8)[county]
    size = _choice(rng, SIZE_SHARES, n).astype(np.int8)
    rented = (rng.random(n, dtype=np.float32) >= OWNED_SHARE).astype(np.int8)
    return pd.DataFrame(
        {
            "hhid": np.arange(n, dtype=np.int32),
            "state": pd.Categorical.from_codes(state, categories=STATES),
            "county": pd.Categorical.from_codes(county, categories=list(geo["county"])),
            "size": pd.Categorical.from_codes(size, categories=SIZE_LABELS, ordered=True),
            "tenure": pd.Categorical.from_codes(rented, categories=["owned", "rented"]),
        }
    )


def _choice(rng: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    """Category indices drawn with probabilities p (inverse CDF on float32 uniforms)."""
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(n, dtype=np.float32), side="right").clip(0, len(p) - 1)
