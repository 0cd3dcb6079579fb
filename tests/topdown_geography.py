"""A TopDown test spec's geography file, written from the test's own data: its units declared, as the specs declare theirs.

TopDown's units come from a public geography file (`values from "FILE"`), never from the records.
A test that builds a small state writes its data and calls `declared(text, folder)`: the data's
geography rows (and the spine's AIAN flag) become the geography file, and the spec reads every
level from it. The test's records are then exactly on the declared units, as in the bundled specs.
"""
from __future__ import annotations

import os
import re

import pandas as pd

_DATA = re.compile(r'^data (\w+) from "([^"]+)"', re.M)
_LEVEL = re.compile(r"^(\s*)(\w+)(\s*):\s*(category\b[^\n#]*?)\s*$")


def _read(path: str) -> pd.DataFrame:
    if path.endswith(".csv"):
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    return pd.read_parquet(path).astype(str)


def geography_rows(text: str, folder) -> tuple[pd.DataFrame, list[str], str | None]:
    """(the spec's data's distinct geography rows, the levels, the AIAN flag column or None)."""
    levels = [x.strip() for x in re.search(r"geography \w+ \{([^}]*)\}", text).group(1).split(">")]
    flag = re.search(r"^\s*aian:\s*(\w+)", text, re.M)
    flag = flag.group(1) if flag else None
    frames = []
    for _, path in _DATA.findall(text):
        full = path if os.path.isabs(path) else os.path.join(str(folder), path)
        if not os.path.exists(full):
            continue
        frame = _read(full)
        cols = [c for c in levels if c in frame.columns]
        if cols == levels:
            frames.append(frame[cols + ([flag] if flag and flag in frame.columns else [])])
    rows = pd.concat(frames, ignore_index=True)
    if flag:  # a unit takes the flag of the tables that carry one (0 when none does)
        if flag not in rows.columns:
            rows[flag] = "0"
        known = rows.dropna(subset=[flag])
        unknown = rows[rows[flag].isna() & ~rows[levels[-1]].isin(known[levels[-1]])].assign(**{flag: "0"})
        rows = pd.concat([known, unknown], ignore_index=True)
    return rows.drop_duplicates().sort_values(levels).reset_index(drop=True), levels, flag


def declared(text: str, folder, name: str = "geography.csv", write: bool = True) -> str:
    """`text` with every geography level (and the AIAN flag of the mechanism's table) read from a
    public geography file, written in `folder` from the spec's data (a level already reading a
    file keeps it, and that file is written)."""
    rows, levels, flag = geography_rows(text, folder)
    existing = re.search(r'values from "([^"]+)"', text)
    path = existing.group(1) if existing else name
    if write:
        full = path if os.path.isabs(path) else os.path.join(str(folder), path)
        os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
        rows.to_csv(full, index=False)
    if existing:
        return text
    main = re.search(r"mechanism topdown \{\s*table:\s*(\w+)", text)
    main = main.group(1) if main else None
    out, table = [], None
    for line in text.split("\n"):
        t = re.match(r"\s*table (\w+) unit", line)
        if t:
            table = t.group(1)
        c = _LEVEL.match(line)
        if table and c and c.group(2) in levels and "values from" not in line:
            line = f'{c.group(1)}{c.group(2)}{c.group(3)}: {c.group(4)} values from "{path}"'
        f = re.match(r"(\s*)(\w+)(\s*):\s*(\{0, 1\}|bool)\s*$", line)
        if table == main and flag and f and f.group(2) == flag:
            line = f'{f.group(1)}{f.group(2)}{f.group(3)}: category values from "{path}"'
        out.append(line)
    text = "\n".join(out)
    entry = f'  keys "{path}" released "the test state\'s geography"'
    if re.search(r"^public \{", text, re.M):
        return re.sub(r"^public \{\n", "public {\n" + entry + "\n", text, count=1, flags=re.M)
    return re.sub(r"^(unit \w+ :)", "public {\n" + entry + "\n}\n\\1", text, count=1, flags=re.M)
