"""The `swap` mechanism: the permutation swapping algorithm (PSA) as a dpspec plugin.

The algorithm and the theorem live in `algorithm.py` and `theorem.py`; this module only ties
them to a spec: which table is swapped, which of its columns match, swap and hold, which
statistics the swap keeps exact (they must be declared invariants), and what the budget is
for the actual universe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    import pandas as pd

from fractions import Fraction

from dpspec.api import (
    DataError,
    Diagnostic,
    Mechanism,
    MechanismError,
    NativeFlavor,
    ParamSpec,
    ParameterSchema,
    Release,
    ir,
    unknown,
    LazyModule,
)
from dpspec_swap.roles import carried_tables, nesting_parents, roles, swap_table, without_implied
from dpspec_swap.theorem import log_odds, psa_epsilon_bound
from dpspec.api import OutputKeys, BudgetStatement, PureDP, record_measurement, recording_now
import dpspec

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
# pandas-heavy: imported when data is at hand, not for `check`
whatif = LazyModule("dpspec_swap.whatif", "whatif", globals())
_algorithm = LazyModule("dpspec_swap.algorithm", "_algorithm", globals())  # numpy and pandas, as whatif
_on_engine = LazyModule("dpspec_swap.on_engine", "_on_engine", globals())
accuracy = LazyModule("dpspec_swap.accuracy", "accuracy", globals())
_carry_on_engine = LazyModule("dpspec_swap.carry_on_engine", "_carry_on_engine", globals())
_neighbours = LazyModule("dpspec_swap.neighbours", "_neighbours", globals())

__version__ = "1.0.0"
MAX_DENOMINATOR = 1 << 64  # the exact Bernoulli sampler compares against integers below 2**64


def _param_loc(spec: ir.Spec, name: str) -> tuple[int | None, int | None]:
    call = spec.mechanism
    p = call.params.get(name) if call else None
    return ir.line_column(p, call.loc if call else None)


class PermutationSwapping(Mechanism):
    name = "swap"
    version = __version__
    description = (
        "Permutation swapping (PSA): within each stratum (the units sharing the match key's values), "
        "units selected at the swap rate exchange their swapping columns by a uniformly random "
        "derangement (a shuffle in which no selected unit keeps its own values)."
    )
    needs_data_for_budget = True  # eps_D depends on b, the largest stratum of the actual data
    engine_tables = True  # a Parquet table stays on the engine: facts, units and release are engine operations
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    uses_engine = True  # its units of work run on ctx.engine
    proof = "Bailie, Gong & Meng, Can swapping be differentially private?, Theorem II.1 (the first seed paper)"
    sampling = "exact: units selected by Bernoulli draws at the rational swap rate and swapped by uniform derangements built from integer draws (dpspec.api.bernoulli)"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the table of swap units (default: the spec's unit table)"),
            ParamSpec("match", "columns", "the match key: holding columns whose values form the strata", required=True),
            ParamSpec(
                "swap",
                "columns",
                "the swapping columns, exchanged among the selected units of a stratum",
                required=True,
            ),
            ParamSpec(
                "rate",
                "number",
                "the swap rate p: each unit of a stratum is selected with probability p",
                required=True,
                low=Fraction(0),
                high=Fraction(1),
            ),
        )
    )
    outputs: dict[str, str] = {}  # the swapped microdata are named after their tables

    # ---- static checks ----
    def check(self, spec, params):
        table = swap_table(spec, params)
        if table is None:
            return [
                Diagnostic(
                    "mechanism 'swap' needs a table: give 'table: NAME' or declare the spec's unit",
                    *_param_loc(spec, "table"),
                )
            ]
        problems = []
        for role in ("match", "swap"):
            for c in params[role]:
                if c not in table.column_names:
                    message, hint = unknown(
                        "column", c, table.column_names, f"table '{table.name}' (the swapped table)"
                    )
                    problems.append(Diagnostic(f"parameter '{role}': {message}", *_param_loc(spec, role), hint=hint))
        if problems:
            return problems
        match, swap = list(params["match"]), list(params["swap"])
        both = [c for c in match if c in swap]
        if both:
            problems.append(
                Diagnostic(
                    f"column(s) {', '.join(both)} cannot both be in the match key and be swapped: "
                    "a match column is held fixed within its stratum",
                    *_param_loc(spec, "swap"),
                )
            )
        for c in swap:
            parent = next(iter(nesting_parents(table, c)), None)  # held fixed, it fixes its own parents
            if parent is not None and parent not in match and parent not in swap:
                problems.append(
                    Diagnostic(
                        f"'{c}' is nested in '{parent}'; swapping it between records with different '{parent}' "
                        f"would break the nesting: add '{parent}' to the match key",
                        *_param_loc(spec, "swap"),
                    )
                )
        for child in spec.domain.tables:
            if child.parent == table.name and child.link in swap:
                problems.append(
                    Diagnostic(
                        f"'{child.link}' links table '{child.name}' to '{table.name}' and cannot be swapped",
                        *_param_loc(spec, "swap"),
                    )
                )
        rate = params["rate"]
        if rate.denominator > MAX_DENOMINATOR:
            problems.append(
                Diagnostic(
                    f"rate {rate} has a denominator above 2^64, too fine for the exact sampler; give it with fewer digits",
                    *_param_loc(spec, "rate"),
                )
            )
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(swap_table(spec, params).name, "hamming", "pure")

    def induced_invariants(self, spec, params):
        """match x hold and match x swap, plus the carried units' unswapped columns.

        Household ids and the persons' own columns never move, so when persons are carried
        along every count of persons by their unswapped columns is published exactly too.
        """
        if self.check(spec, params):
            return []  # the parameters are wrong; check() has said how
        table = swap_table(spec, params)
        match, swap, hold = roles(spec, params)
        queries = [
            ir.CountQuery(table.name, without_implied(table, match + hold)),
            ir.CountQuery(table.name, without_implied(table, match + swap)),
        ]
        for child in carried_tables(spec, table):
            kept = [c for c in child.column_names if c not in swap]
            queries.append(ir.CountQuery(child.name, without_implied(child, kept)))
        return list(dict.fromkeys(queries))

    def output_keys(self, spec, params):
        """Microdata: the swapped table and each linked one are records (one per unit; how many
        is an invariant), not cells. Released count tables of them are the compiler's, one row
        per declared cell."""

        table = swap_table(spec, params)
        if table is None:
            return {}
        return {t.name: OutputKeys(t.name, records=True) for t in (table, *carried_tables(spec, table))}

    # ---- facts and budget ----
    def _frame(self, spec, params, data) -> pd.DataFrame:
        table = swap_table(spec, params)
        if table.name not in data:
            raise DataError(f"mechanism 'swap' needs data for table '{table.name}' (data {table.name} from \"FILE\")")
        return data[table.name]

    def public_facts(self, spec, params, data):
        """b and its stratum, and b under alternative match keys; all functions of the invariants.

        A stratum's size is a marginal of the declared (match x hold) count; the alternative keys
        kept here are those whose counts the declared invariants publish as well.
        """
        df = self._frame(spec, params, data)
        match, swap, hold = roles(spec, params)
        if isinstance(df, dpspec.api.EngineTable):  # held by the engine: per-stratum aggregates from it
            own, records = _on_engine.engine_stratification(df, match, swap + hold + match), df.rows
            measure = _on_engine.alternative_measure(df)
            b, key = own["b"], own["largest_stratum"]
            strata, two_or_more = own["strata"], own["strata_of_two_or_more"]
        else:
            measure, records = None, len(df)
            b, key = _algorithm.largest_stratum(df, match, swap + hold)
            sizes = whatif.stratum_sizes(df, match)
            strata, two_or_more = int((sizes > 0).sum()), int((sizes >= 2).sum())
        alternatives = whatif.stratifications(spec, params, df, measure=measure, only_from_invariants=True)
        return {
            "b": b,
            "largest_stratum": key,
            "match": match,
            "swap": swap,
            "hold": hold,
            "records": int(records),
            "strata": strata,
            "strata_of_two_or_more": two_or_more,
            "alternatives": alternatives,
        }

    def fact_labels(self, spec, params):
        """Readable labels for the public report; the unit's own word ('households') as the unit."""
        table = swap_table(spec, params)
        units = f"{table.unit}s" if table is not None and table.unit else "records"
        stratum = f"stratum (a group of {units} sharing the match key's values)"
        return {
            "b": f"b: {units} in the largest {stratum} that holds two different {units}",
            "largest_stratum": f"The largest stratum's match-key values (it holds the b {units})",
            "match": "Match key: columns whose values form the strata",
            "swap": "Swapped columns: exchanged between selected units",
            "hold": "Held columns: never exchanged",
            "records": f"{units[:1].upper()}{units[1:]} in the data",
            "strata": "Strata (number of groups)",
            "strata_of_two_or_more": f"Strata holding at least two {units}",
            "alternatives": "Other match keys the invariants already publish, and their b",
            "alternatives.match": "match key",
            "alternatives.b": f"b ({units} in the largest stratum)",
            "alternatives.largest_stratum": "where the largest stratum is",
            "alternatives.strata_of_two_or_more": f"strata of two or more {units}",
            "alternatives.is_spec": "this spec's key",
            "alternatives.from_invariants": "published by the invariants",
            "alternatives.keeps_nesting": "keeps the geography nested",
        }

    def budget(self, spec, params, facts):

        if "b" not in facts:
            raise MechanismError(
                "the swap budget depends on b, the largest stratum of the data; compute the facts first"
            )
        b, p = int(facts["b"]), params["rate"]
        eps = psa_epsilon_bound(b, p)
        return BudgetStatement(
            PureDP(eps),
            worst=None,
            per_universe=True,
            depends_on={"b": b, "largest_stratum": facts.get("largest_stratum")},
            notes=budget_notes(b, p, facts.get("match", params["match"]), _units(spec, params)),
        )

    # ---- running ----
    def run(self, spec, params, data, ctx):
        table = swap_table(spec, params)
        df = self._frame(spec, params, data)
        match, swap, _ = roles(spec, params)
        engine = ctx.engine
        if isinstance(df, dpspec.api.EngineTable):
            return self._run_on_engine(spec, params, df, engine, data)
        if any(isinstance(t, dpspec.api.EngineTable) for t in data.values()):
            # The swapped table was read into this process (CSV) but a linked one is held by the
            # engine: carry_along joins in this process, so that one is read here too.
            data = {
                name: engine.to_pandas(t).astype({c: t.dtype(c) for c in t.columns})
                if isinstance(t, dpspec.api.EngineTable)
                else t
                for name, t in data.items()
            }
        self._record_invariants(spec, params, df)
        # On an engine (what `compile` gives): one unit per stratum with its own keyed stream, so
        # every engine releases the same bytes; without one (older callers), the batched draw.
        result = (
            _algorithm.swap_records_on(engine, df, match, swap, params["rate"])
            if engine is not None
            else _algorithm.swap_records(df, match, swap, params["rate"], ctx.rng)
        )
        outputs = {table.name: result.data}
        for child in carried_tables(spec, table):
            if child.name not in data:
                raise DataError(f"table '{child.name}' has a data source but no data was loaded for it")
            carried = [c for c in swap if c in child.column_names]
            outputs[child.name] = _algorithm.carry_along(data[child.name], child.link, df, result, carried)
        run = {
            "swapped_records": result.n_selected,
            "swapped_fraction": result.n_selected / len(df) if len(df) else 0.0,
            "strata_touched": result.n_strata_touched,
            "tables": self._errors(spec, params, data, outputs),
        }
        # The summary of this one run has the shape `utility` gives for several runs.
        internal = {**accuracy.summarize(params["rate"], [run]), "run": run}
        return Release(
            outputs=outputs, facts={"swap_table": table.name}, internal=internal, notes=carried_notes(table, outputs)
        )

    def _record_invariants(self, spec, params, df) -> None:
        """What `dpspec verify --replay` reads. Swapping adds no noise: its protection is the uniform
        derangement within strata whose counts it publishes exactly, so what it measures is those
        invariants (kind "none": a neighbour in the same universe must leave them unchanged)."""

        if not recording_now():  # counting costs a pass over the records: only when a replay reads it
            return
        for q in self.induced_invariants(spec, params):
            if q.table == swap_table(spec, params).name and q.columns:
                counts = df.groupby(list(q.columns), observed=True).size()
                record_measurement(
                    q.describe(),
                    counts.to_numpy(),
                    "none",
                    keys=[counts.index.get_level_values(i) for i in range(counts.index.nlevels)],
                )

    def _run_on_engine(self, spec, params, df, engine, data) -> Release:
        """The PSA on an engine-held table (`on_engine`): the release is streamed from the engine;
        linked tables take their swapped values by an engine join (`carry_on_engine`)."""
        table = swap_table(spec, params)
        match, swap, hold = roles(spec, params)
        children = carried_tables(spec, table)
        carried = {child.name: [c for c in swap if c in child.column_names] for child in children}
        keep = list(dict.fromkeys(c for cols in carried.values() for c in cols))
        held = _on_engine.swap_engine_table(engine, df, match, swap, params["rate"], keep_before=keep)
        release = _on_engine.streamed_release(engine, df, held)
        outputs = {table.name: release}
        counters = {table.name: (df.count, release.count)}
        try:
            for child in children:
                if child.name not in data:
                    raise DataError(f"table '{child.name}' has a data source but no data was loaded for it")
                source = data[child.name]
                outputs[child.name] = _carry_on_engine.carry_on_engine(
                    engine, source, child.link, held, df, carried[child.name]
                )
                counters[child.name] = (lambda by, t=source: engine.count(t, by), outputs[child.name].count)
        except Exception:
            for out in outputs.values():  # the engine's caches of this run: nothing will read them
                out.release()
            raise
        figures = _on_engine.run_figures(engine, held, match)
        tables = accuracy.queries(spec, _on_engine.default_query(table, swap, hold))
        errors = _on_engine.table_errors(tables, self.induced_invariants(spec, params), counters)
        run = {
            "swapped_records": figures["swapped_records"],
            "swapped_fraction": figures["swapped_records"] / df.rows if df.rows else 0.0,
            "strata_touched": figures["strata_touched"],
            "tables": errors,
        }
        internal = {**accuracy.summarize(params["rate"], [run]), "run": run}
        return Release(
            outputs=outputs, facts={"swap_table": table.name}, internal=internal, notes=carried_notes(table, outputs)
        )

    def _errors(self, spec, params, data, outputs) -> dict:
        """This run's MAPE for each released count table (default: swap x hold, the paper's)."""
        table = swap_table(spec, params)
        match, swap, hold = roles(spec, params)
        default = ir.CountQuery(table.name, tuple(swap + hold))

        tables = accuracy.queries(spec, default)
        return accuracy.table_errors(tables, self.induced_invariants(spec, params), data, outputs)

    def utility(self, spec, params, data, releases):
        """Per released table, the MAPE against the confidential data over the runs."""
        return accuracy.summarize(params["rate"], [r.internal["run"] for r in releases])

    def neighbours(self, spec, params):
        """A two-record stratum whose records exchange their held values (`dpspec verify`)."""
        return _neighbours.swap_pairs(self, spec, params)


