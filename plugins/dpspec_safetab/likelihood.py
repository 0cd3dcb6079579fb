"""SafeTab's likelihood for `dpspec infer`: P(published counts | true counts), exactly.

A published SafeTab release says three things about each (geography unit, population group) of
a (table, geography level, iteration level), and each is a factor of the likelihood given the
group's true total t and cells c (independent noise, so the factors multiply):

- which detail was published (SafeTab-P): stage 1 drew T1 = t + N(sigma²_1) and chose rung r
  when thresholds[r-1] <= T1 < thresholds[r], so P(rung r | t) = F1(thr_r - 1 - t) -
  F1(thr_{r-1} - 1 - t) with F1 the discrete Gaussian's distribution function. Stage 1's value
  is never published; only this interval is. (SafeTab-H's detail comes from public totals: no
  factor.)
- the published values: a total (rung 0, and detailed-only groups with the whole rho) or the
  stage-2 cells, each value = truth + discrete Gaussian noise (pmf in `dpspec.run.noise`); a group's
  total beside its cells is their sum (post-processing) and adds nothing.
- a group that is absent where suppression applies was suppressed: P(absent | t) =
  P(rung 0 | t) F2(threshold - t) (a zero total is kept only above the threshold).

The noise parameters are public functions of the design and of the code -> iteration mapping
(the fan-out), computed with the mechanism's own `noise_sigma2`. The keys are the declared ones,
as the run's are: every declared unit of a level (`geography.declared_units`) times the public
iteration table's groups, so a unit whose every group was suppressed, named nowhere in the
release, still contributes its suppression factors; a release naming a unit the spec does not
declare is not this spec's release (a DataError), never a key to condition on.

The rows are keyed by geography unit, `group` (the iteration code) and detail variables;
population groups are not columns of the persons table (one person is in several groups), so a
`dpspec infer` target, a count query over the table's columns, cannot be broken down by them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpspec.api import CountLikelihood, DataError, discrete_gaussian_logpmf, ir, shown as shown_value

from .design import ROOT, variable_values
from .engine import choose_detail, suppression_threshold
from .geography import declared_units
from .tabulate import ALL, fanout_of

GROUP = "group"


class DiscreteGaussianTails:
    """log pmf, and log P(lo < N <= hi) for integer bounds, of discrete Gaussian noise N."""

    def __init__(self, sigma2):
        self.sigma2 = sigma2
        s = math.sqrt(float(sigma2))
        self.bound = int(math.ceil(40 * s)) + 2
        support = np.arange(-self.bound, self.bound + 1)
        p = np.exp(discrete_gaussian_logpmf(sigma2, support))
        p /= p.sum()
        self.cdf = np.concatenate([[0.0], np.cumsum(p)])  # cdf[i] = P(N <= i - 1 - bound)
        self.sf = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])  # sf[i] = P(N >= i - bound)
        self.log_p0 = float(discrete_gaussian_logpmf(sigma2, [0])[0])

    def logpmf(self, x):
        return discrete_gaussian_logpmf(self.sigma2, np.asarray(x, dtype=np.float64))

    def _index(self, x):
        """Position of F(x) = P(N <= x) in cdf and of S(x) = P(N > x) in sf."""
        return np.clip(np.asarray(x, dtype=np.float64) + self.bound + 1, 0, len(self.cdf) - 1).astype(np.int64)

    def log_between(self, lo, hi):
        """log P(lo < N <= hi), elementwise (lo may be -inf, hi +inf)."""
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        i_lo, i_hi = self._index(lo), self._index(hi)
        below = self.cdf[i_hi] - self.cdf[i_lo]  # F(hi) - F(lo): accurate in the lower tail
        upper = self.sf[i_lo] - self.sf[i_hi]  # S(lo) - S(hi): accurate in the upper tail
        value = np.where(hi < 0, below, np.where(lo >= 0, upper, below))
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(value, 0.0))


def _rung_bounds(thresholds, rung):
    """(lo, hi) such that rung r is chosen iff lo < T1 <= hi (T1 an integer)."""
    thr = [-np.inf, *[t - 1 for t in thresholds], np.inf]
    rung = np.asarray(rung, dtype=np.int64)
    return np.asarray(thr, dtype=np.float64)[rung], np.asarray(thr, dtype=np.float64)[rung + 1]


def _texts(frame: pd.DataFrame, columns) -> pd.DataFrame:
    return frame.assign(**{c: frame[c].astype(str) for c in columns})


def safetab_likelihoods(mech, spec, params, outputs) -> list[CountLikelihood] | None:
    counts = outputs.get("counts")
    if counts is None:
        return None
    design = mech.design(spec, params)
    table = mech._iteration_table(spec, params)
    variables = list(variable_values(spec, params, design))
    counts = _texts(counts, ["table", "geography", "geocode", "group", "detail", *variables])
    counts = counts.assign(
        group_level=pd.to_numeric(counts["group_level"]).astype(int),
        count=pd.to_numeric(counts["count"]).astype(np.int64),
    )
    public = mech._public_totals(spec, params) if not design.two_stage else None
    units = declared_units(spec, params["table"], design.geo_levels)
    out = []
    for td in design.tables:
        for cell in td.cells:
            if cell.rho == 0:
                continue
            rows = counts[
                (counts["table"] == td.name) & (counts["geography"] == cell.geo) & (counts["group_level"] == cell.level)
            ]
            out.extend(_block(mech, design, table, td, cell, rows, variables, public, params["table"], units[cell.geo]))
    return out


def _block(mech, design, table, td, cell, rows, variables, public, unit_table, units):
    """The likelihoods of one (table, geography level, iteration level): `units` its declared units."""
    stray = ~rows["geocode"].isin(units)
    if stray.any():
        raise DataError(
            f"the release names {cell.geo} {shown_value(rows['geocode'][stray].iloc[0])} (table {td.name}, "
            f"iteration level {cell.level}), which the spec does not declare: it is not this spec's release"
        )
    gran = design.granularity(cell.geo)
    sel = table.selection(cell.level, gran)
    k, _ = fanout_of(design, table, cell.level, gran)
    stages = dict(design.stages(cell))
    second = DiscreteGaussianTails(mech.noise_sigma2(k, stages["stage 2"]))
    first = DiscreteGaussianTails(mech.noise_sigma2(k, stages["stage 1"])) if design.two_stage else None
    whole = DiscreteGaussianTails(mech.noise_sigma2(k, cell.rho)) if design.two_stage else None
    suppress = cell.geo in design.suppress_at
    t_second = suppression_threshold(second.sigma2, design.suppression) if suppress else None
    t_whole = suppression_threshold(whole.sigma2, design.suppression) if (suppress and whole) else None
    geo_cols = () if cell.geo == ROOT else (cell.geo,)
    rung_of = {d.name: r for r, d in enumerate(td.details)}
    is_total = (rows[variables] == ALL).all(axis=1) if variables else pd.Series(True, index=rows.index)
    totals = rows[is_total].drop_duplicates(["geocode", "group"])
    # every (unit, group) the release could hold at this level: the declared units x the selection
    keys = pd.MultiIndex.from_product([list(units), sel["iteration"].astype(str)], names=["geocode", "group"])
    only = dict(zip(sel["iteration"].astype(str), sel["detailed_only"].to_numpy(dtype=bool)))
    shown = totals.set_index(["geocode", "group"])
    present = keys.isin(shown.index)
    if public is not None:  # one stage: the rung of each key comes from the public totals
        pub = public[public["geography"] == cell.geo]
        pub = pd.Series(
            pub["count"].to_numpy(dtype=np.float64),
            index=pd.MultiIndex.from_arrays([pub["geocode"].astype(str), pub["group"].astype(str)]),
        )
        chosen = pub.reindex(keys)
        public_rung = np.where(
            chosen.isna(), -1, choose_detail(np.nan_to_num(chosen.to_numpy(), nan=-np.inf), cell.thresholds)
        )
        candidates = present | ((public_rung == 0) & suppress)
    else:
        candidates = present | suppress
    keys = keys[candidates]
    present = present[candidates]
    n = len(keys)
    if not n:  # nothing published and nothing suppressed at this level: nothing to condition on
        return []
    group = keys.get_level_values("group").to_numpy()
    detailed_only = (
        np.array([only.get(g, False) for g in group], dtype=bool) if design.two_stage else np.zeros(n, dtype=bool)
    )
    rung = np.zeros(n, dtype=np.int64)
    value = np.zeros(n, dtype=np.int64)
    if n:
        hit = shown.reindex(keys[present])
        rung[present] = [rung_of.get(d, 0) for d in hit["detail"]]
        value[present] = hit["count"].to_numpy(dtype=np.int64)
    total_published = present & ((rung == 0) | detailed_only)
    adaptive = design.two_stage & ~detailed_only
    if design.two_stage:
        lo, hi = _rung_bounds(cell.thresholds, rung)
    noise_of_total = np.where(detailed_only, 1, 0)  # 1: whole rho, 0: stage 2

    def logpmf(truth):
        t = np.asarray(truth, dtype=np.float64)
        res = np.zeros(np.broadcast_shapes(t.shape, (n,)))
        if design.two_stage and adaptive.any():
            res += np.where(adaptive, first.log_between(lo - t, hi - t), 0.0)
        if total_published.any():
            v2 = second.logpmf(value - t)
            vw = whole.logpmf(value - t) if whole is not None else v2
            res += np.where(total_published, np.where(noise_of_total == 1, vw, v2), 0.0)
        if (~present).any():
            sup2 = second.log_between(-np.inf, (t_second if t_second is not None else np.inf) - t)
            supw = (
                whole.log_between(-np.inf, (t_whole if t_whole is not None else np.inf) - t)
                if whole is not None
                else sup2
            )
            res += np.where(~present, np.where(detailed_only, supw, sup2), 0.0)
        return res

    log_max = np.where(
        total_published, np.where(detailed_only, whole.log_p0 if whole else second.log_p0, second.log_p0), 0.0
    )
    variance = np.where(total_published, float(second.sigma2), float(second.sigma2) * 100)
    cells_frame = pd.DataFrame(
        {**({cell.geo: keys.get_level_values("geocode").to_numpy()} if geo_cols else {}), GROUP: group}
    )
    label = f"{td.name} {cell.geo} level{cell.level}"
    out = [
        CountLikelihood(
            query=ir.CountQuery(unit_table, (*geo_cols, GROUP)),
            cells=cells_frame,
            value=value,
            logpmf=logpmf,
            log_max=log_max,
            estimate=value.astype(float),
            variance=variance,
            description=(
                f"{label}: each group's published detail (the stage-1 interval its noisy total fell in), "
                "its total where published, and suppression where it is absent; discrete Gaussian noise"
            ),
        )
    ]
    for r, detail in enumerate(td.details):
        if not detail.variables:
            continue
        part = rows[(~is_total) & (rows["detail"] == detail.name)]
        if not len(part):
            continue
        v = part["count"].to_numpy(dtype=np.int64)

        def cells_logpmf(truth, v=v):
            return second.logpmf(v - np.asarray(truth, dtype=np.float64))

        frame = pd.DataFrame(
            {
                **({cell.geo: part["geocode"].to_numpy()} if geo_cols else {}),
                GROUP: part["group"].to_numpy(),
                **{x: part[x].to_numpy() for x in detail.variables},
            }
        )
        out.append(
            CountLikelihood(
                query=ir.CountQuery(unit_table, (*geo_cols, GROUP, *detail.variables)),
                cells=frame.reset_index(drop=True),
                value=v,
                logpmf=cells_logpmf,
                log_max=np.full(len(v), second.log_p0),
                estimate=v.astype(float),
                variance=np.full(len(v), float(second.sigma2)),
                description=f"{label} {detail.name}: value = true count + discrete Gaussian noise (sigma² {float(second.sigma2):.4g})",
            )
        )
    return out
