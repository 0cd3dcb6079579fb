"""The intermediate representation: one frozen attrs class per concept of a DP specification.

The IR is what every later stage (checker, mechanisms, budget calculus, audit, reports) reads.
It holds no behaviour that belongs to a plugin, and serializes to JSON (`dpspec show --json`)
so that other tools can read a spec without our parser.
"""

from __future__ import annotations

import hashlib
import math
import os
from fractions import Fraction
from typing import Any

import attrs


@attrs.frozen
class Loc:
    """Where a construct starts in its source file (1-based)."""

    line: int
    column: int


def line_column(node, fallback: Loc | None = None) -> tuple[int | None, int | None]:
    """(line, column) where `node` is written (its `loc`), else where `fallback` is, else
    (None, None): the one way a located error finds its place."""
    loc = getattr(node, "loc", None) or fallback
    return (loc.line, loc.column) if loc else (None, None)


def _loc_field():
    # Locations are for messages only: two specs that differ only in layout are the same spec.
    return attrs.field(default=None, eq=False, repr=False)


def locate(block: "ParamBlock | None", path, fallback: Loc | None = None) -> Loc | None:
    """Where the setting at `path` inside a mechanism block is written: a path is the keys of the
    nested blocks and maps and the indices of list items, e.g. ("tables", "t1", "details", 2).
    A step that is not written (a missing key) stops the walk: the deepest written part is the
    answer, `fallback` (the mechanism's line), else the block's own place, when nothing of it is."""
    best = fallback if fallback is not None else getattr(block, "loc", None)
    current, param = block, None
    for step in path:
        if isinstance(step, str):
            param = current.get(step) if isinstance(current, ParamBlock) else None
            if param is None:
                break
            best = param.loc or best
            current = param.value
        else:
            if param is None:
                break
            loc = param.value_loc(step)
            if loc is None and step == 0 and not isinstance(param.value, tuple):
                loc = param.value_loc()  # one value written alone, read as a one-item list
            if loc is None:
                break
            best = loc
            current = param.value[step] if isinstance(param.value, tuple) and 0 <= step < len(param.value) else None
            param = None
    return best


# ---- who: the domain ----------------------------------------------------------------------


@attrs.frozen
class ColumnType:
    """A column's value set.

    kind is one of: "category" (open set of codes, optionally nested `in` a parent column),
    "enum" (the listed values), "int" (an inclusive range), "bool".
    """

    kind: str
    values: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    parent: str | None = None
    # `category values from "FILE"`: the key file (declared in `public { keys ... }`) listing the
    # column's values; None: the values are not declared (the column cannot key a release)
    keys_from: str | None = None


@attrs.frozen
class Column:
    name: str
    type: ColumnType
    nullable: bool = False
    loc: Loc | None = _loc_field()


@attrs.frozen
class Table:
    """A table of the domain; each row is one `unit` (household, person, event)."""

    name: str
    unit: str
    columns: tuple[Column, ...]
    parent: str | None = None  # the table whose units contain this one's (persons in households)
    link: str | None = None  # the column that holds the parent unit's id
    loc: Loc | None = _loc_field()
    link_bound: int | None = None  # `in P by ID at most K`: one parent unit holds at most K rows

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@attrs.frozen
class Geography:
    """A geography hierarchy: level columns from the coarsest to the finest."""

    name: str
    levels: tuple[str, ...]
    loc: Loc | None = _loc_field()
    # geography components outside the hierarchy (`crosscut { place, aiannh }`): each is a
    # column whose units cut across the levels, composed in parallel over its own units
    components: tuple[str, ...] = ()
    components_loc: Loc | None = _loc_field()


@attrs.frozen
class Domain:
    """Who is protected: the data at one stage of its life cycle."""

    name: str
    description: str | None
    stage: str | None
    tables: tuple[Table, ...]
    geography: Geography | None = None
    loc: Loc | None = _loc_field()
    # a program's domain: the member specs' domains that are this one's data under another name
    same_as: tuple[str, ...] = ()

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


