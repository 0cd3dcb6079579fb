"""What the budget, report and internal utility sections show of a TopDown release: the allocation
and bypass rows, the guarantee's notes, the spine's facts and the accuracy against the confidential data."""

from __future__ import annotations

from fractions import Fraction

from dpspec.api import ir, discrete_gaussian_variance, effective_sigma2, LazyModule

from ..measurement.allocation import JOINT_MARK, query_name
from ..params.equal_to import _equalities
from ..params.tables import _joint, _levels, _query_key, _query_shares, _schema, _structural_zeros, _variables
from ..wording import counted

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_postprocess_only = LazyModule("dpspec_topdown.estimation.postprocess_only", "_postprocess_only", globals())
_spine = LazyModule("dpspec_topdown.geography.spine", "_spine", globals())

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())


def _guarantee_notes(spec: ir.Spec, params: dict) -> list[str]:
    """What a reviewer needs beside the figure: which records one unit's change covers (a joint
    table's), what the release repeats exactly (equality targets), which cells no dataset of the
    domain may fill (structural zeros) and which constraints are post-processing only."""
    notes = []
    table = params["table"]
    for j in _joint(spec, params):
        notes.append(
            f"the table '{j['table']}' is measured with the same rho beside '{table}' (its queries are in "
            f"the allocation): the budget covers a change of one '{table}' record together with one "
            f"'{j['table']}' record, such as a housing unit and the household living in it"
        )
    for e in _equalities(spec, params):
        notes.append(
            f"equal_to '{e['name']}': the release's {' * '.join(e['query'])} equals the public table "
            f"'{e['table']}' at every {e['finest']} (and so above it); that table's own budget, if it "
            "came from the same people, is not counted here"
        )
    zeros = [(table, list(_structural_zeros(params, _variables(spec, params), _schema(spec, params).recodes)))]
    zeros += [(j["table"], list(j["structural_zeros"])) for j in _joint(spec, params)]
    for name, sets in zeros:
        if sets:
            notes.append(
                f"structural zeros of '{name}': {len(sets)} cell set{'s' if len(sets) > 1 else ''} "
                f"({', '.join(sets[:3])}{', ...' if len(sets) > 3 else ''}) held at zero at every level; a "
                "dataset with a record in one is refused, so the guarantee covers only datasets without such "
                "records"
            )
    only = params.get("postprocess_only")  # with postprocess_heuristics: true, as check requires
    if only:
        notes.append(
            f"constraints {', '.join(only)} are not in the least-squares fits: they are enforced after "
            "them by moving records (post-processing of the noisy measurements and the invariants: "
            "no budget)"
        )
    return notes


def _query_labels(spec: ir.Spec, params: dict, alloc=None) -> dict:
    """{(level, canonical query): the query as the spec writes it}: a joint table's queries as
    'table: query' (any of ``alloc``'s not written so, by their factors)."""
    schema = _schema(spec, params)
    variables = list(schema.names)
    labels = {
        (lv, schema.canonical(_query_key(name, variables))): " * ".join(name.split("*"))
        for lv, shares in _query_shares(params).items()
        for name in shares
    }
    for j in _joint(spec, params):  # a joint table's queries as its own queries block writes them
        names = list(j["schema"].names)
        for lv, shares in _query_shares(j["params"], params["levels"]).items():
            for name in shares:
                key = (JOINT_MARK + j["name"], *j["schema"].canonical(_query_key(name, names)))
                labels[(lv, key)] = f"{j['name']}: " + " * ".join(w.strip() for w in name.split("*"))
    for qb in alloc.queries if alloc is not None else ():
        if qb.query[:1] and str(qb.query[0]).startswith(JOINT_MARK) and (qb.level, qb.query) not in labels:
            labels[(qb.level, qb.query)] = f"{qb.query[0][1:]}: {query_name(qb.query[1:])}"
    return labels


def _postprocess_notes(report: dict | None) -> tuple:
    """The run log's lines on the heuristic: the rows it could not repair."""
    if not report:
        return ()

    broken = report["violations"]
    if not broken:
        return (
            f"post-processing-only constraints: {counted(sum(report['moves'].values()), 'record')} moved; every row holds",
        )
    return (
        f"post-processing-only constraints: {counted(sum(report['moves'].values()), 'record')} moved; {counted(len(broken), 'row')} "
        "left broken in the release (facts: postprocess_only.violations)",
        *map(_postprocess_only.describe, broken[:20]),
    )


