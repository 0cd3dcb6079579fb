"""After every run: the released keys equal the declared ones, or nothing is published.

Why here and not in each plugin: a third-party mechanism can make the mistake the built-ins once
made (releasing `sorted(data[col].unique())` as its cells), and an oversight body cannot read
every plugin. The compiler holds each output to its `OutputKeys` (or, when the plugin declares
none, to the mechanism table's categorical columns it carries) and stops with a MechanismError
naming the key. `dpspec infer` holds a release read back to the same key sets, and to the rows a
mechanism's `ReleaseColumns` declare (`check_declared_rows`), where no key set can say them.
"""

from __future__ import annotations

from dpspec import ir
from dpspec.check.keys import declared_keys, released_key_set
from dpspec.contract.mechanism import OutputKeys
from dpspec.errors import MechanismError
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())

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
    columns = tuple(
        c for c in getattr(output, "columns", ()) if (col := t.column(c)) is not None and col.type.kind in KEY_KINDS
    )
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
    table as `where(name)` says, unless every keyed output holds exactly its declared key set,
    and every table whose `ReleaseColumns` declare its rows holds exactly those rows."""
    declared = mechanism.output_keys(spec, params)
    outcome = "this is not the release the spec describes"
    for name, output in outputs.items():
        keys = declared.get(name)
        if keys is not None and not keys.records:
            _compare(spec, mechanism.name, name, output, keys, where(name), outcome)
    for name, schema in mechanism.release_columns(spec, params).items():
        if name in outputs and schema.declared_rows is not None:
            rows = schema.declared_rows()
            if rows is not None:
                check_declared_rows(outputs[name], schema.key, rows, where(name), outcome)


def check_declared_rows(frame, key, rows, where: str, outcome: str) -> None:
    """MechanismError unless `frame` (a published table, read back) holds exactly the declared
    `rows` on its `key` columns: one missing is named (a measurement deleted), as is one not
    declared. Vectorised: each key column becomes codes over one vocabulary shared by both sides
    (categorical columns through their categories), each row one integer, and the two sets of
    integers are compared. A key column a CSV reader took for numbers ("01" read back as 1) is
    compared with the declared values read as numbers too."""
    key = list(key)
    want_codes, have_codes, sizes = [], [], []
    for c in key:
        numeric = frame[c].dtype.kind in "iuf"
        w, w_values = _factorized(rows[c], numeric)
        h, h_values = _factorized(frame[c], numeric)
        vocabulary = w_values.append(h_values).unique()
        want_codes.append(_recoded(w, w_values, vocabulary))
        have_codes.append(_recoded(h, h_values, vocabulary))
        sizes.append(len(vocabulary) + 1)  # +1: a missing value (code -1) is a code of its own
    if np.prod([float(n) for n in sizes]) >= 2.0**62:  # too many combinations for one integer each
        raise MechanismError(f"{where}: its declared rows have too many distinct key values to compare; {outcome}")
    want, have = _flat(want_codes, sizes), _flat(have_codes, sizes)
    extra = np.flatnonzero(~np.isin(have, want))
    if extra.size:
        shown = [tuple(_plain(frame[c].iloc[i]) for c in key) for i in extra[:SHOW]]
        raise MechanismError(
            f"{where}, row {extra[0] + 2}: key {_cells(key, shown)}{_more(extra.size)} is not declared: "
            f"a release's keys come from declared values or public key files, never from the data; {outcome}"
        )
    missing = np.flatnonzero(~np.isin(want, have))
    if missing.size:
        shown = [tuple(_plain(rows[c].iloc[i]) for c in key) for i in missing[:SHOW]]
        raise MechanismError(
            f"{where} lacks the declared key {_cells(key, shown)}{_more(missing.size)}: a release holds "
            f"one row for every measured cell; {outcome}"
        )


def _plain(value):
    """A numpy scalar as the Python value it holds (named as 1, not np.int64(1))."""
    return value.item() if hasattr(value, "item") else value


def _factorized(values, numeric: bool):
    """(codes, the values they index) of one key column, as text or (`numeric`) as numbers."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes, uniques = values.cat.codes.to_numpy(), pd.Series(values.cat.categories)
    else:
        codes, uniques = pd.factorize(values)
        uniques = pd.Series(uniques)
    if numeric:
        uniques = pd.to_numeric(uniques.astype(str), errors="coerce").astype("float64")
    else:
        uniques = uniques.astype(str)
    return codes, pd.Index(uniques)


def _recoded(codes, values, vocabulary):
    """`codes` over `values` as codes over `vocabulary` (-1 stays -1, a missing value)."""
    where = np.append(vocabulary.get_indexer(values), -1)  # code -1 picks the appended -1
    return where[codes].astype(np.int64)


def _flat(codes, sizes):
    """One integer per row from its columns' codes (mixed radix; -1 becomes 0, a value its own)."""
    out = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
    for c, n in zip(codes, sizes):
        out = out * n + (c + 1)
    return out


def _more(n: int) -> str:
    return f" (and {n - SHOW:,} more)" if n > SHOW else ""


def _compare(
    spec: ir.Spec,
    mechanism: str,
    name: str,
    output,
    keys: OutputKeys,
    where: str | None = None,
    outcome: str = "nothing was published",
) -> None:
    columns = list(keys.columns)
    where = where or f"mechanism '{mechanism}' released output '{name}'"
    for column, value in keys.fixed.items():
        held = released_key_set(output, [column])
        if held - {(str(value),)}:
            other = sorted(held - {(str(value),)})[0][0]
            raise MechanismError(
                f"{where} with {column} = {other!r}, but it declared {column} = {value!r} only; {outcome}"
            )
    try:
        expected = {tuple(row) for row in declared_keys(spec, keys.table, columns).itertuples(index=False, name=None)}
    except MechanismError as e:
        raise MechanismError(f"{where}: {e}; {outcome}") from None
    released = released_key_set(output, columns)
    extra, missing = sorted(released - expected), sorted(expected - released)
    if extra:
        raise MechanismError(
            f"{where} with key {_cells(columns, extra)}, which is not declared: a release's keys come "
            f"from declared values or public key files, never from the data; {outcome}"
        )
    if missing:
        raise MechanismError(
            f"{where} without the declared key {_cells(columns, missing)}: a cell left out because "
            "nobody is in it reveals that it is empty; release every declared cell with its noisy "
            f"value ({outcome})"
        )


def _cells(columns: list[str], rows: list[tuple]) -> str:
    shown = "; ".join(", ".join(f"{c}={v!r}" for c, v in zip(columns, row)) for row in rows[:SHOW])
    return shown + (f" (and {len(rows) - SHOW:,} more)" if len(rows) > SHOW else "")
