"""After every run: the released keys equal the declared ones, or nothing is published.

Why here and not in each plugin: a third-party mechanism can make the mistake the built-ins once
made (releasing `sorted(data[col].unique())` as its cells), and an oversight body cannot read
every plugin. The compiler holds each output to its `OutputKeys` (or, when the plugin declares
none, to the mechanism table's categorical columns it carries) and stops with a MechanismError
naming the key.
"""
from __future__ import annotations

from dpspec import ir
from dpspec.check.keys import declared_keys, released_key_set
from dpspec.contract.mechanism import OutputKeys
from dpspec.errors import MechanismError

SHOW = 5
KEY_KINDS = ("category", "enum", "bool")


def inferred_keys(spec: ir.Spec, table: str, name: str, output) -> OutputKeys | None:
    """The keys of an output its mechanism does not describe: a table's name means microdata
    (records); otherwise its columns named as categorical columns of the mechanism's table."""
    if spec.domain is None or spec.domain.table(name) is not None:
        return OutputKeys(name, records=True)
    t = spec.domain.table(table)
    if t is None:
        return None
    columns = tuple(c for c in getattr(output, "columns", ()) if (col := t.column(c)) is not None and col.type.kind in KEY_KINDS)
    return OutputKeys(table, columns) if columns else None


def check_release_keys(spec: ir.Spec, mechanism, params: dict, outputs: dict) -> None:
    """MechanismError unless every keyed output holds exactly its declared key set."""
    declared = mechanism.output_keys(spec, params)
    table = mechanism.flavor(spec, params).table
    for name, output in outputs.items():
        keys = declared.get(name) or inferred_keys(spec, table, name, output)
        if keys is None or keys.records:
            continue
        _compare(spec, mechanism.name, name, output, keys)


def check_read_keys(spec: ir.Spec, mechanism, params: dict, outputs: dict, where) -> None:
    """The same comparison for a release read back (`dpspec infer`): MechanismError naming the
    table as `where(name)` says, unless every keyed output holds exactly its declared key set."""
    declared = mechanism.output_keys(spec, params)
    for name, output in outputs.items():
        keys = declared.get(name)
        if keys is not None and not keys.records:
            _compare(spec, mechanism.name, name, output, keys, where(name), "this is not the release the spec describes")


def _compare(spec: ir.Spec, mechanism: str, name: str, output, keys: OutputKeys, where: str | None = None,
             outcome: str = "nothing was published") -> None:
    columns = list(keys.columns)
    where = where or f"mechanism '{mechanism}' released output '{name}'"
    for column, value in keys.fixed.items():
        held = released_key_set(output, [column])
        if held - {(str(value),)}:
            other = sorted(held - {(str(value),)})[0][0]
            raise MechanismError(f"{where} with {column} = {other!r}, but it declared {column} = {value!r} only; "
                                 f"{outcome}")
    try:
        expected = {tuple(row) for row in declared_keys(spec, keys.table, columns).itertuples(index=False, name=None)}
    except MechanismError as e:
        raise MechanismError(f"{where}: {e}; {outcome}") from None
    released = released_key_set(output, columns)
    extra, missing = sorted(released - expected), sorted(expected - released)
    if extra:
        raise MechanismError(f"{where} with key {_cells(columns, extra)}, which is not declared: a release's keys come "
                             f"from declared values or public key files, never from the data; {outcome}")
    if missing:
        raise MechanismError(f"{where} without the declared key {_cells(columns, missing)}: a cell left out because "
                             "nobody is in it reveals that it is empty; release every declared cell with its noisy "
                             f"value ({outcome})")


def _cells(columns: list[str], rows: list[tuple]) -> str:
    shown = "; ".join(", ".join(f"{c}={v!r}" for c, v in zip(columns, row)) for row in rows[:SHOW])
    return shown + (f" (and {len(rows) - SHOW:,} more)" if len(rows) > SHOW else "")
