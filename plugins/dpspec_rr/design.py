"""Randomized response's design: the spec's parameters read once into a frozen object."""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec.api import Diagnostic

MAX_DENOMINATOR = 1 << 62


def problems(spec, params) -> list:
    """What `check` reports: a missing or non-binary column, an unknown 'yes' value, a p the
    exact sampler cannot draw. `Design.parse` assumes none of these."""
    found = []
    table = spec.domain.table(params["table"])
    col = table.column(params["column"])
    if col is None:
        return [Diagnostic(f"table '{table.name}' has no column '{params['column']}'")]
    if col.type.kind not in ("bool", "enum") or (col.type.kind == "enum" and len(col.type.values) != 2):
        found.append(
            Diagnostic(
                f"column '{col.name}' must be binary (bool, or a set of exactly two values) for randomized response"
            )
        )
    elif params.get("positive") is not None:
        allowed = ("true", "false") if col.type.kind == "bool" else col.type.values
        if params["positive"] not in allowed:
            found.append(Diagnostic(f"positive value '{params['positive']}' is not one of {', '.join(allowed)}"))
    p = params["p"]
    if p.denominator > MAX_DENOMINATOR:
        found.append(Diagnostic(f"p = {p} has too large a denominator for the exact sampler (at most 2^62)"))
    return found


@attrs.frozen
class Design:
    """One binary column of one table, answered truthfully with probability p.

    `positive` is the value counted as 'yes' (a bool for a bool column, else one of the two
    declared values); `negative` is the other one."""

    table: str
    column: str
    kind: str  # "bool" or "enum"
    values: tuple  # the column's declared values (empty for bool)
    p: Fraction
    positive: object
    negative: object

    @classmethod
    def parse(cls, spec, params) -> "Design":
        col = spec.domain.table(params["table"]).column(params["column"])
        if col.type.kind == "bool":
            positive = params.get("positive", "true") != "false"
            negative = not positive
            values = ()
        else:
            values = tuple(col.type.values)
            positive = params.get("positive") or values[0]
            negative = next(v for v in values if v != positive)
        return cls(params["table"], params["column"], col.type.kind, values, Fraction(params["p"]), positive, negative)

    @property
    def allowed_answers(self) -> set:
        """The strings a released answer may be (what `release_columns` checks)."""
        return {"True", "False", "true", "false"} if self.kind == "bool" else {str(v) for v in self.values}