def _spine_facts(result) -> dict:
    """The spine the run measured on: per split level, its units and how many were split."""
    split = {
        lv.name: {"parts": lv.n_units, "units": len(set(lv.labels)), "split_units": lv.n_units - len(set(lv.labels))}
        for lv in result.hierarchy.levels
        if lv.labels is not None
    }
    out = {"split_spine": split} if split else {}
    if result.budget_classes:  # units per budget class: "0" spends the level's share, "bypassed" nothing
        out["bypass_spine"] = {
            level: {("bypassed" if c < 0 else str(int(c))): int(n) for c, n in zip(*np.unique(cls, return_counts=True))}
            for level, (cls, _, _) in result.budget_classes.items()
        }
    return out


def bypass_rows(alloc, levels: list[str], bypass: list[str], labels: dict) -> dict:
    """The optimized spine's budget classes: for every bypass level, a unit whose single-child
    chain reaches `through` spends the shares of its level down to that one (spine.py), each
    query at its own level's query share; its chain's units spend nothing. One row per (class,
    query) with exact fractions; the rows of class 0 are the allocation's own."""

    shares = [alloc.level_shares.get(lv, Fraction(0)) for lv in levels]
    rows = []
    for level in bypass:
        k = levels.index(level)
        depth = 0
        while k + depth + 1 < len(levels) and (depth == 0 or levels[k + depth] in bypass):
            depth += 1
            share = _spine.class_share(shares, k, depth)
            for q in alloc.for_level(level):
                rho_q = alloc.rho * share * q.share
                sigma2 = effective_sigma2(Fraction(q.sensitivity2) / (2 * rho_q))
                rows.append(
                    {
                        "level": level,
                        "through": levels[k + depth],
                        "class": depth,
                        "query": labels.get((q.level, q.query), q.name),
                        "level_share": str(share),
                        "rho": float(rho_q),
                        "rho_exact": str(rho_q),
                        "sigma2_exact": str(sigma2),
                        "variance": float(sigma2),
                        "noise_variance": discrete_gaussian_variance(sigma2),
                    }
                )
    return {
        "levels": list(bypass),
        "classes": rows,
        "note": "a bypassed unit (the single child) spends nothing; every block's geounits still spend rho",
    }


def allocation_rows(alloc, labels: dict | None = None) -> list[dict]:
    """level, query (as written, factors joined by ' * '), rho, variance (sigma², the noise
    parameter) and the exact fractions behind them, in level then declaration order."""

    labels = labels or {}
    return [
        {
            "level": q.level,
            "query": labels.get((q.level, q.query), q.name),
            "rho": float(q.rho),
            "variance": float(q.sigma2),
            "share": str(q.share),
            "rho_exact": str(q.rho),
            "sigma2_exact": str(q.sigma2),
            "noise_variance": discrete_gaussian_variance(q.sigma2),
        }
        for q in alloc.queries
    ]


def accuracy(spec, params, result) -> list[dict]:
    """Mean absolute error of every (level, query) table against the confidential data: over
    the cells either side has persons in, |confidential - protected| on average.

    From the run's confidential and protected histograms (sparse), so no person table is
    needed. Computed against the confidential data: internal report only."""
    schema = result.schema
    variables = list(params["variables"])
    queries = {"total": (), "detailed": tuple(variables)}
    for name, value in params["queries"].items():
        for query in value if isinstance(value, dict) else (name,):  # a level's block, or a query
            queries[query] = _query_key(query, variables)
    out = []
    for level in _levels(spec):
        for name, query in queries.items():
            indicator = schema.indicator(query)
            a = (result.confidential[level] @ indicator).tocsr()
            b = (result.histograms[level] @ indicator).tocsr()
            either = a + b  # counts are nonnegative: a + b is nonzero where either side is
            either.eliminate_zeros()
            cells = either.nnz
            diff = float(abs(a - b).sum())
            mae = diff / cells if cells else 0.0
            out.append({"level": level, "query": name, "mean_absolute_error": mae})
    return out
