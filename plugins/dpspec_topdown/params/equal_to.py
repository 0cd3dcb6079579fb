"""The `equal_to` setting read and checked: marginals held equal to a product already released."""

from __future__ import annotations

from dpspec.api import Diagnostic, SpecError, ir, LazyModule

from .locate import inside
from .passes import _query_words
from .tables import _invariants, ROOT, _schema

# imported on first use: `dpspec --help` loads this module, not them
# array code: loaded when a spec has equal_to, not at every start
_equality_check = LazyModule("dpspec_topdown.params.equality_check", "_equality_check", globals())


def _equalities(spec: ir.Spec, params: dict) -> list[dict]:
    """``equal_to: { NAME: { table: T  query: "hhgq * votingage" } }``: the release's marginal
    `query` (factors: variables or recodes) must reproduce T, an already released product
    (equality.py). T is a table of the domain with the finest level and one column per factor,
    and it must be declared public (`public { count T by block, hhgq, votingage released "..." }`):
    the guarantee is then stated as conditioned on it. What the spec alone decides about the
    target (its columns, its groups against the invariants') is a SpecError (equality_check.py)."""

    block = params.get("equal_to")
    if not block:
        return []
    geo = spec.domain.geography.levels if spec.domain.geography else []
    finest = geo[-1] if geo else None
    schema = _schema(spec, params)
    known = [*schema.names, *(r.name for r in schema.recodes)]
    out = []
    for name, fields in block.items():
        at = ("equal_to", name)
        table_name = fields["table"]
        words = _query_words(fields["query"], list(schema.names))
        try:
            query = schema.canonical(words)
        except SpecError as exc:  # at the first factor that is not a variable or recode, else the query
            bad = next((w for w in words if w not in known), None)
            raise SpecError(
                [
                    Diagnostic(f"equal_to: '{name}': {d.message}", *inside(spec, (*at, "query"), bad))
                    for d in exc.diagnostics
                ]
            ) from None
        table = spec.domain.table(table_name)
        need = [finest, *query]
        lacking = [c for c in need if table is not None and table.column(c) is None]
        if table is None or table_name == params["table"] or lacking:
            why = (
                f" ('{table_name}' has no column {', '.join(lacking)})"
                if lacking and table_name != params["table"]
                else ""
            )
            raise SpecError(
                Diagnostic(
                    f"equal_to: '{name}' reads '{table_name}', which must be a second table of the "
                    f"domain with columns {', '.join(need)} (the released product){why}",
                    *(
                        inside(spec, (*at, "query"), lacking[-1])
                        if why and lacking[-1] != finest
                        else inside(spec, (*at, "table"), table_name)
                    ),
                )
            )
        public = any(info.query.table == table_name and set(info.query.columns) == set(need) for info in spec.public)
        if not public:
            declared = [info.query.describe() for info in spec.public if info.query.table == table_name]
            have = (
                f"; the public statistics of '{table_name}' are {'; '.join(declared)}, none by exactly "
                f"{', '.join(need)}"
                if declared
                else f"; no public statistic of '{table_name}' is declared"
            )
            raise SpecError(
                Diagnostic(
                    f"equal_to: '{name}' holds the release's {' * '.join(query)} at every "
                    f"{finest} equal to table '{table_name}', which must be a released product"
                    f"{have}: declare it, public {{ count {table_name} by {', '.join(need)} "
                    f'released "..." }}, or name the query of the one declared',
                    *inside(spec, (*at, "table"), table_name),
                )
            )
        _equality_check.check_target(spec, name, table_name, query, schema, _invariants(spec, params)[0], ROOT)
        out.append({"name": name, "table": table_name, "query": query, "finest": finest})
    return out