@attrs.frozen
class DataSource:
    table: str
    path: str
    loc: Loc | None = _loc_field()

    @property
    def format(self) -> str:
        # a path ending in / is a directory of Parquet files (hive-partitioned, as Spark writes them)
        return "parquet" if self.path.lower().endswith((".parquet", ".pq", "/")) else "csv"


# ---- where: invariants and public information --------------------------------------------


@attrs.frozen
class CountQuery:
    """Counts of a table's rows by some columns; `level` adds a geography level column."""

    table: str
    by: tuple[str, ...] = ()
    level: str | None = None
    loc: Loc | None = _loc_field()

    @property
    def columns(self) -> tuple[str, ...]:
        """All grouping columns, the level included, in a canonical order."""
        cols = list(self.by)
        if self.level and self.level not in cols:
            cols.insert(0, self.level)
        return tuple(cols)

    def key(self) -> tuple[str, frozenset[str]]:
        """Identity of the statistic regardless of how its columns were written."""
        return (self.table, frozenset(self.columns))

    def describe(self) -> str:
        cols = ", ".join(self.columns)
        return f"count {self.table} by {cols}" if cols else f"count {self.table}"


@attrs.frozen
class PublicInfo:
    """A statistic released elsewhere without DP noise; the guarantee is conditioned on it."""

    query: CountQuery
    source: str
    loc: Loc | None = _loc_field()
    # how the mechanism conditions on it (seed 2, Section 4): "total" (its release must sum to
    # it) or "base" (it shapes the base measure); None: released elsewhere, not used
    use: str | None = None


@attrs.frozen
class PublicKeys:
    """A public key file (`public { keys "FILE" released "SOURCE" }`): the declared values of the
    columns that read it (`values from "FILE"`), published elsewhere (a list of counties, the
    census blocks), so a release keyed by them reveals nothing about the records."""

    path: str
    source: str
    loc: Loc | None = _loc_field()


PUFFERFISH_CLASSES = ("independent", "dependence", "arbitrary")


@attrs.frozen
class Pufferfish:
    """An epsilon-Z-Pufferfish guarantee (seed 2, Definition 3): Z is the spec's public block,
    the secrets and discriminative pairs come from its unit, and `kind` names the class of
    data-generating distributions the guarantee holds for (with its parameters)."""

    kind: str
    options: tuple[tuple[str, Fraction], ...] = ()
    loc: Loc | None = _loc_field()

    def option(self, name: str) -> Fraction | None:
        return dict(self.options).get(name)


# ---- what: the unit ----------------------------------------------------------------------


@attrs.frozen
class UnitBound:
    """`holds at most k persons`: each unit contains at most k records of a finer table."""

    k: int
    finer: str


@attrs.frozen
class Unit:
    """The input premetric d_X: a neighbor relation on one table's units."""

    table: str
    relation: str  # "hamming" (change one unit) or "symdiff" (add or remove one unit)
    bound: UnitBound | None = None
    loc: Loc | None = _loc_field()


# ---- how: the output premetric -----------------------------------------------------------

END_COMMENTS = "end"  # comments after the last section

PREMETRIC_KINDS = ("pure", "approximate", "zcdp", "renyi", "gdp")


@attrs.frozen
class Premetric:
    """The output premetric D_Pr, with its parameters (delta for approximate, alpha for Rényi)."""

    kind: str
    options: tuple[tuple[str, Fraction], ...] = ()
    events: str | None = None  # a reduced event space ("subspace" guarantee), if any
    loc: Loc | None = _loc_field()

    def option(self, name: str) -> Fraction | None:
        return dict(self.options).get(name)


# ---- the mechanism -----------------------------------------------------------------------


@attrs.frozen
class Param:
    """One mechanism parameter as written. value: Fraction, str, Name, tuple or ParamBlock.

    loc is where its key is written; positions where its value is, as ((), loc) and, for a list,
    ((i,), loc) per item (layout, like loc: not part of the spec's meaning)."""

    name: str
    value: Any
    loc: Loc | None = _loc_field()
    positions: tuple[tuple[tuple[int, ...], Loc], ...] = attrs.field(default=(), eq=False, repr=False)

    def value_loc(self, *index: int) -> Loc | None:
        """Where the value (no index) or its list item `index` is written, when the parser saw it."""
        return dict(self.positions).get(tuple(index))


