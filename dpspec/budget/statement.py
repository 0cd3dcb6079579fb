"""What a mechanism achieves: a budget that may depend on the universe, and what it is
conditioned on.

Swapping's eps_D is a function of b, the largest stratum size, which the invariants fix: the
budget differs between universes. A statement therefore keeps the actual universe's value, the
worst case over the universes the spec admits (when finite), and the public facts the value is
a function of. Public information (released elsewhere without noise) costs no budget, but the
guarantee is conditioned on it, so it is listed next to the figure.
"""

from __future__ import annotations

import attrs

from dpspec import ir

from .conversions import Conversion, convert
from .premetrics import Budget, budget_from_params


def _budget(value):
    return budget_from_params(value)


def _optional_budget(value):
    return None if value is None else budget_from_params(value)


@attrs.frozen
class PublicCondition:
    """Public information the guarantee is conditioned on (it costs no budget)."""

    description: str
    source: str | None = None

    def to_json(self) -> dict:
        return {"description": self.description, "source": self.source}

    def __str__(self) -> str:
        return f"{self.description} ({self.source})" if self.source else self.description


@attrs.frozen
class BudgetStatement:
    """The budget a mechanism achieves under its native flavor.

    actual: the value for the actual universe. worst: the worst case over the admitted
    universes, or None when it is infinite or unknown. per_universe: the value differs between
    universes. depends_on: the public facts the value is a function of (e.g. {'b': 264331})."""

    actual: Budget = attrs.field(converter=_budget)
    worst: Budget | None = attrs.field(default=None, converter=_optional_budget)
    per_universe: bool = False
    depends_on: dict = attrs.field(factory=dict, converter=dict, hash=False)
    notes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    public: tuple[PublicCondition, ...] = attrs.field(default=(), converter=tuple)
    # the budget's parts, exact (e.g. one per geography level and stage); each a dict with at
    # least `rho` (or `epsilon`) and labels; shown by `dpspec budget` next to the total
    components: tuple = attrs.field(default=(), converter=tuple, hash=False)

    @classmethod
    def fixed(cls, budget, *notes: str) -> "BudgetStatement":
        """A budget that is the same in every universe (worst = actual)."""
        b = budget_from_params(budget)
        return cls(actual=b, worst=b, per_universe=False, notes=notes)

    @property
    def kind(self) -> str:
        return self.actual.kind

    @property
    def worst_case(self) -> Budget | None:
        """The worst case to compose: `worst`, or `actual` when the budget is not per-universe."""
        if self.worst is not None or self.per_universe:
            return self.worst
        return self.actual

    def convert(self, to: str, **kwargs) -> tuple["BudgetStatement", Conversion, Conversion | None]:
        """The statement in another premetric (actual and worst converted by the same rule)."""
        c_actual = convert(self.actual, to, **kwargs)
        c_worst = convert(self.worst, to, **kwargs) if self.worst is not None else None
        stmt = attrs.evolve(self, actual=c_actual.result, worst=None if c_worst is None else c_worst.result)
        return stmt, c_actual, c_worst

    def map(self, fn) -> "BudgetStatement":
        """Apply a budget -> Conversion rule (a unit change, a group) to actual and worst."""
        worst = None if self.worst is None else fn(self.worst).result
        return attrs.evolve(self, actual=fn(self.actual).result, worst=worst)

    def to_json(self) -> dict:
        return {
            "actual": self.actual.to_json(),
            "worst": None if self.worst is None else self.worst.to_json(),
            "per_universe": self.per_universe,
            "depends_on": ir.to_jsonable(self.depends_on, fractions="float", coerce=True),
            "notes": list(self.notes),
            "public": [p.to_json() for p in self.public],
            "components": ir.to_jsonable(list(self.components), fractions="float", coerce=True),
        }

    def __str__(self) -> str:
        text = str(self.actual)
        if self.per_universe:
            text += " in the actual universe"
            text += f"; worst case {self.worst}" if self.worst is not None else "; no finite worst case"
        return text
