"""What `dpspec check` can decide about an equality target (equal_to) from the spec alone.

Why here and not in equality.py: the target's counts are data (the released product, read at
run time), and whether they agree with an invariant's totals depends on the confidential data
too, so those disagreements stay DataErrors (equality.check_against). Two things do not depend
on any data and are SpecErrors at the equal_to entry:

- the product's columns cannot state the marginal: a factor's column in the product's table
  takes values that are not the factor's groups (a category of the variable, or a recode's
  label), or lacks some of them (the product could not report that group). A column declared as
  an open `category` is only checked when the run reads it.
- the marginal crosses an invariant: TopDown holds both at every child of every node, and when a
  group of one shares persons with a group of the other without either holding the other, a
  parent that keeps both may have no split into its children (the reason TopDown needs its
  invariants nested, engine._canonical_invariants). An invariant at the root level is held by
  one unit only, never split, and may cross.

No import of numpy or pandas: `dpspec check` runs on every keystroke in an editor.
"""

from __future__ import annotations

from dpspec.api import Diagnostic, SpecError, ir

from ..measurement.histogram import crossing_groups
from .locate import inside


def check_target(spec: ir.Spec, name: str, table_name: str, query: tuple, schema, invariants, root: str) -> None:
    """SpecError at the equal_to entry `name` when its product's columns cannot state `query`, or
    `query` crosses an invariant (`invariants`: (level, query, ir query) on the mechanism's table)."""
    for factor in query:
        problem = _column_problem(spec, table_name, factor, schema)
        if problem:
            raise SpecError(
                Diagnostic(f"equal_to: '{name}': {problem}", *inside(spec, ("equal_to", name, "query"), factor))
            )
    for level, inv_query, q in invariants:
        if level == root:
            continue
        try:
            crossing = crossing_groups(schema, query, inv_query)
        except SpecError:  # a factor the invariant cannot name: the invariant's own error
            continue
        if crossing is None:
            continue
        mine, theirs = crossing
        written = f" (line {q.loc.line})" if q.loc else ""
        factor = mine.partition("=")[0]
        raise SpecError(
            Diagnostic(
                f"equal_to: '{name}': its groups cross those of the invariant '{q.describe()}'{written}: {mine} of the "
                f"target and {theirs} of the invariant share persons and neither holds the other. TopDown keeps both "
                "at every child of a node, and a parent that keeps both may then have no split into its children; hold "
                "the release to a product whose groups nest with every invariant's (each within a group of the other, "
                "or apart from it), as the invariants nest with each other",
                *inside(spec, ("equal_to", name, "query"), factor if factor in query else None),
            )
        )


def _column_problem(spec: ir.Spec, table_name: str, factor: str, schema) -> str | None:
    """Why the product's column `factor` cannot state the factor's groups, or None."""
    column = spec.domain.table(table_name).column(factor)
    kind = column.type.kind
    if kind == "enum":
        declared = [str(v) for v in column.type.values]
    elif kind == "bool":
        declared = [str(False), str(True)]
    elif kind == "int":
        declared = [str(v) for v in range(column.type.low, column.type.high + 1)]
    else:  # an open category: its values are matched when the run reads them
        return None
    axis, mapping, _ = schema._factor(factor)
    groups = (
        [str(c) for c in schema.categories[axis]]
        if mapping is None
        else [str(lb) for lb in next(r.labels for r in schema.recodes if r.name == factor)]
    )
    if sorted(declared) == sorted(groups):
        return None
    missing = [g for g in groups if g not in declared]
    extra = [v for v in declared if v not in groups]
    what = "; ".join(
        part
        for part in (
            f"it lacks {', '.join(missing)}" if missing else "",
            f"it has {', '.join(extra)} besides" if extra else "",
        )
        if part
    )
    kind_of = "categories" if mapping is None else "group labels"
    line = f" (declared at line {column.loc.line})" if column.loc else ""
    listed = (
        ", ".join(groups) if len(groups) <= 12 else f"{', '.join(groups[:3])}, ..., {groups[-1]}: {len(groups)} in all"
    )
    return (
        f"column '{factor}' of '{table_name}'{line} must take exactly the {kind_of} of '{factor}' "
        f"({listed}), the groups the release's marginal has; {what}"
    )