def carried_notes(table: ir.Table, outputs: dict) -> tuple[str, ...]:
    """The release's note that linked tables moved with the swapped one, when they did."""
    if len(outputs) < 2:
        return ()
    return (f"{len(outputs) - 1} linked table(s) carried along with the swapped {table.name}",)


def _units(spec, params) -> str:
    table = swap_table(spec, params)
    return f"{table.unit}s" if table is not None and table.unit else "records"


THEOREM = "Theorem II.1 of Bailie, Gong & Meng (the budget of swapping)"


def budget_notes(b: int, p: Fraction, match, units: str = "records") -> tuple[str, ...]:
    """The theorem's branch with the numbers filled in and every symbol in words (a printed
    report has no hover text), and why there is no finite worst case."""
    key = " x ".join(match) if match else "(no match key: one stratum)"
    largest = (
        f"b = {b:,}: the number of {units} in the largest stratum (a group of {units} with the same values "
        f"of the match key {key}) that holds two different {units}"
    )
    if b == 0:
        notes = [
            f"b = 0: no stratum of the match key {key} holds two different {units}, so nothing can move: epsilon = 0"
        ]
    elif p in (0, 1):
        notes = [
            largest,
            f"swap rate p = {ir.format_number(p)} makes the swap deterministic on a stratum that could differ: "
            f"no finite epsilon ({THEOREM})",
        ]
    else:
        branch = (
            "for a swap rate p of at most 1/2, epsilon = ln(b+1) - ln(o)"
            if p <= Fraction(1, 2)
            else "for a swap rate p above 1/2, epsilon = max(ln(o), ln(b+1) - ln(o))"
        )
        notes = [
            largest,
            f"{THEOREM}: {branch}, where ln is the natural logarithm and o = p/(1-p) the odds that a unit "
            f"is selected for swapping; here p = {ir.format_number(p)}, so ln(o) = {log_odds(p):.6f}",
        ]
    notes.append(
        "per universe: b is a function of the invariants, so epsilon differs between universes; "
        "no finite worst case exists because the domain does not bound the number of units, "
        "and epsilon grows as ln(b+1) with the largest stratum"
    )
    notes.append("finer match keys give smaller b and a smaller nominal epsilon only by publishing more invariants")
    return tuple(notes)
