"""Static checks of a spec: every name resolves, types and ranges hold, the mechanism's
parameters fit its schema, and every invariant the mechanism induces is declared.

All problems of a file are collected and raised together as one SpecError.
"""

from __future__ import annotations

import os

import attrs

from dpspec import ir
from dpspec.contract import plugins
from dpspec.language.diagnostics import unknown
from dpspec.errors import Diagnostic, SpecError
from dpspec.check import keys
from dpspec.check.sources import is_uri
from dpspec.check.invariants import determines
from dpspec.contract.mechanism import Mechanism
from dpspec.contract.params import located, resolve_params
from dpspec.language.pufferfish import class_problems

STAGES = ("raw", "collected", "edited", "imputed", "sampled", "tabulated", "finetuning")
PUBLIC_USES = ("total", "base")  # seed 2, Section 4: a total the release matches; counts shaping its base measure
TUNING_SOURCES = ("confidential", "public", "synthetic", "none")
BUDGET_QUANTITIES = ("epsilon", "rho", "delta", "mu")
CONVERSION_METHODS = ("bs16", "cks20")


@attrs.frozen
class CheckedSpec:
    """A spec that passed every check, with its mechanism resolved."""

    spec: ir.Spec
    mechanism: Mechanism | None
    params: dict
    induced: tuple[ir.CountQuery, ...]
    warnings: tuple[Diagnostic, ...] = ()  # what does not stop the spec (a data file not there yet)


