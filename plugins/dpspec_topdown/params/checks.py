"""What  decides from the spec beyond each setting alone: the sampler's reach, invariants a
split spine cannot keep or that do not nest, and a message placed at the setting it names."""
from __future__ import annotations


from dpspec.api import Diagnostic, SpecError, ir
from .locate import at
from .spine import _split_levels
from .tables import _invariants, _schema


def _at_setting(spec: ir.Spec, d: Diagnostic) -> Diagnostic:
    """A diagnostic without a line, placed at the mechanism setting its message starts with
    ("failsafe: ...", "joint: ..."), so a reviewer is sent to the setting, not the mechanism line."""
    if d.line is not None or spec.mechanism is None:
        return d
    name = d.message.split(":", 1)[0].split(" ", 1)[0]
    p = spec.mechanism.params.get(name)
    return Diagnostic(d.message, p.loc.line, p.loc.column) if p is not None and p.loc else d


def _split_invariant_problems(spec: ir.Spec, params: dict, spine: dict) -> list:
    """Invariants a split spine cannot keep: at a split level below the first (engine's
    _check_split_invariants, here located at the invariant)."""
    split = _split_levels(spec, spine)
    if not split:
        return []
    geo = list(spec.domain.geography.levels)
    out = []
    for q in spec.invariants:
        if q.table == params["table"] and set(split[1:]) & set(q.columns):
            out.append(Diagnostic(f"with a split spine, TopDown keeps '{q.describe()}' only at {split[0]} (on the sum "
                                  f"of its parts) or at {geo[-1]}", *((q.loc.line, q.loc.column) if q.loc else (None, None))))
    return out


def _unnested_invariant_problems(spec: ir.Spec, params: dict) -> list:
    """The invariants on `params`' table whose query does not nest with an earlier one's, at the
    later invariant's line (the engine's chain rule, invariant_chain.py, decided here from the spec)."""
    from ..estimation.invariant_chain import unnested, why

    schema = _schema(spec, params)
    written = {}  # canonical query: the first invariant writing it
    for _, query, q in _invariants(spec, params)[0]:
        try:
            written.setdefault(schema.canonical(query), q)
        except SpecError:  # a query it cannot keep is reported where the engine meets it
            continue
    queries = list(written)
    pair = unnested(queries)
    if pair is None:
        return []
    earlier, later = queries[pair[0]], queries[pair[1]]
    first, q = written[earlier], written[later]
    line = f" (line {first.loc.line})" if first.loc else ""
    return [Diagnostic(f"invariants: '{q.describe()}' does not nest with '{first.describe()}'{line}: "
                       + why(earlier, later, schema), *((q.loc.line, q.loc.column) if q.loc else (None, None)))]


def _sampler_problems(spec, params, alloc) -> list[Diagnostic]:
    """The query with the most noise, when its sigma² is beyond what the exact sampler draws: refused
    at `check`, at the rho line, in the sampler's words (sigma² grows as 1/rho)."""
    from dpspec.api import sampler_limit_problem

    if not alloc.queries:
        return []
    widest = max(alloc.queries, key=lambda q: q.sigma2)
    problem = sampler_limit_problem("discrete_gaussian", widest.sigma2, ("rho", params["rho"]))
    if problem is None:
        return []
    return [Diagnostic(f"topdown: the noise of query '{widest.name}' at level '{widest.level}' cannot be drawn: {problem}",
                       *at(spec.mechanism.params.get("rho")))]
