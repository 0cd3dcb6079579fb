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


def geography_rows(text: str, folder, data=None) -> tuple[pd.DataFrame, list[str], str | None]:
    """(the spec's data's distinct geography rows, the levels, the AIAN flag column or None);
    data: {table: frame} given in memory instead of the files the spec reads."""
    levels = [x.strip() for x in re.search(r"geography \w+ \{([^}]*)\}", text).group(1).split(">")]
    flag = re.search(r"^\s*aian:\s*(\w+)", text, re.M)
    flag = flag.group(1) if flag else None
    frames = []
    if data is None:
        data = {}
        for name, path in _DATA.findall(text):
            full = path if os.path.isabs(path) else os.path.join(str(folder), path)
            if os.path.exists(full):
                data[name] = _read(full)
    for frame in data.values():
        frame = frame.astype(str)
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


def declared(
    text: str, folder, name: str = "geography.csv", write: bool = True, one_line: bool = False, data=None
) -> str:
    """`text` with every geography level (and the AIAN flag of the mechanism's table) read from a
    public geography file, written in `folder` from the spec's data (a level already reading a
    file keeps it, and that file is written)."""
    if write:
        rows, levels, flag = geography_rows(text, folder, data)
    else:
        levels = [x.strip() for x in re.search(r"geography \w+ \{([^}]*)\}", text).group(1).split(">")]
        flag = re.search(r"^\s*aian:\s*(\w+)", text, re.M)
        flag = flag.group(1) if flag else None
    existing = re.search(r'values from "([^"]+)"', text)
    path = existing.group(1) if existing else name
    if write:
        full = path if os.path.isabs(path) else os.path.join(str(folder), path)
        bundled = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "specs")
        if os.path.abspath(full).startswith(bundled + os.sep):  # tests never write beside the bundled specs
            raise AssertionError(f"a test would write {full} among the bundled specs; copy the spec to tmp_path first")
        os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
        rows.to_csv(full, index=False)
    if existing:
        return text
    main = re.search(r"mechanism topdown \{\s*table:\s*(\w+)", text)
    main = main.group(1) if main else None
    variables = re.search(r"^\s*variables:\s*([^\n]*)", text, re.M)
    if flag and variables and re.search(rf"\b{flag}\b", variables.group(1)):
        flag = None  # a histogram variable named as the flag: the spec's misuse, left for check to refuse
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
    if one_line and re.search(r"^public \{", text, re.M):  # the spec's lines stay where they were
        return re.sub(r"^public \{", "public {" + entry, text, count=1, flags=re.M)
    if one_line:  # tests locate diagnostics by line
        return re.sub(r"^(unit \w+ :)", "public {" + entry + " } \\1", text, count=1, flags=re.M)
    if re.search(r"^public \{", text, re.M):
        return re.sub(r"^public \{\n", "public {\n" + entry + "\n", text, count=1, flags=re.M)
    return re.sub(r"^(unit \w+ :)", "public {\n" + entry + "\n}\n\\1", text, count=1, flags=re.M)


def _placeholder(text: str) -> str:
    """A geography file with one unit per level (for a spec that is only checked), in a temp dir."""
    import hashlib
    import tempfile

    levels = [x.strip() for x in re.search(r"geography \w+ \{([^}]*)\}", text).group(1).split(">")]
    flag = re.search(r"^\s*aian:\s*(\w+)", text, re.M)
    columns = levels + ([flag.group(1)] if flag else [])
    folder = os.path.join(
        tempfile.gettempdir(), "dpspec-topdown-geography-" + hashlib.sha256(",".join(columns).encode()).hexdigest()[:12]
    )
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "geography.csv")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}"
        pd.DataFrame([[f"{c}1" for c in levels] + (["0"] if flag else [])], columns=columns).to_csv(tmp, index=False)
        os.replace(tmp, path)
    return path


def parse(text: str, path: str = "s.dps", data=None):
    """The language's parse of `text` with its geography declared (`declared`, on the same lines:
    the public block joins the `unit` line): from the data beside `path` when they are there,
    else from a one-unit placeholder file (a spec that is only checked)."""
    from dpspec.language.parser import parse as parse_text

    folder = os.path.dirname(os.path.abspath(path))
    sources = [p for _, p in _DATA.findall(text)]
    beside = bool(sources) and all(os.path.exists(p if os.path.isabs(p) else os.path.join(folder, p)) for p in sources)
    existing = re.search(r'values from "([^"]+)"', text)
    if data is not None and not existing:  # the data in memory: the file in a folder of its own
        import tempfile

        own = tempfile.mkdtemp(prefix="dpspec-topdown-")
        text = declared(text, own, name=os.path.join(own, "geography.csv"), one_line=True, data=data)
    elif existing and beside and not os.path.exists(os.path.join(folder, existing.group(1))):
        declared(text, folder)  # a copied spec's geography file, from the (smaller) data beside it
    elif not existing and re.search(r"geography \w+ \{", text):
        if beside:
            text = declared(text, folder, one_line=True)
        else:
            text = declared(text, folder, name=_placeholder(text), write=False, one_line=True)
    return parse_text(text, path)


def write_declared(path, text: str) -> str:
    """Write the spec `text` at `path` with its geography declared from the data beside it (written
    first); the text written, on the spec's own lines."""
    folder = os.path.dirname(os.path.abspath(str(path)))
    if 'values from "' not in text:
        text = declared(text, folder, one_line=True)
    else:
        declared(text, folder)
    with open(str(path), "w", encoding="utf-8") as f:
        f.write(text)
    return text