class _Checker:
    def __init__(self, spec: ir.Spec):
        self.spec = spec
        self.problems: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.tables = {t.name: t for t in spec.domain.tables} if spec.domain else {}

    def error(self, message: str, node=None, hint: str | None = None, fallback=None):
        self.problems.append(Diagnostic(message, *ir.line_column(node, fallback), hint=hint))

    def unknown(self, kind, name, candidates, node, where=None):
        message, hint = unknown(kind, name, candidates, where)
        self.error(message, node, hint)

    # ---- the domain ----
    def domain(self):
        spec = self.spec
        if spec.domain is None:
            self.error(
                "the spec has no domain section: say who is protected (domain NAME { table ... })",
                fallback=ir.Loc(1, 1),
            )
            return
        if spec.domain.same_as:
            self.error(
                "'same as' belongs in a program's domain (it names the member specs' domains that are its "
                "data); a spec protects its own domain",
                spec.domain,
            )
        seen = set()
        for t in spec.domain.tables:
            if t.name in seen:
                self.error(f"table '{t.name}' is declared twice", t)
            seen.add(t.name)
            self.table(t)
        if spec.domain.stage and spec.domain.stage not in STAGES:
            self.unknown("life-cycle stage", spec.domain.stage, STAGES, spec.domain)
        geo = spec.domain.geography
        if geo:
            all_columns = {c.name for t in spec.domain.tables for c in t.columns}
            for i, level in enumerate(geo.levels):
                if level not in all_columns:
                    self.unknown("geography level column", level, all_columns, geo)
                if level in geo.levels[:i]:
                    self.error(f"geography level '{level}' appears twice", geo)
            cut = attrs.evolve(geo, loc=geo.components_loc or geo.loc)  # locate at the crosscut line
            for i, comp in enumerate(geo.components):
                if comp not in all_columns:
                    self.unknown("geography component column", comp, all_columns, cut)
                if comp in geo.levels or comp in geo.components[:i]:
                    self.error(f"geography component '{comp}' appears twice", cut)

    def table(self, t: ir.Table):
        names = set()
        for c in t.columns:
            if c.name in names:
                self.error(f"column '{c.name}' is declared twice in table '{t.name}'", c)
            names.add(c.name)
            ty = c.type
            if ty.kind == "int" and ty.low > ty.high:
                self.error(f"column '{c.name}': the range {ty.low}..{ty.high} is empty", c)
            if ty.kind == "enum" and len(set(ty.values)) != len(ty.values):
                dupes = sorted({v for v in ty.values if ty.values.count(v) > 1})
                self.error(f"column '{c.name}': the value set repeats {', '.join(dupes)}", c)
            if ty.kind == "category" and ty.parent:
                if ty.parent == c.name:
                    self.error(f"column '{c.name}' cannot be nested in itself", c)
                elif ty.parent not in t.column_names:
                    self.unknown("parent column", ty.parent, t.column_names, c, f"table '{t.name}'")
        if t.parent:
            if t.parent not in self.tables:
                self.unknown("table", t.parent, self.tables, t)
            if t.link and t.link not in t.column_names:
                self.unknown("link column", t.link, t.column_names, t, f"table '{t.name}'")
            parent = self.tables.get(t.parent)
            if t.link_bound is not None and t.link_bound < 1:
                self.error(
                    f"table '{t.name}': 'at most {t.link_bound}' must be at least 1 (a {t.parent} unit holds at least one {t.unit})",
                    t,
                )
            if parent and t.link and t.link not in parent.column_names:
                self.error(
                    f"table '{t.name}' links to '{t.parent}' by '{t.link}', but '{t.parent}' has no column '{t.link}'",
                    t,
                )

    # ---- data ----
    def data(self):
        seen = set()
        for d in self.spec.data:
            if d.table not in self.tables:
                self.unknown("table", d.table, self.tables, d)
            if d.table in seen:
                self.error(f"table '{d.table}' has two data sources", d)
            seen.add(d.table)
            if not d.path.lower().endswith((".csv", ".parquet", ".pq", ".csv.gz", "/")):
                self.error(
                    f"data source '{d.path}': dpspec reads .csv and .parquet files, and directories "
                    "of Parquet files (a path ending in /)",
                    d,
                )
            elif not is_uri(d.path) and not os.path.exists(self.data_path(d)):
                self.warnings.append(
                    Diagnostic(
                        f"the data file '{d.path}' of table '{d.table}' does not exist (looked for "
                        f"{self.data_path(d)}); the spec checks, but 'dpspec compile' needs it",
                        *ir.line_column(d),
                        severity="warning",
                    )
                )

    def data_path(self, d: ir.DataSource) -> str:
        """Relative to the spec's folder, as compile reads it."""
        return d.path if os.path.isabs(d.path) else os.path.join(self.spec.base_dir, d.path)

    # ---- count queries ----
    def query(self, q: ir.CountQuery, where: str):
        t = self.tables.get(q.table)
        if t is None:
            self.unknown("table", q.table, self.tables, q)
            return
        for col in q.by:
            if col not in t.column_names:
                self.unknown("column", col, t.column_names, q, f"table '{t.name}'")
        if q.level:
            geo = self.spec.domain.geography
            levels = geo.levels if geo else ()
            if q.level not in levels:
                self.unknown("geography level", q.level, levels, q)
            elif q.level not in t.column_names:
                self.error(f"{where}: table '{t.name}' has no column for geography level '{q.level}'", q)

    def where(self):
        for q in self.spec.invariants:
            self.query(q, "invariant")
        for p in self.spec.public:
            self.query(p.query, "public information")
            if p.use is not None and p.use not in PUBLIC_USES:
                self.unknown("use of public information", p.use, PUBLIC_USES, p)
        if self.spec.pufferfish is not None:
            for message, hint in class_problems(self.spec.pufferfish):
                self.error(message, self.spec.pufferfish, hint)

    # ---- unit and premetric ----
    def unit(self):
        u = self.spec.unit
        if u is None:
            self.error(
                "the spec has no unit: say what is protected (unit TABLE : hamming|symdiff)", fallback=ir.Loc(1, 1)
            )
            return
        if u.table not in self.tables:
            self.unknown("table", u.table, self.tables, u)
        if u.bound:
            if u.bound.k < 1:
                self.error("a unit holds at least one record", u)
            finer = self.tables.get(u.bound.finer)
            if finer is None:
                self.unknown("table", u.bound.finer, self.tables, u)
            elif finer.parent != u.table:
                self.error(
                    f"'holds at most {u.bound.k} {u.bound.finer}' needs table '{u.bound.finer}' to be linked to '{u.table}' (table {u.bound.finer} unit ... in {u.table} by ID)",
                    u,
                )

    def premetric(self):
        p = self.spec.premetric
        if p is None:
            self.error(
                "the spec has no premetric: say how change is measured (premetric pure|approximate delta D|zcdp|renyi alpha A|gdp)",
                fallback=ir.Loc(1, 1),
            )
            return
        allowed = {"approximate": ("delta",), "renyi": ("alpha",)}.get(p.kind, ())
        for name, value in p.options:
            if name not in allowed:
                what = f"premetric {p.kind} takes " + (", ".join(allowed) if allowed else "no options")
                self.error(f"unknown option '{name}': {what}", p)
        delta, alpha = p.option("delta"), p.option("alpha")
        if p.kind == "approximate":
            if delta is None:
                self.error("premetric approximate needs a delta (premetric approximate delta 1e-10)", p)
            elif not 0 < delta < 1:
                self.error(f"delta must be between 0 and 1 exclusive, got {ir.format_number(delta)}", p)
        if p.kind == "renyi":
            if alpha is None:
                self.error("premetric renyi needs an order (premetric renyi alpha 2)", p)
            elif alpha <= 1:
                self.error(f"the Rényi order alpha must exceed 1, got {ir.format_number(alpha)}", p)

    # ---- budgets, releases, tuning ----
    def budgets(self):
        for b in self.spec.budgets:
            if b.quantity not in BUDGET_QUANTITIES:
                self.unknown("budget quantity", b.quantity, BUDGET_QUANTITIES, b)
            if b.value < 0:
                self.error("a budget cannot be negative", b)
            for name, value in b.with_:
                if name not in BUDGET_QUANTITIES:
                    self.unknown("budget quantity", name, BUDGET_QUANTITIES, b)
                if name == "delta" and not 0 < value < 1:
                    self.error(f"delta must be between 0 and 1 exclusive, got {ir.format_number(value)}", b)
            if b.method and b.method not in CONVERSION_METHODS:
                self.unknown("conversion method", b.method, CONVERSION_METHODS, b)

    def releases(self, mechanism: Mechanism | None):
        for r in self.spec.releases:
            if r.kind == "count" and r.query is not None:
                self.query(r.query, "release")
            elif r.kind == "microdata" and r.name not in self.tables:
                self.unknown("table", r.name, self.tables, r)
            elif r.kind == "output" and mechanism is not None and r.name not in mechanism.outputs:
                self.unknown("output", r.name, mechanism.outputs, r, f"mechanism '{mechanism.name}'")
        t = self.spec.tuning
        if t and t.source not in TUNING_SOURCES:
            self.unknown("tuning source", t.source, TUNING_SOURCES, t)

    # ---- declared keys ----
    def keys(self, mechanism: Mechanism | None, params: dict):
        """Every key set the release has comes from declared values (`dpspec.check.keys`)."""
        if self.spec.domain is None:
            return
        self.problems.extend(keys.key_file_problems(self.spec))
        refused = set()

        def refuse(table, columns, why):
            for c in keys.undeclared(self.spec, table, columns):
                if (table, c) not in refused:
                    refused.add((table, c))
                    self.problems.append(keys.refusal(self.spec, table, c, why))

        for r in self.spec.releases:
            if r.kind == "count" and r.query is not None and r.query.table in self.tables:
                refuse(r.query.table, r.query.columns, f"keys the released table '{r.query.describe()}'")
        if mechanism is None or self.problems:
            return
        described = mechanism.output_keys(self.spec, params)
        self.producible(mechanism, described)
        for name, out in described.items():
            if not out.records and out.table in self.tables:
                refuse(out.table, out.columns, f"keys mechanism '{mechanism.name}''s output '{name}'")

    def producible(self, mechanism: Mechanism, described: dict):
        """A released microdata table, or a count table tabulated from one, must be records the
        mechanism produces: caught here, not after the run. A mechanism that describes none of its
        outputs (`output_keys` empty) is taken at its word at run time."""
        if not described:
            return
        produced = sorted(name for name, out in described.items() if out.records and name in self.tables)
        for r in self.spec.releases:
            table = r.name if r.kind == "microdata" else (r.query.table if r.kind == "count" and r.query else None)
            if table is None or table not in self.tables or table in produced:
                continue
            what = (
                f"microdata '{table}'"
                if r.kind == "microdata"
                else f"'{r.query.describe()}', a count of {table} microdata,"
            )
            has = f"its microdata: {', '.join(produced)}" if produced else "no microdata"
            outputs = sorted(n for n in mechanism.outputs if n not in produced)
            hint = (
                f"release one of its outputs instead ({', '.join('output ' + n for n in outputs)})" if outputs else None
            )
            self.problems.append(
                Diagnostic(
                    f"the spec releases {what} but mechanism '{mechanism.name}' produces {has}",
                    *ir.line_column(r),
                    hint=hint,
                )
            )

    # ---- the mechanism ----
    def mechanism(self):
        call = self.spec.mechanism
        if call is None:
            self.error("the spec has no mechanism section (mechanism NAME { ... })", fallback=ir.Loc(1, 1))
            return None, {}, ()
        mechs = plugins.mechanisms()
        if call.name not in mechs:
            broken = {name: why for name, why in plugins.failures()}
            if call.name in broken:
                self.error(f"the plugin providing mechanism '{call.name}' failed to load: {broken[call.name]}", call)
            else:
                self.unknown("mechanism", call.name, mechs, call)
            return None, {}, ()
        mech = mechs[call.name]
        if self.spec.domain is None:
            return mech, {}, ()
        params, problems = resolve_params(mech, call, self.spec)
        self.problems.extend(problems)
        if problems:
            return mech, params, ()
        plugin_problems = located(self.spec, mech.check(self.spec, params))
        self.problems.extend(plugin_problems)
        if plugin_problems:
            return mech, params, ()
        induced = tuple(mech.induced_invariants(self.spec, params))
        for q in induced:
            if not determines(self.spec.invariants, q, self.spec.domain):
                self.error(
                    f"mechanism '{call.name}' keeps '{q.describe()}' exact, but the invariants do not declare it: "
                    "the stated budget would be false (infinite under the declared multiverse); "
                    f"add '{q.describe()}' to the invariants section",
                    call,
                )
        return mech, params, induced


def check(spec: ir.Spec) -> CheckedSpec:
    """Check a spec; raises SpecError listing every problem."""
    if spec.program is not None:
        raise SpecError(
            [Diagnostic("this file is a program; check its specs or run 'dpspec budget' on it", 1, 1)],
            spec.path,
            spec.text,
        )
    c = _Checker(spec)
    c.domain()
    c.data()
    c.where()
    c.unit()
    c.premetric()
    c.budgets()
    mech, params, induced = c.mechanism()
    c.releases(mech)
    c.keys(mech, params)
    if c.problems:
        raise SpecError(c.problems, spec.path, spec.text)
    return CheckedSpec(spec, mech, params, induced, tuple(c.warnings))