@attrs.frozen
class Name:
    """A bare identifier used as a value (a column, a table, a keyword like `bs16`)."""

    text: str

    def __str__(self) -> str:
        return self.text


@attrs.frozen
class ParamBlock:
    params: tuple[Param, ...]
    loc: Loc | None = _loc_field()

    def get(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@attrs.frozen
class MechanismCall:
    name: str
    params: ParamBlock
    loc: Loc | None = _loc_field()


# ---- how much: budget bounds -------------------------------------------------------------


@attrs.frozen
class BudgetBound:
    """A stated bound such as `epsilon <= 16`, possibly quoted in another currency."""

    quantity: str  # epsilon, rho, delta, mu
    op: str  # <=, <, =
    value: Fraction
    with_: tuple[tuple[str, Fraction], ...] = ()  # e.g. delta = 1e-10 for an epsilon bound
    relation: str | None = None  # the neighbor relation the figure is quoted under
    method: str | None = None  # the conversion the figure was computed with (bs16, cks20)
    loc: Loc | None = _loc_field()

    def describe(self, number=None) -> str:
        """The bound as written in a spec (the formatter passes its own number printer)."""
        number = number or format_number
        text = f"{self.quantity} {self.op} {number(self.value)}"
        for k, v in self.with_:
            text += f" with {k} = {number(v)}"
        if self.relation:
            text += f" under {self.relation}"
        if self.method:
            text += f" by {self.method}"
        return text


# ---- what is published -------------------------------------------------------------------


@attrs.frozen
class ReleaseItem:
    kind: str  # "microdata", "count", "output"
    name: str  # table name (microdata, count) or a mechanism output name
    query: CountQuery | None = None
    loc: Loc | None = _loc_field()

    def describe(self) -> str:
        if self.kind == "count" and self.query is not None:
            return self.query.describe()
        return f"{self.kind} {self.name}"


@attrs.frozen
class Tuning:
    """How the mechanism's parameters were chosen: on `confidential`, `public` or `synthetic` data."""

    source: str
    note: str | None = None
    loc: Loc | None = _loc_field()


@attrs.frozen
class ProgramPart:
    """One spec file of a program, or a group of specs on disjoint universes (parallel)."""

    paths: tuple[str, ...]
    parallel: bool = False
    label: str | None = None


@attrs.frozen
class Program:
    title: str
    parts: tuple[ProgramPart, ...]


@attrs.frozen
class Note:
    """Prose that travels with a spec (a registry entry's text field, keyed by its dotted path).

    Notes carry what a spec cannot (yet) state formally; the audit lists them as unchecked."""

    key: str
    text: str
    loc: Loc | None = _loc_field()


@attrs.frozen
class Spec:
    """A whole .dps file."""

    title: str | None = None
    domain: Domain | None = None
    data: tuple[DataSource, ...] = ()
    invariants: tuple[CountQuery, ...] = ()
    public: tuple[PublicInfo, ...] = ()
    public_keys: tuple[PublicKeys, ...] = ()
    pufferfish: Pufferfish | None = None
    unit: Unit | None = None
    premetric: Premetric | None = None
    mechanism: MechanismCall | None = None
    budgets: tuple[BudgetBound, ...] = ()
    releases: tuple[ReleaseItem, ...] = ()
    tuning: Tuning | None = None
    program: Program | None = None
    notes: tuple[Note, ...] = ()
    language_version: str | None = None  # the `language X.Y` line, when the file has one
    path: str | None = attrs.field(default=None, eq=False, repr=False)
    text: str | None = attrs.field(default=None, eq=False, repr=False)
    # Comments are layout, not meaning: kept for `dpspec fmt`, ignored by equality and JSON.
    comments: tuple[tuple[str, tuple[str, ...]], ...] = attrs.field(default=(), eq=False, repr=False)
    eol_comments: tuple = attrs.field(default=(), eq=False, repr=False)  # see dpspec.language.eol_comments

    def note(self, key: str) -> str | None:
        return next((n.text for n in self.notes if n.key == key), None)

    def comments_for(self, field: str) -> tuple[str, ...]:
        return dict(self.comments).get(field, ())

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path)) if self.path else os.getcwd()


