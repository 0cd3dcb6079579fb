"""zCDP budget allocation for TopDown: total rho -> levels -> queries -> noise variances.

Why exact fractions: the allocation is what a custodian publishes and an auditor re-derives;
shares that "sum to about 1" silently spend more (or less) than declared, so shares must sum to
exactly 1 and every derived number is a Fraction.

Accounting: each person is in exactly one unit per geographic level, so the queries of one
level compose in parallel over its units; levels and queries compose sequentially, so the
total is the sum of the per-query rho_q = rho · level share · query share, which is rho.
A marginal query of the person histogram has L2 sensitivity s with s² = 1 when neighbours add
or remove one person ("symdiff") and s² = 2 when they change one person ("hamming": one cell
loses a person and another gains one). The discrete Gaussian with sigma² = s² / (2 rho_q)
is rho_q-zCDP for that query.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Mapping

import attrs

from dpspec.api import Diagnostic, SpecError, as_fraction, effective_sigma2

SENSITIVITY_SQUARED = {"symdiff": 1, "hamming": 2}

Query = tuple  # a marginal: tuple of histogram variable names; () is the total
JOINT_MARK = "@"  # a joint table's queries in a shared allocation: ("@NAME", *factors)


@attrs.frozen
class QueryBudget:
    """One measured query at one level with its budget and noise parameter."""

    level: str
    query: tuple
    share: Fraction  # of the level's budget
    rho: Fraction
    sigma2: Fraction  # the sampler's parameter (possibly rounded up, see noise.effective_sigma2)
    sensitivity2: int

    @property
    def name(self) -> str:
        return query_name(self.query)

    @property
    def rho_spent(self) -> Fraction:
        """s² / (2 sigma²): equals rho unless sigma² was rounded up (then slightly less)."""
        return Fraction(self.sensitivity2) / (2 * self.sigma2)


@attrs.frozen
class Allocation:
    """The whole allocation; ``total_rho`` is what the run spends under the declared relation."""

    rho: Fraction
    relation: str
    level_shares: dict
    queries: tuple  # of QueryBudget, in level then declaration order

    @property
    def total_rho(self) -> Fraction:
        """The declared spend: the sum of the per-query rho_q (equal to rho)."""
        return sum((q.rho for q in self.queries), Fraction(0))

    @property
    def rho_spent(self) -> Fraction:
        """What the noise really costs: <= total_rho, below it only where sigma² was rounded up."""
        return sum((q.rho_spent for q in self.queries), Fraction(0))

    def for_level(self, level: str) -> list[QueryBudget]:
        return [q for q in self.queries if q.level == level]


def query_name(query: Iterable[str]) -> str:
    """Readable query name: 'total' for (), else the variables joined by ' * '."""
    query = tuple(query)
    return "total" if not query else " * ".join(query)


def sensitivity_squared(relation: str) -> int:
    """s² of a person-histogram marginal under the neighbour relation."""
    try:
        return SENSITIVITY_SQUARED[relation]
    except KeyError:
        raise SpecError(
            f"unknown neighbour relation {relation!r}: expected 'symdiff' (add/remove one person) "
            "or 'hamming' (change one person)"
        ) from None


def check_shares(shares: Mapping, what: str, names: Mapping | None = None, path: tuple = ()) -> dict:
    """Shares as exact positive Fractions summing to exactly 1, or a SpecError naming them (by
    ``names`` {key: as the spec writes it} when given), its diagnostic carrying `path`."""

    def refused(message):
        return SpecError(Diagnostic(f"{what}: {message}", path=path))

    if not shares:
        raise refused("no shares given")
    out = {}
    for key, value in shares.items():
        try:
            frac = as_fraction(value)
        except (TypeError, ValueError, ZeroDivisionError):
            raise refused(f"share {value!r} for {_label(key, names)} is not a number") from None
        if frac <= 0:
            raise refused(f"share for {_label(key, names)} must be positive, got {frac}")
        out[key] = frac
    total = sum(out.values(), Fraction(0))
    if total != 1:
        listed = ", ".join(f"{_label(k, names)}={v}" for k, v in out.items())
        raise refused(f"shares must sum to exactly 1, but {listed} sum to {total} (= {float(total):.6g})")
    return out


def _label(key, names: Mapping | None = None) -> str:
    """A query as the spec writes it; a joint table's ("@NAME", *factors) as "NAME: factors"."""
    if names and key in names:
        return names[key]
    if isinstance(key, tuple) and key and str(key[0]).startswith(JOINT_MARK):
        return f"{str(key[0])[len(JOINT_MARK) :]}: {query_name(key[1:])}"
    return query_name(key) if isinstance(key, tuple) else str(key)


def allocate(
    rho, level_shares: Mapping[str, object], strategy: Mapping[str, list], relation: str, names: Mapping | None = None
) -> Allocation:
    """Split rho over levels and queries; sigma² = s² / (2 rho_q) for every query.

    ``strategy`` maps each measured level to ``[(query, share), ...]``. Levels absent from
    ``level_shares`` are not measured (the implicit root, typically). ``names`` {(level, query):
    as the spec writes it} names the queries in errors. An error's diagnostic carries the path of
    the setting it is about as TopDown's spec writes it: ("rho",), ("levels",) for the level
    shares, ("queries", LEVEL) for a level's query shares (the queries block itself when one
    block serves every level: the core's locating stops at the deepest part written).
    """

    rho = as_fraction(rho)
    if rho <= 0:
        raise SpecError(Diagnostic(f"the zCDP budget rho must be positive, got {rho}", path=("rho",)))
    s2 = sensitivity_squared(relation)
    levels = check_shares(dict(level_shares), "level budget shares", path=("levels",))
    missing = [lv for lv in levels if lv not in strategy]
    extra = [lv for lv in strategy if lv not in levels]
    if missing or extra:
        raise SpecError(
            "the strategy and the level shares must name the same levels: "
            + (f"no queries for {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"queries but no budget share for {extra}" if extra else "")
        )
    queries = []
    for level, lshare in levels.items():
        entries = list(strategy[level])
        keys = [tuple(q) for q, _ in entries]
        if len(set(keys)) != len(keys):
            raise SpecError(
                Diagnostic(f"query shares at level {level!r}: a query is listed twice", path=("queries", level))
            )
        qshares = check_shares(
            {tuple(q): s for q, s in entries},
            f"query shares at level {level!r}",
            {q: n for (lv, q), n in (names or {}).items() if lv == level},
            path=("queries", level),
        )
        for query, qshare in qshares.items():
            rho_q = rho * lshare * qshare
            sigma2 = effective_sigma2(Fraction(s2) / (2 * rho_q))
            queries.append(QueryBudget(level, query, qshare, rho_q, sigma2, s2))
    return Allocation(rho=rho, relation=relation, level_shares=levels, queries=tuple(queries))


def split_allocation(alloc: Allocation, joint_name: str | None) -> tuple:
    """(the main table's allocation, the joint table's with its mark stripped, or None)."""
    if joint_name is None:
        return alloc, None
    mark = JOINT_MARK + joint_name
    main = [q for q in alloc.queries if q.query[:1] != (mark,)]
    other = [attrs.evolve(q, query=q.query[1:]) for q in alloc.queries if q.query[:1] == (mark,)]
    return attrs.evolve(alloc, queries=tuple(main)), attrs.evolve(alloc, queries=tuple(other))


def _is_joint_key(query: tuple) -> bool:
    return bool(query) and str(query[0]).startswith(JOINT_MARK)


def _only_queries(alloc, queries):
    return attrs.evolve(alloc, queries=tuple(queries))
