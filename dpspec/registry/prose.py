"""Reading the formal content out of a registry entry's prose, and writing ours into it.

Two layers. Entries that dpspec exported carry each formal block in dpspec notation inside a
fenced code block (```dpspec ... ```), which a Markdown page shows as code and the import
parses exactly. Entries written by people carry prose only; a few recognisers turn the common
phrasings into formal blocks (the variant's name, change-one vs add/remove neighbours, the
unit named as "X-level", invariants such as "the total population count for each state"), and
whatever they do not recognise is reported, never guessed.
"""

from __future__ import annotations

import re

FENCE = "```dpspec"
_FENCED = re.compile(r"\n*```dpspec[ \t]*\n(.*?)\n```[ \t]*\n?", re.S)

VARIANT_NAMES = {
    "pure": "Pure DP",
    "approximate": "Approximate DP",
    "zcdp": "Zero-concentrated DP",
    "renyi": "Renyi DP",
    "gdp": "Custom",
}
PREMETRIC_OF_VARIANT = {v: k for k, v in VARIANT_NAMES.items() if v != "Custom"}


# ---- fenced dpspec notation --------------------------------------------------------------


def with_formal(prose: str | None, code: list[str]) -> str:
    """Prose followed by the formal block as a fenced code block."""
    block = FENCE + "\n" + "\n".join(code) + "\n```"
    return f"{prose.rstrip()}\n\n{block}\n" if prose and prose.strip() else block + "\n"


def split_formal(text: str | None) -> tuple[str, str | None]:
    """(the prose without fenced dpspec blocks, the blocks' code or None)."""
    if not text:
        return "", None
    codes = _FENCED.findall(text)
    prose = _FENCED.sub("\n", text).strip()
    return prose, ("\n".join(codes) if codes else None)


# ---- neighbour relation and unit ---------------------------------------------------------

_CHANGE_ONE = re.compile(
    r"change[- ]one|(?<!un)bounded (?:neighbou?r|dp|adjacen)|modification of a single|"
    r"replac(?:e|ing|ement) (?:of )?(?:one|a single)|substitut|hamming",
    re.I,
)
_ADD_REMOVE = re.compile(
    r"add(?:ing)?[ -]?(?:/|or|and)[ -]?remov|addition or removal|insert(?:ion)? or delet|"
    r"unbounded (?:neighbou?r|dp|adjacen)|presence or absence|symmetric difference",
    re.I,
)


def relation_from_prose(text: str | None) -> str | None:
    """'hamming' (change one), 'symdiff' (add or remove one), or None when the text says neither
    (or both: "unbounded" and "bounded" in one sentence is not a statement dpspec can trust)."""
    if not text:
        return None
    change, add = bool(_CHANGE_ONE.search(text)), bool(_ADD_REMOVE.search(text))
    if change == add:
        return None
    return "hamming" if change else "symdiff"


_LEVEL = re.compile(r"([A-Za-z][A-Za-z -]*?)[- ]level\b", re.I)


def unit_names(text: str | None) -> list[str]:
    """Unit names from a privacy_unit such as "Person-level; housing-unit-level" or "user-day"."""
    if not text:
        return []
    names = []
    for part in re.split(r"[;,/]| and ", text):
        part = part.strip()
        if not part:
            continue
        m = _LEVEL.search(part)
        words = (m.group(1) if m else part).strip().lower()
        words = re.sub(r"^(one|a|an|each|per|the|single)\s+", "", words)
        name = re.sub(r"[^a-z0-9]+", "_", words).strip("_")
        if name and name[0].isalpha() and name not in names:
            names.append(name)
    return names


def table_for(unit: str) -> str:
    """The table whose rows are the unit: person -> persons, user_day -> user_days."""
    if unit.endswith("s"):
        return unit
    if unit.endswith("y") and not unit.endswith(("ay", "ey", "oy", "uy")):
        return unit[:-1] + "ies"
    return unit + "s"


def unit_of_table(table: str) -> str:
    """The inverse of `table_for`: gq_facilities -> gq_facility, persons -> person."""
    if table.endswith("ies"):
        return table[:-3] + "y"
    return table[:-1] if table.endswith("s") else table


def stage_from_prose(text: str | None) -> str | None:
    """'edited' when the domain is stated to be after editing and imputation."""
    if text and re.search(r"\bedited\b|imputation|after editing", text, re.I):
        return "edited"
    return None


# ---- unprotected quantities --------------------------------------------------------------

_LEVELS = ("nation", "state", "county", "tract", "blockgroup", "block")
_LEVEL_WORDS = r"(state|county|tract|block group|blockgroup|block)"
_RECOGNISERS = (
    (re.compile(r"total population(?: count)? (?:for|of|in) each " + _LEVEL_WORDS, re.I), "persons", ()),
    (
        re.compile(
            r"(?:total )?(?:count|number) of housing units (?:in|for|of) each (?:census )?" + _LEVEL_WORDS, re.I
        ),
        "housing_units",
        (),
    ),
    (
        re.compile(
            r"(?:count|number) and type of occupied group quarters(?: facilities)? (?:in|for|of) each (?:census )?"
            + _LEVEL_WORDS,
            re.I,
        ),
        "gq_facilities",
        ("gq_type",),
    ),
)
_NONE = re.compile(r"(none|n/?a|nothing|no (?:unprotected quantities|invariants?|quantities)(?: [a-z ]+)?)\.?", re.I)


def _level(word: str) -> str:
    return word.lower().replace(" ", "")


def invariants_from_prose(text: str | None) -> tuple[list[tuple[str, tuple[str, ...]]], list[str]]:
    """([(table, by-columns)], unrecognised items). Indented sub-items belong to their parent
    item (a list of facility types details the item above it)."""
    if not text:
        return [], []
    items: list[str] = []
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        indented = raw[: len(raw) - len(raw.lstrip())] != ""
        line = raw.strip().lstrip("-*• ").strip()
        if indented and items:
            items[-1] += " " + line
        else:
            items.append(line)
    found, unknown = [], []
    for item in items:
        if _NONE.fullmatch(item.strip()):
            continue
        for rx, table, extra in _RECOGNISERS:
            m = rx.search(item)
            if m:
                found.append((table, (_level(m.group(1)),) + extra))
                break
        else:
            unknown.append(item)
    return found, unknown


def geography_levels(columns) -> tuple[str, ...]:
    """The census geography levels among `columns`, coarsest first."""
    present = set(columns)
    return tuple(level for level in _LEVELS if level in present)
