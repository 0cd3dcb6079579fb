"""Production's facility constraints: bounds on persons per block implied by a second table.

The spec states them as

    constraints: { hhgq_total_lb_ub: { of: hhgq  table: facilities  type: gqtype
                                       occupied: [1, 2, 3, 4, 5, 6, 7] } }

For every finest unit (block) and category c of the histogram variable ``of``: no person in c
where the table lists no row of type c (no household persons without housing units, no
residents of a facility type the block does not have); and, for the ``occupied`` types (rows
that stand for occupied facilities), at least one person per row. ``sense: upper`` keeps only
the first kind (production's hhgq_total_ub), ``sense: lower`` only the second (hhgq_total_lb). Why an invariant is
required: the bounds are computed from the table's exact counts by block and type, so those
counts must be declared public (``count facilities by block, gqtype``) or the release would
leak them without saying so.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec.api import Diagnostic, SpecError, ir, LazyModule

from ..broken import Broken

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())


def _value(raw):
    if isinstance(raw, Fraction):
        return int(raw) if raw.denominator == 1 else raw
    return str(raw)


def facility_constraints(spec: ir.Spec, params: dict, variables: dict) -> list[dict]:
    """The declared constraints (their fields as the core resolved them), checked against the
    domain and the invariants: a SpecError whose diagnostics carry the path of what is wrong.

    variables: what `of` may name, with its categories: the histogram variables and the
    recodes (their group labels), so a bound may be stated on a recode."""
    block = params.get("constraints")
    if block is None:
        return []
    geo = spec.domain.geography
    finest = geo.levels[-1] if geo else None
    out = []
    for name, fields in block.items():
        at = ("constraints", name)
        of, table_name, type_col = fields["of"], fields["table"], fields["type"]
        if of not in variables:
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}' bounds '{of}', which is not a histogram "
                    f"variable or recode (known: {', '.join(variables)})",
                    path=(*at, "of"),
                )
            )
        table = spec.domain.table(table_name)
        if table_name == params["table"]:
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}' reads table '{table_name}', which is not a second table of the domain",
                    path=(*at, "table"),
                )
            )
        if finest is None or table.column(finest) is None or table.column(type_col) is None:
            where = "type" if finest is not None and table.column(finest) is not None else "table"
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}': table '{table_name}' needs columns "
                    f"'{finest}' (the finest level) and '{type_col}'",
                    path=(*at, where),
                )
            )
        cats = list(variables[of])
        by_text = {str(c): c for c in cats}
        occupied = [by_text.get(str(v), v) for v in map(_value, fields["occupied"] or ())]
        bad = [i for i, v in enumerate(occupied) if v not in cats]
        if bad:
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}': occupied {[occupied[i] for i in bad]} are not categories "
                    f"of '{of}' ({cats})",
                    path=(*at, "occupied", bad[0]),
                )
            )
        sense = fields["sense"] or "both"
        if sense == "upper" and fields["occupied"] is not None:  # the occupied rows only set lower bounds
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}': occupied sets the lower bounds, which sense: upper "
                    "leaves out; remove it or the sense",
                    path=(*at, "occupied"),
                )
            )
        if sense == "lower" and not occupied:  # no lower bound at all: the constraint would bound nothing
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}': sense: lower keeps only the lower bounds, which "
                    "come from the occupied types; list them (occupied: [...])",
                    path=(*at, "sense"),
                )
            )
        declared = any(q.table == table_name and set(q.columns) == {finest, type_col} for q in spec.invariants)
        if not declared:
            raise SpecError(
                Diagnostic(
                    f"constraints: '{name}' uses the counts of '{table_name}' by {finest} and {type_col}; "
                    f"declare them public: invariants {{ count {table_name} by {finest}, {type_col} }}",
                    path=at,
                )
            )
        out.append(
            {
                "name": name,
                "of": of,
                "table": table_name,
                "type": type_col,
                "occupied": occupied,
                "finest": finest,
                "sense": sense,
            }
        )
    return out


def facility_bounds(constraint: dict, frame, categories) -> tuple:
    """(lower, upper) DataFrames indexed by finest-unit code, one column per category, from the
    facilities table itself (see `facility_bounds_from_counts`)."""
    by = [constraint["finest"], constraint["type"]]
    counts = frame.groupby(by, observed=True, dropna=False, sort=True).size().rename("count").reset_index()
    return facility_bounds_from_counts(constraint, counts, categories)


def facility_bounds_from_counts(constraint: dict, counts, categories) -> tuple:
    """(lower, upper) DataFrames indexed by finest-unit code, one column per category.

    ``counts`` is the facilities table counted by finest unit and type (a ``count`` column:
    the engine counts it, so the table itself need not reach this process); a type that is not
    a category of the variable is a DataError naming it."""
    finest, type_col = constraint["finest"], constraint["type"]
    types = counts[type_col]
    by_text = {str(c): c for c in categories}
    mapped = types.map(lambda v: by_text.get(str(v)))
    if mapped.isna().any():
        row = int(np.flatnonzero(mapped.isna().to_numpy())[0])
        rows = int(counts["count"].to_numpy()[mapped.isna().to_numpy()].sum())
        raise Broken(
            f"constraint {constraint['name']!r}: table {constraint['table']!r}: "
            f"{type_col} = {types.iloc[row]!s} is not a category of {constraint['of']!r} "
            f"({rows} rows hold such values)",
            ("constraints", constraint["name"]),
        )
    codes = counts[finest].astype(str).to_numpy()
    column = pd.Index(list(categories), dtype=object).get_indexer(mapped.to_numpy(dtype=object))
    index = pd.Index(sorted(set(codes)), name=finest)
    table = np.zeros((len(index), len(categories)), dtype=np.int64)
    np.add.at(table, (index.get_indexer(codes), column), counts["count"].to_numpy(dtype=np.int64))
    tally = pd.DataFrame(table, index=index, columns=pd.Index(list(categories)))
    occupied = np.isin(np.asarray(categories, dtype=object), np.asarray(constraint["occupied"], dtype=object))
    lower = tally * occupied.astype(np.int64)
    upper = tally.where(tally == 0, np.inf).astype(np.float64)
    if constraint.get("sense") == "lower":  # production's hhgq_total_lb alone
        upper[:] = np.inf
    elif constraint.get("sense") == "upper":  # hhgq_total_ub alone
        lower[:] = 0
    return lower, upper
