"""The `phsafe` mechanism: the design behind the 2020 Supplemental DHC (S-DHC).

Native flavor: zCDP under adding or removing one person record (with their unit's record
changed), as production states its budgets (the PHSafe documentation: "Privacy loss is measured
with respect to persons rather than households"; persons `AddOneRow`, units `AddMaxRows(2)` in
private_tabulations.py). A household's figure is derived from the truncation (design.py).
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec.api import (
    Diagnostic,
    Mechanism,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    Release,
    SpecError,
    ir,
    located,
    LazyModule,
)

from . import cells, design as design_mod
from .design import MEASUREMENTS, PERSON_COLUMNS, TABLES, UNIT_COLUMNS
from dpspec.api import BudgetBreakdown, BudgetStatement, ExpectedError, ZCDP, discrete_gaussian_variance

# imported on first use: `dpspec --help` loads this module, not them
_change_one = LazyModule("dpspec_phsafe.change_one", "_change_one", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_tabulate = LazyModule("dpspec_phsafe.tabulate", "_tabulate", globals())
_neighbours = LazyModule("dpspec_phsafe.neighbours", "_neighbours", globals())

__version__ = "1.0.0"
PERSON_TABLES = tuple(t for t, (kind, _) in TABLES.items() if kind == "persons")


class PHSafe(Mechanism):
    name = "phsafe"
    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    uses_engine = True  # its units of work run on ctx.engine
    version = __version__
    description = (
        "PHSafe (2020 Supplemental DHC): counts of persons in households (the person records joined "
        "to their unit, each household truncated to tau persons) and of occupied units, by table, "
        "nation or state and race/ethnicity iteration, integer noise from an exact discrete Gaussian "
        "(bell-shaped) distribution, budget in zCDP."
    )
    proof = "U.S. Census Bureau, PHSafe (2023): zCDP of discrete Gaussian counts (Canonne, Kamath & Steinke 2020; Bun & Steinke 2016) with each household truncated to tau persons"
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Gaussian rejection sampler on integers and rationals (dpspec.api.discrete_gaussian), no floating point"
    parameters = ParameterSchema(
        (
            ParamSpec(
                "persons", "table", "the person records (MAFID, RTYPE, RELSHIP, QAGE, CENRACE, CENHISP)", required=True
            ),
            ParamSpec(
                "units",
                "table",
                "the unit records (MAFID, state, RTYPE, HHT, HHT2, CPLT, TEN, HHRACE, HHSPAN)",
                required=True,
            ),
            ParamSpec(
                "tau",
                "map",
                "per person table: the most persons of one household it counts (truncation)",
                required=True,
                keys="choices",
                choices=PERSON_TABLES,
                values=ParamSpec("", "number", "", low=Fraction(0)),
            ),
            ParamSpec(
                "privacy_budget",
                "map",
                "per table: rho per '<usa|state>_<A-G|H,I|*>' measurement",
                required=True,
                keys="choices",
                choices=tuple(TABLES),
                values=ParamSpec(
                    "",
                    "map",
                    "rho per measurement",
                    keys="choices",
                    choices=MEASUREMENTS,
                    values=ParamSpec("", "number", "", low=Fraction(0)),
                ),
            ),
            ParamSpec(
                "states",
                "list",
                "production's state_filter: the state codes tabulated (default: the declared "
                "values of the units' state column)",
                items="string",
            ),
            ParamSpec(
                "total_rho",
                "number",
                "the declared total rho; the measurements' rho must add up to it exactly",
                low=Fraction(0),
            ),
        )
    )
    outputs = {
        "counts": "long-form counts: table, region_type (USA or STATE), region_id, iteration_code, data_cell, "
        "count, noise_variance"
    }

    # ---- checks ------------------------------------------------------------------------
    def design(self, spec, params) -> design_mod.Design:
        design, problems = design_mod.parse(dict(params))
        if problems:
            raise SpecError(located(spec, problems))
        return design

    def check(self, spec, params):
        problems = []
        for key, need in (("persons", PERSON_COLUMNS), ("units", UNIT_COLUMNS)):
            table = spec.domain.table(params[key])
            missing = [c for c in need if table.column(c) is None]
            if missing:
                problems.append(
                    Diagnostic(
                        f"{key} table '{table.name}' has no column {', '.join(missing)} "
                        f"(PHSafe reads {', '.join(need)})",
                        path=(key,),
                    )
                )
            for name in need:
                col = table.column(name)
                if name == "state" or col is None:
                    continue
                numeric = col.type.kind == "int" or (
                    col.type.kind == "enum" and all(str(v).lstrip("-").isdigit() for v in col.type.values)
                )
                if not numeric:
                    problems.append(
                        Diagnostic(
                            f"column '{name}' of table '{table.name}' holds production's numeric "
                            "codes: declare it as int or as an enum of whole numbers",
                            path=(key,),
                        )
                    )
        problems.extend(cells.state_problems(spec, params))
        if problems:
            return problems
        return design_mod.parse(dict(params))[1]

    def flavor(self, spec, params):
        return NativeFlavor(params["persons"], "symdiff", "zcdp")

    def output_keys(self, spec, params):
        """The long-form counts are keyed by no column of the tables: their states are declared,
        their iteration codes and cells production's constants; the run checks the full grid
        (`cells.check_cells`)."""
        return {"counts": OutputKeys(params["persons"])}

    # ---- budget ------------------------------------------------------------------------
    def budget(self, spec, params, facts):
        design = self.design(spec, params)
        total, household = design.total_rho(), design.household_rho()
        taus = ", ".join(f"{t} {k}" for t, k in design.tau.items())
        notes = [
            f"rho = {ir.format_number(total)} = the sum over tables, geographies (usa, state) and iteration levels "
            "(A-G, H,I, *) of their rho (sequential composition; the states are disjoint and compose in parallel)",
            "unit: adding or removing one person record, with their unit's record changed (production's persons "
            "AddOneRow and units AddMaxRows(2)); the PHSafe documentation measures privacy loss for persons, "
            "not households",
            f"sensitivity: a person-table count moves by at most 2 tau + 2 (tau = {taus}), a unit-table count "
            "(PH1_denom, PH5_denom, PH8_denom) by at most 2, so every noise variance is sensitivity^2 / (2 rho) "
            "(production's accuracy report and output validation use the same)",
            f"one whole household (its unit and all its persons, any size): rho = {ir.format_number(household)} "
            f"(= {float(household):.6g}); truncation keeps at most tau of its persons in a person table, so a "
            "count moves by at most tau of the 2 tau + 2 the noise is set for, and by 1 of 2 in a unit table; "
            "each measurement costs rho (moved / sensitivity)^2. Generic group privacy over its k persons "
            "would give k^2 rho instead",
            "PH5_num (= PH4) and PH8_num (from PH7) are post-processing and spend nothing",
            _change_one.change_one_note(total),
        ]
        stmt = BudgetStatement.fixed(ZCDP(total), *notes)  # exact
        return attrs.evolve(stmt, components=tuple(self.components(design)))

    def change_one(self, spec, params, budget):
        """rho x 2 for changing one person, from the counts' own sensitivity (change_one.py derives it)."""
        return _change_one.change_one_budget(spec, params, budget)

    def components(self, design) -> list[dict]:
        out = []
        for m in design.measurements:
            part = {
                "table": m.table,
                "geography": m.geography,
                "iteration_level": m.level,
                "rho": m.rho,
                "rho_exact": ir.format_number(m.rho),
                "sensitivity": design.sensitivity(m.table),
            }
            if m.rho > 0:
                part["noise_variance"] = float(f"{float(design.sigma2(m)):.9g}")
            out.append(part)
        return out

    def budget_breakdown(self, spec, params) -> BudgetBreakdown:
        design = self.design(spec, params)
        return BudgetBreakdown(
            {
                "phsafe": {
                    "unit": "one person record added or removed, with their unit's record changed",
                    "total_rho_exact": ir.format_number(design.total_rho()),
                    "tables": {t: ir.format_number(design.table_rho(t)) for t in design_mod.TABLES},
                    "tau": dict(design.tau),
                    "household_rho_exact": ir.format_number(design.household_rho()),
                }
            }
        )

    def expected_error(self, spec, params, facts):
        """The variance of each noisy count, the discrete Gaussian's exact variance, from the
        design alone."""

        design = self.design(spec, params)
        return [
            ExpectedError(
                f"{m.table}: {m.geography}, iteration level {m.level}",
                m.geography,
                f"{m.table} {m.level}",
                float(discrete_gaussian_variance(design.sigma2(m))),
                "noisy count",
            )
            for m in design.measured()
        ]

    # ---- run ---------------------------------------------------------------------------
    def run(self, spec, params, data, ctx):
        design = self.design(spec, params)
        run_key = int.from_bytes(ctx.rng.bytes(32), "little") if ctx.engine is None else ctx.engine.run_key
        source = next((d.path for d in spec.data if d.table == params["persons"]), params["persons"])
        states = cells.released_states(spec, params, design)
        rec = _tabulate.Records(data[params["persons"]], data[params["units"]], states, source)
        counts = _tabulate.measure(design, rec, run_key)
        cells.check_cells(counts, design, states)

        facts = {
            "states": list(rec.states),
            "tau": dict(design.tau),
            "household_rho": ir.format_number(design.household_rho()),
            "measurements": [
                {
                    "table": m.table,
                    "geography": m.geography,
                    "iteration_level": m.level,
                    "rho": ir.format_number(m.rho),
                    "sensitivity": design.sensitivity(m.table),
                    "noise_sd": float(discrete_gaussian_variance(design.sigma2(m))) ** 0.5,
                }
                for m in design.measured()
            ],
        }
        return Release(outputs={"counts": counts}, facts=facts)

    def neighbours(self, spec, params):
        """One household gaining a child, with batched measurement transcripts, for `dpspec verify`."""
        return _neighbours.phsafe_pairs(self, spec, params)
