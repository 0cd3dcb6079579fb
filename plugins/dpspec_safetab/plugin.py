"""The `safetab` mechanism: SafeTab-P (persons, two stages) and SafeTab-H (households, detail
chosen from SafeTab-P's published totals), the designs behind the 2020 Detailed DHC-A and B.

Native flavor: zCDP under add/remove one record of the table (one person for SafeTab-P, one
household for SafeTab-H), as production states its budgets; the compiler converts to the
spec's relation. Geography levels come from the domain (the hierarchy, plus the `crosscut`
components such as places and AIAN/NH areas), with the root called `nation`; each level's units
are its column's declared values and the groups the public iteration table's (`geography`), so
the release's keys never come from the records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    from .iterations import IterationTable

import os
from fractions import Fraction

import attrs

from dpspec.api import (
    DataError,
    Diagnostic,
    ExpectedError,
    Mechanism,
    MechanismError,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    Release,
    SpecError,
    ir,
    located,
    record_adaptive_rows,
    require_regular,
    LazyModule,
)

from . import design as design_mod, geography
from dpspec.api import (
    shown as shown_value,
    ReleaseColumns,
    BudgetStatement,
    PublicCondition,
    ZCDP,
    discrete_gaussian_variance,
)

# imported on first use: `dpspec --help` loads this module, not them
_change_one = LazyModule("dpspec_safetab.change_one", "_change_one", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_tabulate = LazyModule("dpspec_safetab.tabulate", "_tabulate", globals())
# pandas: imported when SafeTab runs, not when it is checked
_iterations = LazyModule("dpspec_safetab.iterations", "_iterations", globals())
_records = LazyModule("dpspec_safetab.records", "_records", globals())
_measured = LazyModule("dpspec_safetab.measured", "_measured", globals())
_likelihood = LazyModule("dpspec_safetab.likelihood", "_likelihood", globals())
_neighbours = LazyModule("dpspec_safetab.neighbours", "_neighbours", globals())

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())
np = LazyModule("numpy", "np", globals())

LEVEL_NAMES = tuple(design_mod.ITERATION_LEVELS)

__version__ = "1.0.0"
TABLE_PATHS = {"codes": "codes", "iterations": "iterations", "mapping": "code_map"}


def fanout_text(fanouts: dict) -> str:
    """'k = 9 at every iteration level and geography granularity (h_r * ...)' for the budget
    notes; selections with the same k and derivation are named together."""
    groups: dict = {}
    for (level, gran), f in sorted(fanouts.items()):
        bound = (
            f"h_r * max(2, r) + h_e with h_r = {f['h_race']} and h_e = {f['h_ethnicity']}, the most race and "
            f"ethnicity groups one code maps to, and r = {f['max_race_codes']}, the most race codes of one record"
        )
        k, derived = f["fanout_used"], f["fanout"]
        if not f.get("declared"):
            how = bound
        elif k == derived:
            how = f"the declared max_groups, equal to the mapping's bound {bound}"
        elif k > derived:
            how = f"the declared max_groups, above the mapping's bound {derived}: {bound}"
        else:
            how = (
                f"the declared max_groups, below the mapping's bound {derived} ({bound}): "
                "a record in more groups is a data error"
            )
        groups.setdefault((f["fanout_used"], how), []).append(f"level {level} {gran}")
    if len(groups) == 1:
        (((k, how), _),) = groups.items()
        return f"k = {k} at every iteration level and geography granularity ({how})"
    return "; ".join(f"k = {k} at {', '.join(where)} ({how})" for (k, how), where in groups.items())


class SafeTab(Mechanism):
    name = "safetab"
    version = __version__
    description = (
        "SafeTab (2020 Detailed DHC-A/B): counts by detailed race/ethnicity group and geography, "
        "the detail of each table chosen by thresholds on a noisy total, integer noise from an exact "
        "discrete Gaussian (bell-shaped) distribution, budget in zCDP."
    )
    proof = "U.S. Census Bureau, SafeTab-P and SafeTab-H (2023): zCDP of discrete Gaussian counts (Canonne, Kamath & Steinke 2020; Bun & Steinke 2016), each table's detail chosen by post-processing of noisy (SafeTab-P) or published (SafeTab-H) totals"
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Gaussian rejection sampler on integers and rationals (dpspec.api.discrete_gaussian), no floating point"
    parameters = ParameterSchema(
        (
            ParamSpec(
                "table", "table", "the record table (persons for SafeTab-P, households for SafeTab-H)", required=True
            ),
            ParamSpec("race_codes", "columns", "the columns holding a record's detailed race codes", required=True),
            ParamSpec(
                "ethnicity_code", "column", "the column holding a record's detailed ethnicity code", required=True
            ),
            ParamSpec("codes", "string", "the race/ethnicity code table (Parquet or CSV, column code)", required=True),
            ParamSpec(
                "iterations",
                "string",
                "the characteristic-iteration table (iteration, kind, level, alone, detailed_only, coarse_only)",
                required=True,
            ),
            ParamSpec("code_map", "string", "the code -> iteration mapping (code, iteration)", required=True),
            ParamSpec(
                "max_race_codes",
                "int",
                "maximum race codes per record (r in the fan-out h_r*max(2,r)+h_e)",
                required=True,
                low=Fraction(1),
                high=Fraction(64),
            ),
            ParamSpec(
                "max_groups",
                "int",
                "declared maximum number of groups per record (default: the mapping's bound)",
                low=Fraction(1),
            ),
            ParamSpec(
                "detailed_geographies",
                "list",
                "geography levels that tabulate detailed iterations (the others tabulate coarse ones)",
                items="level",
            ),
            ParamSpec("stage1_fraction", "number", "share of each cell's rho spent on the stage-1 total (SafeTab-P)"),
            ParamSpec(
                "public_totals", "string", "published population-group totals that choose the detail (SafeTab-H)"
            ),
            ParamSpec(
                "zero_suppression",
                "number",
                "probability that a zero total is suppressed",
                low=Fraction(0),
                high=Fraction(1),
            ),
            ParamSpec("suppress_at", "list", "geography levels whose small totals are suppressed", items="level"),
            ParamSpec(
                "total_rho",
                "number",
                "the declared total rho; the per-cell budgets must add up to it exactly",
                low=Fraction(0),
            ),
            ParamSpec(
                "tables",
                "map",
                "per table: rho and thresholds per geography and iteration level, and the ladder of stage-2 details",
                required=True,
                keys="names",
                values=ParamSpec(
                    "",
                    "block",
                    "one table's budget, thresholds and ladder",
                    fields=(
                        ParamSpec(
                            "rho",
                            "map",
                            "rho per geography level and iteration level",
                            required=True,
                            keys="levels",
                            values=ParamSpec(
                                "",
                                "map",
                                "rho per iteration level",
                                keys="choices",
                                choices=LEVEL_NAMES,
                                values=ParamSpec("", "number", "", low=Fraction(0)),
                            ),
                        ),
                        ParamSpec(
                            "thresholds",
                            "map",
                            "the thresholds on the stage-1 total that choose the detail, "
                            "per geography level and iteration level",
                            required=True,
                            keys="levels",
                            values=ParamSpec(
                                "",
                                "map",
                                "thresholds per iteration level",
                                keys="choices",
                                choices=LEVEL_NAMES,
                                values=ParamSpec("", "list", "", items="int"),
                            ),
                        ),
                        ParamSpec(
                            "details",
                            "list",
                            'the ladder: "total", then finer tables such as "QSEX*AGE4"',
                            required=True,
                            items=ParamSpec("", "query", "", table_param="table"),
                        ),
                    ),
                ),
            ),
        )
    )
    release_size_varies = True  # the chosen details and suppression depend on the noise
    # a Parquet record table stays on the engine: it is checked from counts by code combination
    # and tabulated by partitions where it lives (tabulate.run), so on Spark no record reaches the driver
    engine_tables = True
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    uses_engine = True  # its units of work run on ctx.engine
    outputs = {
        "counts": "long-form counts: table, geography, geocode, group, group_level, detail, "
        "the detail's variables ('*' when not broken down), count"
    }

    # ---- checks ------------------------------------------------------------------------
    def design(self, spec, params):
        design, problems = design_mod.parse(spec, dict(params))
        if problems:
            raise SpecError(located(spec, problems))
        return design

    def check(self, spec, params):
        problems = []
        table = spec.domain.table(params["table"])
        for col in [*params["race_codes"], params["ethnicity_code"]]:
            if table.column(col) is None:
                problems.append(Diagnostic(f"'{col}' is not a column of table '{table.name}'"))
        levels, _ = design_mod.geo_levels(spec)
        for g in levels[1:]:
            if table.column(g) is None:
                problems.append(Diagnostic(f"table '{table.name}' has no column for geography level '{g}'"))
        reads_records = any(d.table == table.name for d in spec.data)  # a description (an import) cannot run
        if reads_records:
            problems.extend(geography.undeclared_levels(spec, table, levels[1:]))
        problems.extend(geography.iteration_file_problems(spec, params["iterations"]))
        if params.get("public_totals") and reads_records:
            problems.extend(geography.public_totals_problems(spec))
        if len(params["race_codes"]) > params["max_race_codes"]:
            problems.append(
                Diagnostic(
                    f"race_codes lists {len(params['race_codes'])} columns, more than "
                    f"max_race_codes = {params['max_race_codes']}",
                    path=("race_codes",),
                )
            )
        if problems:
            return problems
        design, problems = design_mod.parse(spec, dict(params))
        if design is not None and not problems and design.max_groups is None:
            problems = self._fanout_problems(spec, params, design)
        return problems

    def _fanout_problems(self, spec, params, design) -> list:
        """Without a declared max_groups, `run`'s fan-out k is the public iteration table's bound,
        larger than the 1 `design.parse` could assume: each cell's noise is checked again with it, so
        a rho that checks also compiles. (The table is public and read with pandas, as the budget's
        statement reads it.)"""
        fanouts = self.fanouts(spec, params, design)
        problems = []
        for td in design.tables:
            for cell in td.cells:
                k = fanouts[(cell.level, design.granularity(cell.geo))]["fanout_used"]
                problem = design_mod.sampler_problem(
                    f"{td.name}.rho {cell.geo}.level{cell.level}", cell.rho, design.stage1_fraction, k
                )
                if problem is not None:
                    problems.append(Diagnostic(problem, path=cell.where))
        return problems

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "symdiff", "zcdp")

    def output_keys(self, spec, params):
        """The long-form counts are keyed by no column of the table: their geocodes are the
        declared units of each geography level and their groups the public iteration table's
        (both checked by the run itself, `tabulate.check_units`), and which detail and rows a
        group has follows from its noisy stage-1 total (paid for) or from published totals."""
        return {"counts": OutputKeys(params["table"])}

    def release_columns(self, spec, params):
        """The long-form counts `likelihood` reads: one row per (table, geography, geocode, group,
        detail and its variables' values), a whole-number count each."""

        design = self.design(spec, params)
        variables = list(dict.fromkeys(v for td in design.tables for d in td.details for v in d.variables))
        key = ("table", "geography", "geocode", "group", "group_level", "detail", *variables)
        return {"counts": ReleaseColumns((*key, "count"), key=key, numbers=("group_level", "count"))}

    # ---- budget ------------------------------------------------------------------------
    def budget(self, spec, params, facts):

        design = self.design(spec, params)
        total = design.total_rho()
        fanouts = self.fanouts(spec, params, design)
        notes = [
            f"rho = {ir.format_number(total)} = the sum over tables, geography levels and iteration levels of their rho "
            "(sequential composition: every record is in one unit of each level; units of a level compose in parallel)",
            "sensitivity (how much one record can change the counts, which sets the noise): a record falls into at "
            "most k groups of one iteration level and geography granularity, so each count moves by 1 in at most k "
            "cells, the L2 sensitivity squared (the sum of the squared changes) is k and every noise variance is "
            f"k / (2 rho_stage), rho_stage being the stage's share of rho; here {fanout_text(fanouts)}",
        ]
        if design.two_stage:
            notes.append(
                f"two stages: stage 1 spends {ir.format_number(design.stage1_fraction)} of each cell's rho on "
                "the group totals, which are used only to choose the stage-2 table through the thresholds; "
                "stage 2 spends the rest on the chosen table (its cells partition the group); "
                "detailed-only groups get their total with the whole rho"
            )
        else:
            notes.append(
                "one stage: the detail of each table is chosen from published totals (public information), "
                "so all of rho is spent on the chosen table"
            )

        change_one = _change_one.change_one_note(spec, params, total)
        if change_one:
            notes.append(change_one)
        public = []
        if params.get("public_totals"):
            public.append(
                PublicCondition(
                    "population-group totals published by SafeTab-P choose each table's detail; the guarantee is "
                    "conditioned on them (Z-Pufferfish: the choice is a function of public information)",
                    str(params["public_totals"]),
                )
            )
        stmt = BudgetStatement.fixed(ZCDP(total), *notes)  # exact

        return attrs.evolve(stmt, public=tuple(public), components=tuple(self.components(design, fanouts)))

    def change_one(self, spec, params, budget):
        return _change_one.change_one_budget(spec, params, budget)

    def fanouts(self, spec, params, design) -> dict:
        """{(iteration level, granularity): production's bound with h_r, h_e and the k used}, read
        from the bundled (public) code -> iteration mapping, so the statement names the true k."""
        table = self._iteration_table(spec, params)
        out = {}
        for td in design.tables:
            for cell in td.cells:
                key = (cell.level, design.granularity(cell.geo))
                if key not in out:
                    k, bound = _tabulate.fanout_of(design, table, *key)
                    out[key] = {**bound, "fanout_used": k, "declared": design.max_groups is not None}
        return out

    def components(self, design, fanouts: dict | None = None) -> list[dict]:
        """Every (table, geography level, iteration level, stage) budget, exact, with the fan-out k
        and the noise variance k / (2 rho) of each measured stage."""
        out = []
        for td in design.tables:
            for cell in sorted(td.cells, key=lambda c: (design.geo_levels.index(c.geo), c.level)):
                stages = design.stages(cell) or [("not measured", Fraction(0))]
                fan = (fanouts or {}).get((cell.level, design.granularity(cell.geo)))
                for stage, rho in stages:
                    part = {
                        "table": td.name,
                        "geography": cell.geo,
                        "iteration_level": cell.level,
                        "stage": stage,
                        "rho": rho,
                        "rho_exact": ir.format_number(rho),
                    }
                    if fan is not None and rho > 0:
                        part["fanout"] = fan["fanout_used"]
                        part["noise_variance"] = float(f"{float(design_mod.sigma2(fan['fanout_used'], rho)):.9g}")
                    out.append(part)
        return out

    def expected_error(self, spec, params, facts):
        """Per (table, geography level, iteration level, stage): the variance of each noisy count,
        the discrete Gaussian's exact variance at k / (2 rho_stage), from the design alone."""

        design = self.design(spec, params)
        out = []
        for part in self.components(design, self.fanouts(spec, params, design)):
            if "fanout" not in part:
                continue
            sigma2 = design_mod.sigma2(part["fanout"], part["rho"])
            out.append(
                ExpectedError(
                    f"{part['table']}: {part['geography']}, iteration level {part['iteration_level']}, {part['stage']}",
                    part["geography"],
                    f"{part['table']} level {part['iteration_level']} {part['stage']}",
                    float(discrete_gaussian_variance(sigma2)),
                    "noisy count",
                )
            )
        return out

    # ---- run ---------------------------------------------------------------------------
    def noise_sigma2(self, fanout: int, rho):
        """The noise parameter of a count a record reaches in `fanout` cells, spending rho:
        fanout / (2 rho). `run` and the verifier's neighbours both draw with it."""
        return design_mod.sigma2(fanout, rho)

    def _iteration_table(self, spec, params) -> IterationTable:
        return _iterations.IterationTable.load(spec.base_dir, {k: params[v] for k, v in TABLE_PATHS.items()})

    def _public_totals(self, spec, params):
        path = params.get("public_totals")
        if not path:
            return None

        full = path if os.path.isabs(path) else os.path.join(spec.base_dir, path)
        try:
            require_regular(full)  # never a device such as /dev/zero
            frame = (
                pd.read_parquet(full)
                if full.endswith(".parquet")
                else pd.read_csv(full, dtype=str, keep_default_na=False)
            )
        except FileNotFoundError:
            raise DataError(f"{full}: the published totals do not exist") from None
        except (OSError, ValueError) as exc:
            raise DataError(f"{full}: cannot read the published totals: {exc}") from None
        frame = frame.reset_index(drop=True)  # row numbers of the file, for errors
        need = {"geography", "geocode", "group", "count"}
        if not need <= set(frame.columns):
            raise DataError(f"{full}: the published totals need the columns {', '.join(sorted(need))}")
        variables = [c for c in frame.columns if c not in need | {"table", "group_level", "detail"}]
        totals = frame
        for v in variables:  # the group totals are the rows with no breakdown
            totals = totals[totals[v].astype(str) == "*"]
        totals = totals[["geography", "geocode", "group", "count"]].copy()
        totals["count"] = pd.to_numeric(totals["count"], errors="coerce")
        if totals["count"].isna().any():
            raise DataError(f"{full}: column count holds a value that is not a number")
        _check_public_counts(totals, full)
        return totals.drop_duplicates(["geography", "geocode", "group"])

    def run(self, spec, params, data, ctx):
        design = self.design(spec, params)
        table = self._iteration_table(spec, params)
        frame = data[params["table"]]
        source = next((d.path for d in spec.data if d.table == params["table"]), params["table"])
        inputs = _records.Inputs(
            frame,
            tuple(params["race_codes"]),
            params["ethnicity_code"],
            design_mod.variable_values(spec, params, design),
            source,
        )
        undeclared = geography.undeclared_levels(spec, spec.domain.table(params["table"]), design.geo_levels[1:])
        if undeclared:  # records handed over without a `data` statement: the check could not require this
            raise MechanismError(undeclared[0].message)
        units = geography.declared_units(spec, params["table"], design.geo_levels)
        public = self._public_totals(spec, params)
        if public is not None:  # the published totals are keyed by declared units and groups only
            geography.check_public_keys(
                public, units, table.iterations["iteration"], _full(spec, params["public_totals"])
            )
        outcome = _tabulate.run(
            design,
            inputs,
            table,
            ctx.rng,
            units,
            public,
            noise=self.noise_sigma2,
            engine=ctx.engine,
            keep_truths=ctx.keep_truths,
        )
        if design.two_stage or design.suppression is not None:  # rows follow noisy totals: detail chosen, suppressed
            # row by row: a (unit, group)'s rows follow that unit and group's own noisy totals only
            record_adaptive_rows(
                "counts",
                [
                    "table",
                    "geography",
                    "geocode",
                    "group_level",
                    "group",
                    "detail",
                    *design_mod.variable_values(spec, params, design),
                ],
                _governing,
            )
        facts = {
            "design": [
                {**f, "rho": ir.format_number(f["rho"]), "sigma2": {k: float(v) for k, v in f["sigma2"].items()}}
                for f in outcome.facts
            ],
            "fanout": outcome.fanouts,
            "two_stage": design.two_stage,
            "stage1_fraction": None if design.stage1_fraction is None else ir.format_number(design.stage1_fraction),
            "zero_suppression": None if design.suppression is None else float(design.suppression),
            "suppress_at": list(design.suppress_at),
            "ladders": {td.name: [d.name for d in td.details] for td in design.tables},
        }
        internal = {"errors": outcome.errors}
        if outcome.compared is not None:
            internal["compared"] = outcome.compared
        return Release(outputs={"counts": outcome.rows}, facts=facts, internal=internal)

    def compared_counts(self, spec, params, data, release):
        """Every released count beside its confidential count, per table, geography level,
        iteration level and role (a run with keep_truths; else None). Suppressed totals are not
        released and so not compared."""
        frame = release.internal.get("compared")
        return None if frame is None else _measured.compared_counts(self.design(spec, params), frame)

    def likelihood(self, spec, params, outputs):
        """P(published counts | true counts) for `dpspec infer`: detail choice, values, suppression."""
        return _likelihood.safetab_likelihoods(self, spec, params, outputs)

    def neighbours(self, spec, params):
        """A miniature one-tract universe and batched measurement transcripts for `dpspec verify`."""
        return _neighbours.safetab_pairs(self, spec, params)

    def utility(self, spec, params, data, releases):
        return {
            "runs": len(releases),
            "error_by_level_and_detail": _tabulate.summarize_errors([r.internal["errors"] for r in releases]),
        }


def _governing(rows):
    """Per release row, the measurements deciding whether it is there (`record_adaptive_rows`):
    its table, geography and iteration level's measurements of its unit and group."""
    labels = rows["table"] + "/" + rows["geography"] + "/level " + rows["group_level"] + "/"
    return labels, rows["geocode"] + "|" + rows["group"]


def _full(spec, path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(spec.base_dir, path)


# More persons than live on Earth: no published count of a population group can be this large.
PUBLIC_COUNT_LIMIT = 10**10


def _check_public_counts(totals, full: str) -> None:
    """Published totals must be counts: whole numbers from 0 to a believable size, one per group
    and geography. Production feeds SafeTab-H the published Detailed DHC-A totals, which
    SafeTab-P's post-processing rounds up to 0 (`allow_negative_counts: false`), so a negative
    total means the file is not that product (raw noisy measurements, or a wrong column)."""
    counts = totals["count"].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(counts) | (np.mod(counts, 1) != 0) | (counts < 0) | (counts > PUBLIC_COUNT_LIMIT)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = totals.iloc[i]
        where = f"row {int(totals.index[i]) + 1}" + (
            f" (line {int(totals.index[i]) + 2})" if not full.endswith(".parquet") else ""
        )
        raise DataError(
            f"{full}: {where}: the published total of group {shown_value(row['group'])} in "
            f"{row['geography']} {shown_value(row['geocode'])} is {shown_value(row['count'])}, which is not "
            f"a published count (a whole number from 0 to {PUBLIC_COUNT_LIMIT:,}; the published DDHC-A "
            f"rounds negative noisy counts up to 0); {int(bad.sum())} such value(s) in all"
        )
    keys = ["geography", "geocode", "group"]
    clash = totals.groupby(keys, sort=False)["count"].nunique()
    clash = clash[clash > 1]
    if len(clash):
        geography, geocode, group = clash.index[0]
        raise DataError(
            f"{full}: group {shown_value(group)} in {geography} {shown_value(geocode)} has "
            f"{int(clash.iloc[0])} different published totals; which one chose the detail is unknowable, "
            "so the file is refused"
        )
