"""TopDown's likelihood for `dpspec infer`: each released noisy measurement is the true count
plus independent discrete Gaussian noise, so P(value | truth) is the discrete Gaussian pmf.

Why it reads only the published `measurements` table and the spec: an analyst has exactly those.
A row's cell index is decoded the way the table documents it (C order over the query's
variables in the spec's declaration order, categories in the domain's order); the noise
parameter sigma² is recovered from the published variance (equal to it from sigma² of about 10
on; below, the variance is inverted numerically, it is increasing in sigma²).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpspec.api import CountLikelihood, MechanismError, discrete_gaussian_logpmf, discrete_gaussian_variance, ir

ROOT = "nation"


def sigma2_from_variance(variance: float) -> float:
    """The discrete Gaussian parameter whose variance is `variance` (bisection below 100)."""
    if not variance > 0:
        raise MechanismError(f"a measurement variance must be positive, got {variance}")
    if variance >= 100.0:
        return float(variance)
    low, high = 1e-6, 100.0
    for _ in range(80):
        mid = math.sqrt(low * high)
        if discrete_gaussian_variance(mid) < variance:
            low = mid
        else:
            high = mid
    return math.sqrt(low * high)


def _categories(spec: ir.Spec, table: str, variables) -> dict:
    cols = spec.domain.table(table)
    out = {}
    for name in variables:
        ty = cols.column(name).type
        if ty.kind == "enum":
            out[name] = [str(v) for v in ty.values]
        elif ty.kind == "bool":
            out[name] = ["False", "True"]
        else:
            out[name] = [str(v) for v in range(ty.low, ty.high + 1)]
    return out


def measurement_likelihoods(spec: ir.Spec, params: dict, outputs: dict) -> list[CountLikelihood] | None:
    """One CountLikelihood per (level, query) of the published measurements; None if unpublished."""
    frame = outputs.get("measurements")
    if frame is None:
        return None
    table = params["table"]
    declared = list(params["variables"])
    cats = _categories(spec, table, declared)
    out = []
    for (level, query), rows in frame.groupby(["level", "query"], sort=False, observed=True):
        names = [] if query == "total" else [v.strip() for v in str(query).split("*")]
        names = [v for v in declared if v in names]  # declaration order, as the cells are numbered
        shape = [len(cats[v]) for v in names]
        cell = rows["cell"].to_numpy(dtype=np.int64)
        if names and (cell.min() < 0 or cell.max() >= int(np.prod(shape))):
            raise MechanismError(
                f"measurements: query '{query}' has a cell index outside its {int(np.prod(shape))} cells"
            )
        cells = {}
        if level != ROOT:
            cells[str(level)] = rows["geocode"].astype(str).to_numpy()
        coords = np.unravel_index(cell, shape) if names else ()
        for v, c in zip(names, coords):
            cells[v] = np.asarray(cats[v], dtype=object)[c]
        columns = tuple(cells)
        value = rows["value"].to_numpy(dtype=np.int64)
        sigma2 = np.array([sigma2_from_variance(v) for v in rows["variance"].to_numpy(dtype=float)])
        log_max = np.array([discrete_gaussian_logpmf(float(s), [0])[0] for s in sigma2])
        log_z = log_max  # log P(noise = 0) = -log Z

        def logpmf(truth, value=value, sigma2=sigma2, log_z=log_z):
            noise = value - np.asarray(truth, dtype=np.float64)
            return -noise * noise / (2.0 * sigma2) + log_z

        out.append(
            CountLikelihood(
                query=ir.CountQuery(table, columns),
                cells=pd.DataFrame(cells, columns=list(columns), index=pd.RangeIndex(len(rows))),
                value=value,
                logpmf=logpmf,
                log_max=log_max,
                estimate=value.astype(float),
                variance=rows["variance"].to_numpy(dtype=float),
                description=f"{level} {query}: value = true count + discrete Gaussian noise (sigma² {sigma2[0]:.4g})",
            )
        )
    return out


def variances_agree(frame: pd.DataFrame, allowed: dict) -> np.ndarray:
    """Per row, whether its variance is one its (level, query) gets from the spec's allocation
    (`allowed`: {(level, query): variances}); a (level, query) the allocation lacks is left to the
    likelihood. A smaller variance than the spec's would make a posterior falsely sure."""
    variance = pd.to_numeric(frame["variance"], errors="coerce").to_numpy(dtype=float)
    ok = np.ones(len(frame), dtype=bool)
    keys = frame["level"].astype(str) + "\x1f" + frame["query"].astype(str)
    for (level, query), values in allowed.items():
        rows = (keys == f"{level}\x1f{query}").to_numpy()
        if rows.any():
            ok[rows] = np.any([np.isclose(variance[rows], v, rtol=1e-9, atol=0) for v in values], axis=0)
    return ok
