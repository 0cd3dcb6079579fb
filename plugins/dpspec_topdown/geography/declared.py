"""TopDown's geography from declared keys: the units come from a public geography file, never the records.

Why: a hierarchy built from the records has a block only where someone lives. The block's
measurements and its rows are then absent when it is empty and present when one person lives
there, and that person is revealed whatever the noise. Production took its geography from the
public TIGER/Line files; here every level of `geography NAME { state > ... > block }` reads its
values from one public geography file (`block : category in blockgroup values from "FILE"`, one
row per block with every level's code), so the tree is a function of public values. Empty
declared units are measured with noise like any other (zero true counts) and appear in the
measurements and the release.

The rest of the spine is public too: the AIAN flag is read from the same geography file (the
records' own flag plays no part, and a record whose flag disagrees with the file's for its
block, in any table the run reads, is a DataError naming the table, the row and the column,
so no table's copy of the flag can stand in for the public one); the group-quarters split of block groups reads the facilities
table's counts by block and type, which the spec must declare invariant (public); the optimized
spine bypasses single-child units of this declared tree (and of those two public splits).
"""

from __future__ import annotations

from dpspec.api import Diagnostic, MechanismError, declared_keys, ir, shown, LazyModule

from ..broken import Broken

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_counts = LazyModule("dpspec_topdown.measurement.counts", "_counts", globals())
_spine = LazyModule("dpspec_topdown.geography.spine", "_spine", globals())


def problems(spec: ir.Spec, tables, flag: str | None = None) -> list[Diagnostic]:
    """Each geography column of each table (the person table, any joint table) reads its values
    from one public geography file; the AIAN flag, if any, from the same file. At the column."""
    levels = spec.domain.geography.levels if spec.domain.geography else []
    out = []
    for name in tables:
        t = spec.domain.table(name)
        if t is None:
            continue
        files = set()
        for level in levels:
            col = t.column(level)
            if col is None:
                continue
            if col.type.kind != "category" or not col.type.keys_from:
                out.append(
                    Diagnostic(
                        f"geography column '{level}' of table '{name}' has no declared values: TopDown's units (and so "
                        "the rows of its measurements and release) would be the ones found in the records, and a unit "
                        "present only when someone lives there reveals that person",
                        *ir.line_column(col),
                        hint=f"read every level from a public geography file (one row per {levels[-1]}, "
                        f"every level's code): '{level} : category values from \"geography.csv\"' "
                        'with \'keys "geography.csv" released "SOURCE"\' in the public block',
                    )
                )
            else:
                files.add(col.type.keys_from)
        if len(files) > 1:
            col = t.column(levels[-1])
            out.append(
                Diagnostic(
                    f"the geography columns of table '{name}' read {len(files)} different files "
                    f"({', '.join(sorted(files))}): the hierarchy needs one geography file, one row "
                    f"per {levels[-1]} with every level's code",
                    *ir.line_column(col),
                )
            )
        if flag is not None and name == tables[0] and files:
            col = t.column(flag)
            if col is not None and col.type.keys_from not in files:
                out.append(
                    Diagnostic(
                        f"the AIAN flag '{flag}' of table '{name}' is not read from the geography file: which units lie "
                        "in AIAN areas shapes the spine, so it must come from public geography, not from the records",
                        *ir.line_column(col),
                        hint=f"'{flag} : category values from \"{sorted(files)[0]}\"' (its values 0 and 1)",
                    )
                )
    return out


def declared_geography(spec: ir.Spec, table: str, flag: str | None = None):
    """The declared units, as text: one row per finest unit, every level's code (and the flag)."""
    levels = [c for c in spec.domain.geography.levels if spec.domain.table(table).column(c) is not None]
    frame = declared_keys(spec, table, [*levels, *([flag] if flag else [])])
    finest = levels[-1]
    twice = frame[finest].duplicated(keep=False)
    if twice.any():
        code = frame.loc[twice, finest].iloc[0]
        rows = frame[frame[finest] == code]
        if flag and rows[levels].drop_duplicates().shape[0] == 1:
            raise Broken(
                f"the AIAN spine needs every {finest} wholly inside or outside the AIAN areas: the geography "
                f"file lists {finest} {code!r} with {flag} = 0 and {flag} = 1",
                ("spine", "aian"),
            )
        raise Broken(
            f"geography is not a tree: the geography file lists {finest} {code!r} under more than one "
            "parent; each unit must lie in exactly one unit of each level above it",
            ("geography",),
        )
    return frame


def check_flags(name: str, table, declared, finest: str, flag: str, engine=None) -> None:
    """A DataError unless every record of `table` carries its block's declared AIAN flag (the
    geography file's): the first disagreeing record is named by row (in a frame) and value.

    Why: a table's own copy of the flag (a joint table's, the reference geography's) is a
    record's word, not public geography; the spine follows the file, and data that contradict it
    are refused rather than silently overruled."""
    counts = _counts.table_counts(table, [finest, flag], engine)
    if counts.empty:
        return
    public = pd.Series(_spine._as_flag(declared[flag], flag), index=declared[finest].astype(str).to_numpy())
    public = public[~public.index.duplicated()]
    codes = counts[finest].astype(str).to_numpy()
    said = _spine._as_flag(counts[flag], flag)
    expected = public.reindex(codes).to_numpy()
    wrong = np.flatnonzero(pd.notna(expected) & (said != expected.astype(bool, copy=False)))
    if not len(wrong):
        return
    i = wrong[0]
    code, rows = codes[i], int(counts["count"].iloc[i])
    where = f"{rows:,} record(s) of table '{name}'"
    if isinstance(table, pd.DataFrame):
        hit = np.flatnonzero(
            (table[finest].astype(str) == code).to_numpy() & (_spine._as_flag(table[flag], flag) == bool(said[i]))
        )
        where = f"table '{name}', row {int(hit[0]) + 1} (rows count data rows from 1)" + (
            f" and {len(hit) - 1:,} more" if len(hit) > 1 else ""
        )
    raise Broken(
        f"{where}: column '{flag}' holds {int(bool(said[i]))} in {finest} {shown(code)}, but the declared geography "
        f"file gives that {finest} {flag} = {int(bool(expected[i]))}: the AIAN spine follows the public "
        "geography, not the records; correct the records (or the geography file)",
        ("spine", "aian"),
    )


def check_structure(hier, declared, measurements=None, classes=None) -> None:
    """MechanismError unless the tree the run measured has exactly the declared units at every
    level (under their published codes) and the measurements name every measured unit
    (a bypassed unit of the optimized spine has none, by design)."""
    for lv in hier.levels:
        if lv.implicit or lv.name not in declared.columns:
            continue
        published = set(map(str, lv.labels if lv.labels is not None else lv.codes))
        expected = set(declared[lv.name])
        if published != expected:
            diff = sorted(published ^ expected)[0]
            raise MechanismError(
                f"TopDown measured a {lv.name} hierarchy that differs from the declared geography "
                f"at {lv.name} {diff!r}; nothing was published"
            )
    if measurements is None:
        return
    categories = measurements.dtypes.get("geocode")
    levels = measurements.dtypes.get("level")
    if categories is None or levels is None:
        return
    held = set(map(str, categories.categories))
    for name in levels.categories:
        lv = hier.level(str(name))
        codes = [
            str(c) for i, c in enumerate(lv.codes) if classes is None or name not in classes or classes[name][0][i] >= 0
        ]
        missing = [c for c in codes if c not in held]
        if missing:
            raise MechanismError(
                f"TopDown's measurements leave out the declared {name} {missing[0]!r}; nothing was published"
            )
