"""The `equal_to` setting read and checked: marginals held equal to a product already released."""
from __future__ import annotations

from dpspec.api import Diagnostic, SpecError, ir

from .locate import at, item_at
from .passes import _query_words
from .tables import _block, _entry_settings, _invariants, ROOT, _schema


def _equalities(spec: ir.Spec, params: dict) -> list[dict]:
    """``equal_to: { NAME: { table: T  query: "hhgq * votingage" } }``: the release's marginal
    `query` (factors: variables or recodes) must reproduce T, an already released product
    (equality.py). T is a table of the domain with the finest level and one column per factor,
    and it must be declared public (`public { count T by block, hhgq, votingage released "..." }`):
    the guarantee is then stated as conditioned on it. What the spec alone decides about the
    target (its columns, its groups against the invariants') is a SpecError (equality_check.py)."""

    from .equality_check import check_target
    block = _block(params, "equal_to", '{ pl94: { table: pl94_release  query: "hhgq * votingage" } }')
    if block is None:
        return []
    geo = spec.domain.geography.levels if spec.domain.geography else []
    finest = geo[-1] if geo else None
    schema = _schema(spec, params)
    out = []
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        settings, fields = _entry_settings(p)
        if set(fields) != {"table", "query"}:
            extra = sorted(set(fields) - {"table", "query"})
            missing = [f for f in ("table", "query") if f not in fields]
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' needs {{ table: TABLE  query: \"a * b\" }}"
                                       + (f", not '{extra[0]}'" if extra else f", missing {' and '.join(missing)}"),
                                       *(at(settings[extra[0]]) if extra else loc)))
        table_name = str(fields["table"])
        try:
            query = schema.canonical(_query_words(fields["query"], list(schema.names)))
        except SpecError as exc:
            import re

            def where(message):
                unknown = re.search(r"names \['([^']+)'", message)
                return item_at(spec, settings["query"], unknown.group(1) if unknown else None)

            raise SpecError([Diagnostic(f"equal_to: '{p.name}': {d.message}", *where(d.message))
                             for d in exc.diagnostics]) from None
        table = spec.domain.table(table_name)
        need = [finest, *query]
        lacking = [c for c in need if table is not None and table.column(c) is None]
        if table is None or table_name == params["table"] or lacking:
            why = f" ('{table_name}' has no column {', '.join(lacking)})" if lacking and table_name != params["table"] else ""
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' reads '{table_name}', which must be a second table of the "
                                       f"domain with columns {', '.join(need)} (the released product){why}",
                                       *(item_at(spec, settings["query"], lacking[-1]) if why and lacking[-1] != finest
                                         else item_at(spec, settings["table"], table_name))))
        public = any(info.query.table == table_name and set(info.query.columns) == set(need) for info in spec.public)
        if not public:
            declared = [info.query.describe() for info in spec.public if info.query.table == table_name]
            have = (f"; the public statistics of '{table_name}' are {'; '.join(declared)}, none by exactly "
                    f"{', '.join(need)}" if declared else f"; no public statistic of '{table_name}' is declared")
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' holds the release's {' * '.join(query)} at every "
                                       f"{finest} equal to table '{table_name}', which must be a released product"
                                       f"{have}: declare it, public {{ count {table_name} by {', '.join(need)} "
                                       f"released \"...\" }}, or name the query of the one declared",
                                       *item_at(spec, settings["table"], table_name)))
        check_target(spec, p.name, settings, table_name, query, schema, _invariants(spec, params)[0], ROOT)
        out.append({"name": p.name, "table": table_name, "query": query, "finest": finest})
    return out