# ---- numbers and JSON --------------------------------------------------------------------


def format_number(value) -> str:
    """Print an exact number the way a person would write it: 0.05, 1e-10, 104/4099, 16."""
    if not isinstance(value, Fraction):
        return repr(value) if isinstance(value, float) else str(value)
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = max(twos, fives)
    scaled = value * 10**digits
    if abs(scaled.numerator) == 1 and digits > 4:
        return f"{'-' if scaled < 0 else ''}1e-{digits}"
    text = f"{abs(scaled.numerator):0{digits + 1}d}"
    sign = "-" if value < 0 else ""
    return f"{sign}{text[:-digits]}.{text[-digits:]}"


# How an attrs field is written by `to_jsonable` (its metadata): OPTIONAL, left out while it holds
# None or an empty tuple, list or dict (a key an answer gives only when it has it); INLINE, a
# mapping whose keys are written in the field's place (the further keys a plugin names itself).
JSON_OPTIONAL = {"json": "optional"}
JSON_INLINE = {"json": "inline"}


def _nothing(value) -> bool:
    return value is None or (isinstance(value, (tuple, list, dict)) and not value)


def to_jsonable(obj, *, fractions: str = "written", coerce: bool = False, nan: str = "keep"):
    """Plain JSON data for IR objects and the values around them: the one converter of every
    JSON output (the spec, manifests, budgets, audit evidence, reports).

    An integral Fraction becomes an int. fractions: how another Fraction is written: "written"
    (its written form: a float when it is a short decimal such as 3/4, the text "1/3" otherwise;
    the spec and audit evidence, where the exact value is the point) or "float" (its nearest
    float: the budget statement's public facts and components, which JSON readers add up).

    coerce: False for IR data, whose values are already plain (anything else passes through as
    it is, so `json.dumps` decides); True where values come from anywhere (a mechanism's facts,
    a rule's evidence): infinities become "inf" and "-inf" (JSON has no infinity), an object with
    `to_json` gives its own form, a set its sorted items, a numpy scalar its Python value and
    anything else its text. nan: what a NaN becomes when coercing: "keep" (the budget
    statement's, as it always wrote) or "null" (audit evidence: not a number is no value).
    An attrs object is the mapping of its fields in their order (`JSON_OPTIONAL` and `JSON_INLINE`
    fields as their metadata says), so a typed answer writes what the dict it replaces wrote.
    """

    def inner(value):
        return to_jsonable(value, fractions=fractions, coerce=coerce, nan=nan)

    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        if coerce and math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        if coerce and nan == "null" and math.isnan(obj):
            return None
        return obj
    if isinstance(obj, Fraction):
        if obj.denominator == 1:
            return obj.numerator
        text = format_number(obj) if fractions == "written" else ""
        return text if "/" in text else float(obj)
    if coerce and callable(getattr(obj, "to_json", None)):
        return obj.to_json()
    if isinstance(obj, Name):
        return obj.text
    if isinstance(obj, ParamBlock):
        return {p.name: inner(p.value) for p in obj.params}
    if isinstance(obj, dict):
        return {str(k): inner(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [inner(x) for x in obj]
    if coerce and isinstance(obj, (set, frozenset)):
        return [inner(x) for x in sorted(obj, key=str)]
    if attrs.has(type(obj)):
        skip = ("loc", "positions", "path", "text", "comments") if isinstance(obj, Spec) else ("loc", "positions")
        out = {}
        for f in attrs.fields(type(obj)):
            how = f.metadata.get("json")
            value = getattr(obj, f.name)
            if f.name in skip or (how == "optional" and _nothing(value)):
                continue
            if how == "inline":
                out.update(inner(value))
            else:
                out[f.name.rstrip("_")] = inner(value)
        return out
    if coerce:
        return inner(obj.item()) if hasattr(obj, "item") else str(obj)  # numpy scalars have item()
    return obj


def spec_sha256(spec: Spec) -> str:
    """The spec file's identity in manifests and reports (here, not in the compiler, so that
    reports need not reach back up the pipeline)."""
    return hashlib.sha256((spec.text or "").encode("utf-8")).hexdigest()
