"""Invariants on a recode of a histogram variable: `count units by block, gqhh_vect`.

Why: production holds the units' `gqhh_vect` invariant per block (housing units as one group,
each of the 24 GQ types its own, das_decennial tenvacgq.py:240-280, invariantsmaker.py:33), a
recode of the unit variable `tenvacgq`, not the variable itself (the tenures and vacancy
statuses are noisy). The language's invariants name table columns, so the table carries the
recode as a column of the same name as the mechanism's recode; the engine keeps the recode's
marginal exact, and this module checks that the two agree: the column's categories are the
recode's labels (a SpecError at the invariant) and every record's column value is the recode of
its variable (a DataError naming the block and the values).
"""

from __future__ import annotations

from dpspec.api import Diagnostic, shown

from ..broken import Broken
from ..wording import counted


def recode_invariant_problems(q, column: str, categories: list, recode) -> list:
    """Diagnostics (at the invariant) when `column`'s declared categories are not `recode`'s labels."""
    declared = [str(c) for c in categories]
    labels = [str(lb) for lb in recode.labels]
    if sorted(declared) == sorted(labels):
        return []
    missing, extra = sorted(set(labels) - set(declared)), sorted(set(declared) - set(labels))
    what = "; ".join(
        part
        for part in (
            f"lacks {', '.join(missing)}" if missing else "",
            f"has {', '.join(extra)} besides" if extra else "",
        )
        if part
    )
    return [
        Diagnostic(
            f"the invariant '{q.describe()}' keeps the recode '{recode.name}' of '{recode.variable}' exact, "
            f"so column '{column}' must take exactly its group labels ({', '.join(labels)}); it {what}",
            *((q.loc.line, q.loc.column) if q.loc else (None, None)),
        )
    ]


def check_recode_column(counts, finest: str, column: str, recode, categories: list, table: str) -> None:
    """`counts`: the table counted by (finest, recode.variable, column); `categories`: the
    variable's. A record whose column is not the recode of its variable is a DataError naming the
    block and both values."""
    label_of = {str(c): str(recode.labels[g]) for c, g in zip(categories, recode.group_of)}
    expected = counts[recode.variable].astype(str).map(label_of)
    wrong = expected.to_numpy() != counts[column].astype(str).to_numpy()
    if wrong.any():
        row = counts[wrong].iloc[0]
        raise Broken(
            f"table {table!r}: {counted(counts.loc[wrong, 'count'].sum(), 'record')} with {column} different from "
            f"the recode '{recode.name}' of {recode.variable}, e.g. in {finest} {shown(row[finest])} "
            f"{recode.variable} = {shown(row[recode.variable])} has {column} = {shown(row[column])}, "
            f"not {shown(expected[wrong].iloc[0])}",
            ("recode_column", table, column),
        )
