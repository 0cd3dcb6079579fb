"""The PHSafe design a spec declares (the 2020 S-DHC tables), validated, with its exact
zCDP accounting.

PHSafe (the mechanism behind the 2020 Supplemental DHC) measures nine tables: six count
persons in households (the person records joined to their household's unit record, each
household truncated to at most tau persons), three count occupied units. Every table is
measured once per (geography, iteration level): geography `usa` (the nation) or `state`,
iteration level `A-G` (the householder's or person's race alone / two or more), `H,I`
(Hispanic; White alone not Hispanic) or `*` (everyone). Each measurement has its own rho; the
guarantee is their sum (sequential composition; the regions of one geography are disjoint, so
they compose in parallel).

Why each measurement's noise is sigma^2 = D^2 / (2 rho): production protects adding or removing
one person record together with a change of their unit's record (persons `AddOneRow`, units
`AddMaxRows(2)`); that moves a person-table count by at most D = 2 tau + 2 (the unit record's
removal and re-insertion re-route at most tau joined rows each, and the person's own row, with
the one it may displace from the truncation, two more) and a unit-table count by D = 2.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec.api import Diagnostic, ir, sampler_limit_problem

GEOGRAPHIES = ("usa", "state")
# the columns PHSafe reads (production's input schema, with the unit's state for geography)
PERSON_COLUMNS = ("MAFID", "RTYPE", "RELSHIP", "QAGE", "CENRACE", "CENHISP")
UNIT_COLUMNS = ("MAFID", "state", "RTYPE", "HHT", "HHT2", "CPLT", "TEN", "HHRACE", "HHSPAN")
ITERATION_LEVELS = ("A-G", "H,I", "*")
# The tables, in production's order, with their kind: "persons" (joined, truncated at tau) or
# "units" (the unit table alone); and the iteration levels each is tabulated at.
TABLES = {
    "PH1_num": ("persons", ITERATION_LEVELS),
    "PH1_denom": ("units", ITERATION_LEVELS),
    "PH2": ("persons", ("*",)),
    "PH3": ("persons", ITERATION_LEVELS),
    "PH4": ("persons", ITERATION_LEVELS),
    "PH5_denom": ("units", ITERATION_LEVELS),
    "PH6": ("persons", ("*",)),
    "PH7": ("persons", ITERATION_LEVELS),
    "PH8_denom": ("units", ITERATION_LEVELS),
}


@attrs.frozen
class Measurement:
    """One (table, geography, iteration level) with its exact rho."""

    table: str
    geography: str
    level: str
    rho: Fraction

    @property
    def key(self) -> str:
        return f"{self.geography}_{self.level}"


@attrs.frozen
class Design:
    measurements: tuple[Measurement, ...]
    tau: dict  # table -> max persons per household (person tables only)
    states: tuple[str, ...]  # production's state_filter ((): the declared values of the state column, `cells`)

    def kind(self, table: str) -> str:
        return TABLES[table][0]

    def sensitivity(self, table: str) -> int:
        """L1 (and L2) sensitivity of one count of `table` under the protected change."""
        return 2 * self.tau[table] + 2 if self.kind(table) == "persons" else 2

    def sigma2(self, m: Measurement) -> Fraction:
        return Fraction(self.sensitivity(m.table) ** 2) / (2 * m.rho)

    def measured(self) -> list[Measurement]:
        return [m for m in self.measurements if m.rho > 0]

    def total_rho(self) -> Fraction:
        return sum((m.rho for m in self.measurements), Fraction(0))

    def table_rho(self, table: str) -> Fraction:
        return sum((m.rho for m in self.measurements if m.table == table), Fraction(0))

    def household_rho(self) -> Fraction:
        """rho for adding or removing one whole household (its unit record and every person).

        Truncation keeps at most tau of its persons in a person table, so a count moves by at
        most tau there (against the D = 2 tau + 2 the noise is set for) and by 1 in a unit table
        (against D = 2): each measurement costs rho (moved / D)^2, whatever the household's size."""
        total = Fraction(0)
        for m in self.measurements:
            moved = self.tau[m.table] if self.kind(m.table) == "persons" else 1
            total += m.rho * Fraction(moved, self.sensitivity(m.table)) ** 2
        return total


MEASUREMENTS = tuple(f"{g}_{lv}" for g in GEOGRAPHIES for lv in ITERATION_LEVELS)  # the keys of a table's budget


def parse(params: dict) -> tuple[Design | None, list[Diagnostic]]:
    """Validate the resolved `tau`, `privacy_budget`, `states` and `total_rho` into a Design; every
    problem carries the path of the value it is about (the core turns it into a line)."""
    problems: list[Diagnostic] = []

    def err(message, *path):
        problems.append(Diagnostic(message, path=path))

    tau: dict = {}
    for name, value in (params.get("tau") or {}).items():
        if value.denominator != 1 or value < 1:
            err(
                f"tau: {name} must be a whole number of persons, at least 1, got {ir.format_number(value)}", "tau", name
            )
        else:
            tau[name] = int(value)
    measurements = []
    where: dict = {}  # measurement -> the path of its rho
    given = params.get("privacy_budget") or {}
    for table, (kind, levels) in TABLES.items():
        cells = given.get(table)
        if cells is None:
            err(f"privacy_budget: table {table} has no budget (give 0 to skip it)", "privacy_budget")
            continue
        if kind == "persons" and table not in tau:
            err(f"tau: table {table} needs a truncation threshold (the most persons per household it counts)", "tau")
        allowed = {f"{g}_{lv}" for g in GEOGRAPHIES for lv in levels}
        for key in cells:
            if key not in allowed:
                err(
                    f"privacy_budget: {table} has no measurement '{key}' (known: {', '.join(sorted(allowed))})",
                    "privacy_budget",
                    table,
                    key,
                )
        for g in GEOGRAPHIES:
            for lv in levels:
                rho = cells.get(f"{g}_{lv}")
                if rho is None:
                    err(f"privacy_budget: {table} needs a rho for '{g}_{lv}' (0 to skip it)", "privacy_budget", table)
                    continue
                measurements.append(Measurement(table, g, lv, rho))
                where[measurements[-1]] = ("privacy_budget", table, f"{g}_{lv}")
    states = tuple(params.get("states") or ())
    design = Design(tuple(measurements), tau, states)
    for m in design.measured() if not problems else ():
        # sigma² = D² / (2 rho) grows as 1/rho: a rho whose noise the exact sampler could not draw is refused here
        problem = sampler_limit_problem("discrete_gaussian", design.sigma2(m), (f"{m.table} {m.key}", m.rho))
        if problem is not None:
            err(f"phsafe: the noise of {m.table} {m.key} cannot be drawn: {problem}", *where[m])
    declared = params.get("total_rho")
    if not problems and declared is not None and declared != design.total_rho():
        err(
            f"total_rho is {ir.format_number(declared)} but the measurements' rho add up to "
            f"{ir.format_number(design.total_rho())}",
            "total_rho",
        )
    if not problems and design.total_rho() == 0:
        err("privacy_budget: every rho is 0, nothing is measured", "privacy_budget")
    return (None if problems else design), problems
