"""Per-attribute and per-geography budgets, in epsilon at delta as the 2020 certificates print them.

A mechanism with attribute structure (TopDown) states, through its optional `semantics` hook,
the zCDP rho that protects each attribute and each geography (see
plugins/dpspec_topdown/semantics.py). This module puts each rho in the spec's flavor, as the
total is, and converts it to (epsilon, delta) with the bound the Census Bureau's P.L. 94-171
production certificates use: Canonne, Kamath & Steinke (2020), Corollary 13, at delta = 1e-10
unless asked otherwise. The certificates' "Per-attribute semantics" tables are these numbers.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec import ir
from dpspec.budget import ZCDP, convert
from dpspec.budget.premetrics import json_number
from dpspec.errors import SpecError
from dpspec.budget.ledger import to_spec_flavor
from dpspec.contract.semantics import Semantics, semantics_result

CONVERSION = "cks20"
SEED_SECTION = (
    "Bailie, Gong & Meng, Can swapping be differentially private?, Part III §4.2 "
    "(per-attribute privacy loss: a neighbour differing in one attribute only)"
)


def no_semantics(spec: ir.Spec, mechanism_name: str) -> SpecError:
    """The refusal of a per-attribute request for a mechanism without attribute structure."""
    return SpecError(
        f"mechanism '{mechanism_name}' has no attribute structure: per-attribute and per-geography "
        "budgets are defined for mechanisms that measure queries over the attributes of a histogram "
        "(topdown); its budget protects the whole record only",
        spec.path,
        spec.text,
    )


def _epsilon(spec: ir.Spec, flavor, rho: Fraction, delta):
    """(budget in the spec's flavor as JSON, epsilon at delta or None): exact, epsilon a
    certified upper bound."""

    value, _ = to_spec_flavor(spec, flavor, ZCDP(rho))
    if value.kind == "zcdp":
        eps = convert(value, "approx", delta=delta, method=CONVERSION).result.epsilon if value.rho > 0 else 0.0
    elif value.kind == "approx" and value.delta == delta:
        eps = value.epsilon
    else:
        eps = None
    return value.to_json(), (json_number(eps) if eps is not None else None)


def stated_semantics(spec: ir.Spec, checked) -> Semantics | None:
    """The checked mechanism's `semantics`, typed (an older plugin's dict read with a warning)."""
    return semantics_result(checked.mechanism.semantics(spec, checked.params), checked.mechanism)


def _figures(spec, flavor, rho, delta: float) -> dict:
    """A row's rho as the JSON writes it: the float, exact, in the spec's flavor, epsilon at delta."""
    rho = Fraction(rho)
    in_flavor, eps = _epsilon(spec, flavor, rho, delta)
    return {
        "rho": json_number(float(rho)),
        "rho_exact": ir.format_number(rho),
        "in_spec_flavor": in_flavor,
        "epsilon": eps,
    }


def _attribute(spec, flavor, a, delta: float) -> dict:
    tied = {"tied_to": list(a.tied_to)} if a.tied_to else {}
    return {
        "attribute": a.attribute,
        "queries": ir.to_jsonable(a.queries),
        **tied,
        **_figures(spec, flavor, a.rho, delta),
    }


def _geography(spec, flavor, g, delta: float) -> dict:
    return {
        "within": g.within,
        "finest": g.finest,
        "levels": list(g.levels),
        **_figures(spec, flavor, g.rho, delta),
        "description": describe_geography(g),
    }


def describe_geography(g) -> str:
    """'a block within its tract', '... within the nation' for the root."""
    where = "the nation" if g.within == "nation" else f"its {g.within}"
    return f"a {g.finest} within {where}"


def further_rows(sem: dict) -> list[dict]:
    """The rows a mechanism adds after its geographies (every mapping among `sem`'s values), in
    the order it gave them: the core knows their keys and words only as data."""
    return [v for v in sem.values() if isinstance(v, dict)]


def _further(spec, flavor, row, delta: float) -> dict:
    """A further row in the spec's flavor: its own keys, its levels, the figures, its description."""
    return {
        **row.extra,
        "levels": list(row.levels),
        **_figures(spec, flavor, row.rho, delta),
        "description": row.description,
    }


def semantics_json(spec: ir.Spec, flavor, sem: Semantics, delta: float) -> dict:
    """The `semantics` key of `dpspec budget --json` (additive). Each of the mechanism's further
    rows (`rho`, `levels`, `description`: its words) is kept under its key."""
    out = {
        "delta": json_number(delta),
        "conversion": CONVERSION,
        "cited": SEED_SECTION,
        "attributes": [_attribute(spec, flavor, a, delta) for a in sem.attributes],
        "geographies": [_geography(spec, flavor, g, delta) for g in sem.geographies],
    }
    for key, row in sem.further.items():
        out[key] = _further(spec, flavor, row, delta)
    return out


def semantics_text(sem: dict) -> list[str]:
    lines = [
        f"per-attribute and per-geography budgets (epsilon at delta = {sem['delta']:g} by {sem['conversion']}, "
        "as the 2020 certificates print them; cf. the first seed paper, Part III §4.2):"
    ]
    for a in sem["attributes"]:
        shown = f"epsilon = {a['epsilon']:.2f}" if a["epsilon"] is not None else "epsilon undefined"
        tied = f" (with {', '.join(a['tied_to'])}, tied to it by a cross constraint)" if a.get("tied_to") else ""
        lines.append(
            f"  attribute {a['attribute']}{tied}: rho = {a['rho']:.4f}, {shown}  ({len(a['queries'])} queries involve it)"
        )
    for g in [*sem["geographies"], *further_rows(sem)]:
        shown = f"epsilon = {g['epsilon']:.2f}" if g["epsilon"] is not None else "epsilon undefined"
        lines.append(
            f"  {g['description']}: rho = {g['rho']:.4f}, {shown}  (levels {', '.join(g['levels']) or 'none'})"
        )
    return lines
