"""Identifier-like columns: one value per unit, so a count by them describes single records.

A count of persons by household id is each household's size; a count of visits by patient id
is each patient's number of visits. Publishing such a count exactly publishes a piece of every
individual record, the worst case of an invariant. The domain says which columns are ids: the
columns tables link by (`in households by hhid`), and columns named like ids (pid, hhid,
patient_id, ssn). A name alone is weaker evidence, so the finding says which it was.
"""

from __future__ import annotations

import re

from dpspec import ir

# pid, hhid, uid, id, patient_id, firm_key, ssn, serialno, uuid: the usual spellings of an id
ID_NAME = re.compile(r"(?:[a-z]{0,2}id|id|.*_(?:id|key|uid|uuid|ssn|serial|serialno)|ssn|uuid|serialno?)")
ID_TYPES = ("int", "category")


def link_keys(domain: ir.Domain | None) -> dict[str, str]:
    """column -> the table whose units it identifies, for every `in P by ID` link."""
    if domain is None:
        return {}
    return {t.link: t.parent for t in domain.tables if t.parent and t.link}


def identifier_reason(domain: ir.Domain | None, table: str, column: str) -> str | None:
    """Why COLUMN of TABLE identifies single units (None if nothing says it does)."""
    keys = link_keys(domain)
    if column in keys:
        owner = keys[column]
        return f"'{column}' is the key that links to '{owner}': one value per {_word(domain, owner)}"
    t = domain.table(table) if domain else None
    col = t.column(column) if t else None
    if col is not None and col.type.kind in ID_TYPES and ID_NAME.fullmatch(column.lower()):
        return f"'{column}' is named like an identifier ({col.type.kind} column): one value per {_word(domain, table)}"
    return None


def identifier_columns(query: ir.CountQuery, domain: ir.Domain | None) -> list[tuple[str, str]]:
    """(column, reason) for each identifier-like column a count is broken down by."""
    out = []
    for c in query.columns:
        reason = identifier_reason(domain, query.table, c)
        if reason:
            out.append((c, reason))
    return out


def _word(domain: ir.Domain | None, table: str) -> str:
    t = domain.table(table) if domain else None
    return t.unit if t is not None and t.unit else table
