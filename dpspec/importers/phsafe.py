"""`dpspec import --phsafe-config`: PHSafe's `config.json` (2020 Supplemental DHC) becomes a spec without data."""

from __future__ import annotations

import json
import os

from dpspec.importers import jsonconfig as jc
from dpspec.importers.settings import Account, problem, shown_fraction

# The tables PHSafe measures and which of them have a truncation tau (phsafe/phsafe/tmlt/phsafe/
# private_tabulations.py in DAS_2020_SDHC_Production_Code): person tables are truncated, unit tables not.
TABLES = ("PH1_num", "PH1_denom", "PH2", "PH3", "PH4", "PH5_denom", "PH6", "PH7", "PH8_denom")
PERSON_TABLES = ("PH1_num", "PH2", "PH3", "PH4", "PH6", "PH7")
KEYS = ("usa_A-G", "usa_H,I", "usa_*", "state_A-G", "state_H,I", "state_*")


def import_phsafe(path: str):
    cfg = jc.read(path)
    account = Account()
    for key in ("privacy_budget", "tau", "state_filter", "privacy_defn"):
        if key not in cfg:
            raise problem(path, "missing (PHSafe's config.json sets it)", key=key)
    jc.text(cfg["privacy_defn"], ("zcdp",))
    budget_s = cfg["privacy_budget"]
    if not isinstance(budget_s.value, dict):
        raise problem(budget_s, f"expected an object of tables, got {json.dumps(budget_s.value)[:60]}")
    budgets, total = {}, 0
    for table, shares in budget_s.value.items():
        inner = jc.child(budget_s, table)
        if table not in TABLES:
            raise problem(inner, f"unknown table: PHSafe measures {', '.join(TABLES)}")
        if not isinstance(shares, dict):
            raise problem(inner, f"expected an object of measurements, got {json.dumps(shares)[:60]}")
        budgets[table] = {}
        for k in shares:
            cell = jc.child(inner, k)
            if k not in KEYS:
                raise problem(cell, f"unknown measurement: expected one of {', '.join(KEYS)}")
            budgets[table][k] = jc.number(cell, low=0)
            total += budgets[table][k]
    tau_s = cfg["tau"]
    if not isinstance(tau_s.value, dict):
        raise problem(tau_s, f"expected an object of tables, got {json.dumps(tau_s.value)[:60]}")
    taus = {}
    for table in tau_s.value:
        cell = jc.child(tau_s, table)
        if table not in PERSON_TABLES:
            raise problem(cell, f"tau applies to the person tables {', '.join(PERSON_TABLES)}")
        taus[table] = jc.integer(cell, low=1)
    states = jc.strings(cfg["state_filter"])
    if "reader" in cfg:
        jc.text(cfg["reader"])
        account.set_aside(cfg["reader"], "operational")
    for key, s in cfg.items():
        if key not in ("privacy_budget", "tau", "state_filter", "privacy_defn", "reader"):
            account.not_understood(s)
    name = os.path.basename(path)
    out = [
        f"# Imported by `dpspec import --phsafe-config` from {path}.",
        "# No data are declared: `dpspec check`, `budget` and `audit` read this spec as it is.",
        f"#   {budget_s.where()}: privacy_budget -> privacy_budget (rho per table and measurement)",
        f"#   {tau_s.where()}: tau -> tau (the most persons of one household a person table counts)",
        f"#   {cfg['state_filter'].where()}: state_filter -> states",
        f"#   {cfg['privacy_defn'].where()}: privacy_defn = zcdp -> premetric zcdp",
        "# PHSafe's unit (phsafe/phsafe/tmlt/phsafe/private_tabulations.py): one person added or removed, with",
        "# the matching change of their unit's record -> unit persons : symdiff.",
        f"# Total: rho = {shown_fraction(total)}, the sum of the measurements' rho.",
        *account.comments(),
        "",
        f'spec "Supplemental DHC (PHSafe), imported from {name}"',
        "",
        'domain cef "2020 Census Edited File: unit records and their persons" {',
        "  stage edited",
        "  geography us { state }",
        "  table units unit housing_unit {",
        "    MAFID  : int 1..999999999",
        "    state  : category",
        "    RTYPE  : {2, 4}",
        "    HHT    : int 0..7",
        "    HHT2   : int 0..12",
        "    CPLT   : int 0..5",
        "    TEN    : int 0..4",
        "    HHRACE : int 1..63",
        "    HHSPAN : {1, 2}",
        "  }",
        "  table persons unit person in units by MAFID {",
        "    MAFID   : int 1..999999999",
        "    RTYPE   : {3, 5}",
        "    RELSHIP : int 20..38",
        "    QAGE    : int 0..115",
        "    CENRACE : int 1..63",
        "    CENHISP : {1, 2}",
        "  }",
        "}",
        "",
        "unit persons : symdiff",
        "premetric zcdp",
        "",
        "mechanism phsafe {",
        "  persons: persons",
        "  units: units",
        f"  total_rho: {shown_fraction(total)}",
        "  tau: {",
        *[f"    {t}: {v}" for t, v in taus.items()],
        "  }",
        f"  states: [{', '.join(json.dumps(s) for s in states)}]",
        "  privacy_budget: {",
    ]
    for table, shares in budgets.items():
        out.append(f"    {table}: {{")
        out += [f"      {json.dumps(k)}: {shown_fraction(v)}" for k, v in shares.items()]
        out.append("    }")
    out += ["  }", "}", "", f"budget rho <= {shown_fraction(total)}", ""]
    return "\n".join(out), account.stderr_lines(), {"rho": total}
