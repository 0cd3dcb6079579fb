"""The typed answer of `Mechanism.semantics` (API 1.7): the budget protecting each attribute and
each geography, as the 2020 certificates' "per-attribute semantics" state it.

The rhos are exact, in the mechanism's native flavor; `dpspec.budget.semantics` puts each in the
spec's flavor and in epsilon at delta. Written by `ir.to_jsonable`, each class is the dict it
replaces; `semantics_result` still reads that dict (API 1.6 and earlier), with a DeprecationWarning.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.contract.results import extra_field, wrong_answer, from_dict, warn_old_shape


@attrs.frozen
class AttributeQuery:
    """One measured query that spends an attribute's budget: its geography `level` and its name."""

    level: str
    query: str


@attrs.frozen
class AttributeBudget:
    """The budget protecting one `attribute`: `rho`, the sum over the `queries` that tell two of
    its values apart (`AttributeQuery`s); `tied_to`, the attributes a cross constraint ties to it
    (a neighbour changing one changes them too, so it spends their queries as well)."""

    attribute: str
    rho: Fraction
    queries: tuple = attrs.field(converter=tuple)
    tied_to: tuple[str, ...] = attrs.field(default=(), converter=tuple, metadata=ir.JSON_OPTIONAL)


@attrs.frozen
class GeographyBudget:
    """The budget protecting which `finest` unit a person is in within their unit of level
    `within` ("a block within its tract"): `rho`, spent by the measured `levels` below it."""

    within: str
    finest: str
    levels: tuple[str, ...] = attrs.field(converter=tuple)
    rho: Fraction


@attrs.frozen(kw_only=True)
class SemanticsRow:
    """One further row the reports print after the geographies (API 1.6), in the mechanism's own
    words: `rho`, spent by the measured `levels`, and its `description` (the core adds none);
    `extra`, its other keys, kept in the JSON before `levels`."""

    extra: dict = extra_field()
    levels: tuple[str, ...] = attrs.field(converter=tuple)
    rho: Fraction
    description: str


@attrs.frozen
class Semantics:
    """`Mechanism.semantics`'s answer: one `AttributeBudget` per attribute, one `GeographyBudget`
    per level above the finest (from the finest's parent up), and `further` rows by key
    ({key: SemanticsRow}), each kept under its key in `dpspec budget --json` and report.json."""

    attributes: tuple = attrs.field(converter=tuple)
    geographies: tuple = attrs.field(converter=tuple)
    further: dict = extra_field()


def _queries(queries) -> tuple:
    return tuple(
        AttributeQuery(q["level"], q["query"]) if isinstance(q, dict) and set(q) == {"level", "query"} else q
        for q in queries
    )


def semantics_result(value, mechanism) -> Semantics | None:
    """`Mechanism.semantics`'s answer as a `Semantics`; the dict of API 1.6 and earlier
    ({"attributes": [...], "geographies": [...], further key: row or None}) read with a warning."""
    if value is None or isinstance(value, Semantics):
        return value
    if not isinstance(value, dict):
        raise wrong_answer(mechanism, "semantics", value, "a dpspec.api.Semantics")
    warn_old_shape(
        mechanism, "semantics", "a dict", "dpspec.api.Semantics(attributes, geographies, further={key: SemanticsRow})"
    )
    attributes = []
    for a in value["attributes"]:
        a = from_dict(AttributeBudget, a, mechanism, "semantics") if isinstance(a, dict) else a
        attributes.append(attrs.evolve(a, queries=_queries(a.queries)))
    return Semantics(
        attributes,
        [
            from_dict(GeographyBudget, g, mechanism, "semantics") if isinstance(g, dict) else g
            for g in value["geographies"]
        ],
        {
            key: from_dict(SemanticsRow, row, mechanism, "semantics") if isinstance(row, dict) else row
            for key, row in value.items()
            if key not in ("attributes", "geographies") and row is not None
        },
    )
