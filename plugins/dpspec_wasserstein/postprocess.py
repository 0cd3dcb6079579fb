"""The post-processing alternative of seed 2's case study (Section 4.2, method 1): noisy counts made
congenial with the public information by a deterministic two-stage post-processing.

Stage 1 projects the noisy case counts onto {y >= 0, sum y = public total} (Euclidean projection
onto the scaled simplex, then integers by largest remainders, which keeps the total); stage 2
clips the noisy death counts to [0, cases]. Both stages map many noisy values to one output,
which is what Section 4.3 counts, each as the region of noisy values the map sends to one output:
ContractedCaseZeros (a noisy case count at or below the projection's threshold, positive ones
included, released as 0), ContractedDeathZeros (a noisy death count at or below 0, or a county
whose released cases are 0) and ContractedRates (a noisy death count at or above the county's
released cases, which are positive: a survival rate contracted to 0). The earlier, narrower
tally (a negative noisy count made 0; deaths strictly above the cases) is kept beside it under
the same names with the suffix `_strict`.
"""

from __future__ import annotations

import numpy as np

from dpspec.api import (
    project_to_total,
    project_with_threshold,
)  # shared with the aggregate's consistency with a public total

__all__ = ["project_to_total", "project_with_threshold", "two_stage"]


def two_stage(noisy_cases: np.ndarray, noisy_deaths: np.ndarray | None, total: int):
    """(cases, deaths, contractions): stage 1 and 2 above, with per-cell contraction flags."""
    cases, theta = project_with_threshold(noisy_cases, total)
    nc = np.asarray(noisy_cases)
    zero_region = nc <= (theta[:, None] if nc.ndim == 2 else theta[0])
    flags = {"ContractedCaseZeros": zero_region, "ContractedCaseZeros_strict": (cases == 0) & (nc < 0)}
    deaths = None
    if noisy_deaths is not None:
        nd = np.asarray(noisy_deaths)
        deaths = np.clip(nd, 0, cases)
        flags["ContractedDeathZeros"] = (nd <= 0) | (cases == 0)
        flags["ContractedDeathZeros_strict"] = nd < 0
        flags["ContractedRates"] = (nd >= cases) & (cases > 0)
        flags["ContractedRates_strict"] = (nd > cases) & (cases > 0)
    return cases, deaths, flags
