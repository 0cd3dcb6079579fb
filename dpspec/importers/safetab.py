"""`dpspec import --safetab-p-config / --safetab-h-config`: SafeTab's `config.json` becomes a spec without data.

SafeTab reads its configuration directory: config.json and the four pipe-separated iteration
files beside it (race-and-ethnicity-codes.txt, race- and ethnicity-characteristic-iterations.txt,
race-and-ethnicity-code-to-iteration.txt). The importer converts those into the three Parquet
tables the `safetab` mechanism reads, written beside the spec (only their layout changes: one
iteration table with a `kind` column, flags as booleans). The budgets are production's, for
adding or removing one record (Tumult Analytics' relation); the spec states them under changing
one record, as the bundled production specs do, and `dpspec budget` does that conversion.
"""

from __future__ import annotations

import io
import json
import os
from fractions import Fraction

from dpspec.importers import jsonconfig as jc
from dpspec.importers.settings import Account, Setting, problem, shown_fraction
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())

GEOS = {"usa": "nation", "state": "state", "county": "county", "tract": "tract", "place": "place", "aiannh": "aiannh"}
THRESHOLD_GEOS = {
    "USA": "nation",
    "STATE": "state",
    "COUNTY": "county",
    "TRACT": "tract",
    "PLACE": "place",
    "AIANNH": "aiannh",
}
PR_GEOS = ("pr_state", "pr_county", "pr_tract", "pr_place")
PR_THRESHOLD_GEOS = ("PR-STATE", "PR-COUNTY", "PR-TRACT", "PR-PLACE")
ITERATION_FILES = (
    "race-and-ethnicity-codes.txt",
    "race-characteristic-iterations.txt",
    "ethnicity-characteristic-iterations.txt",
    "race-and-ethnicity-code-to-iteration.txt",
)
# What each product tabulates (safetab_p/tmlt/safetab_p/safetab_p_analytics.py and
# safetab-h/safetab_h/tmlt/safetab_h/preprocessing.py in the published code): the detail levels.
PRODUCTS = {
    "safetab-p": {
        "tables": {"t1": ("p", ["total", "QSEX*AGE4", "QSEX*AGE9", "QSEX*AGE23"])},
        "record": "persons",
        "unit": "person",
        "title": "Detailed DHC-A (SafeTab-P)",
    },
    "safetab-h": {
        "tables": {"t3": ("h_t3", ["total", "FAMILY", "HHT4", "HHT"]), "t4": ("h_t4", ["total", "TENURE3"])},
        "record": "households",
        "unit": "household",
        "title": "Detailed DHC-B (SafeTab-H)",
    },
}


def importer(kind: str):
    def convert(path: str):
        return import_safetab(kind, path)

    return convert


def _thresholds(s: Setting) -> dict:
    if not isinstance(s.value, dict):
        raise problem(
            s, f'expected an object such as {{"(USA, 1)": [4971, 19971, 149971]}}, got {json.dumps(s.value)[:60]}'
        )
    out = {}
    for key, values in s.value.items():
        cell = jc.child(s, key)
        parts = key.strip("() ").split(",")
        if len(parts) != 2 or parts[1].strip() not in ("1", "2"):
            raise problem(cell, 'expected a key such as "(USA, 1)" (geography, iteration level 1 or 2)')
        geo, level = parts[0].strip(), int(parts[1])
        if geo not in THRESHOLD_GEOS and geo not in PR_THRESHOLD_GEOS:
            raise problem(
                cell, f"unknown geography {geo!r}: expected one of {', '.join([*THRESHOLD_GEOS, *PR_THRESHOLD_GEOS])}"
            )
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        ):
            raise problem(cell, f"expected a list of whole numbers, got {json.dumps(values)[:60]}")
        if geo in THRESHOLD_GEOS:
            out[(THRESHOLD_GEOS[geo], level)] = values
    return out


def iteration_tables(config_dir: str) -> dict[str, bytes]:
    """The three Parquet tables (codes, iterations, code_to_iteration) from the four production files."""
    frames = {}
    for name in ITERATION_FILES:
        path = os.path.join(config_dir, name)
        if not os.path.isfile(path):
            raise problem(path, "SafeTab's configuration directory must hold this iteration file beside config.json")
        try:
            frames[name] = pd.read_csv(path, sep="|", dtype=str, keep_default_na=False)
        except (ValueError, OSError) as exc:
            raise problem(path, f"cannot read it as a pipe-separated table: {exc}") from None

    def need(name, cols):
        missing = [c for c in cols if c not in frames[name].columns]
        if missing:
            raise problem(os.path.join(config_dir, name), f"missing column(s) {', '.join(missing)}")
        return frames[name]

    def flag(series):
        bad = ~series.isin(["True", "False", "Null", ""])
        if bad.any():
            raise problem(config_dir, f"a flag reads {series[bad].iloc[0]!r}; expected True, False or Null")
        return series.map({"True": True, "False": False}).astype("boolean")

    codes = need(ITERATION_FILES[0], ["RACE_ETH_CODE", "RACE_ETH_NAME"])
    race = need(
        ITERATION_FILES[1], ["ITERATION_CODE", "ITERATION_NAME", "LEVEL", "ALONE", "DETAILED_ONLY", "COARSE_ONLY"]
    ).assign(kind="race")
    eth = need(
        ITERATION_FILES[2], ["ITERATION_CODE", "ITERATION_NAME", "LEVEL", "DETAILED_ONLY", "COARSE_ONLY"]
    ).assign(kind="ethnicity", ALONE="Null")
    it = pd.concat([race, eth], ignore_index=True)
    if not it["LEVEL"].str.fullmatch(r"\d+").all():
        raise problem(config_dir, "an iteration's LEVEL is not a whole number")
    iterations = pd.DataFrame(
        {
            "iteration": it["ITERATION_CODE"],
            "name": it["ITERATION_NAME"],
            "kind": it["kind"],
            "level": it["LEVEL"].astype(int),
            "alone": flag(it["ALONE"]),
            "detailed_only": flag(it["DETAILED_ONLY"]),
            "coarse_only": flag(it["COARSE_ONLY"]),
        }
    )
    mapping = need(ITERATION_FILES[3], ["ITERATION_CODE", "RACE_ETH_CODE"]).rename(
        columns={"ITERATION_CODE": "iteration", "RACE_ETH_CODE": "code"}
    )[["code", "iteration"]]
    out = {}
    for name, frame in (
        ("codes", codes.rename(columns={"RACE_ETH_CODE": "code", "RACE_ETH_NAME": "name"})[["code", "name"]]),
        ("iterations", iterations),
        ("code_to_iteration", mapping),
    ):
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        out[name] = buf.getvalue()
    return out


def import_safetab(kind: str, path: str, stem: str = "imported"):
    product = PRODUCTS[kind]
    cfg = jc.read(path)
    account = Account()
    used = set()

    def take(key):
        if key not in cfg:
            raise problem(path, f"missing ({product['title']}'s config.json sets it)", key=key)
        used.add(key)
        return cfg[key]

    jc.text(take("privacy_defn"), ("zcdp",))
    max_race = jc.integer(take("max_race_codes"), low=1)
    tables, total, pr_total = {}, Fraction(0), Fraction(0)
    for t, (prefix, details) in product["tables"].items():
        rho = {}
        for geo, name in GEOS.items():
            rho[name] = {lv: jc.number(take(f"privacy_budget_{prefix}_level_{lv}_{geo}"), low=0) for lv in (1, 2)}
            total += sum(rho[name].values())
        for geo in PR_GEOS:
            for lv in (1, 2):
                key = f"privacy_budget_{prefix}_level_{lv}_{geo}"
                if key in cfg:
                    pr_total += jc.number(take(key), low=0)
        th_key = f"thresholds_{prefix}"
        thresholds = _thresholds(take(th_key))
        for name in GEOS.values():
            for lv in (1, 2):
                if (name, lv) not in thresholds:
                    raise problem(cfg[th_key], f"no thresholds for ({name}, {lv})")
        tables[t] = (rho, thresholds, details)
    stage1 = zero = None
    if kind == "safetab-p":
        stage1 = jc.number(take("privacy_budget_p_stage_1_fraction"), low=0, high=1)
        zero = jc.number(take("zero_suppression_chance"), low=0, high=1)
    comments = []
    for key in ("run_us", "run_pr", "allow_negative_counts"):
        if key in cfg:
            jc.boolean(cfg[key])
            used.add(key)
    if "run_pr" in cfg or pr_total:
        comments.append(
            f"# Puerto Rico (privacy_budget_*_pr_*, rho {shown_fraction(pr_total)} in all) is a separate run "
            "over disjoint records: it composes in parallel with this one and is not part of this spec."
        )
    if "allow_negative_counts" in cfg:
        comments.append(
            f"#   {cfg['allow_negative_counts'].where()}: allow_negative_counts = "
            f"{json.dumps(cfg['allow_negative_counts'].value)}: post-processing of the noisy counts only"
        )
    states_key = "state_filter_us"
    if states_key in cfg:
        jc.strings(cfg[states_key])
        used.add(states_key)
        comments.append(
            f"#   {cfg[states_key].where()}: state_filter_us: {len(cfg[states_key].value)} states tabulated "
            "(the geography a compile declares)"
        )
    for key in ("reader",):
        if key in cfg:
            jc.text(cfg[key])
            account.set_aside(cfg[key], "operational")
            used.add(key)
    for key, s in cfg.items():
        if key not in used:
            account.not_understood(s)
    extras = iteration_tables(os.path.dirname(os.path.abspath(path)))
    files = {k: f"{stem}.{k}.parquet" for k in extras}
    rec, unit = product["record"], product["unit"]
    out = [
        f"# Imported by `dpspec import --{kind}-config` from {path}.",
        "# No data and no geography files are declared: `dpspec check`, `budget` and `audit` read this spec",
        "# as it is; `compile` needs the records and public geography files (state, county, tract, place,",
        "# AIAN/NH areas) added.",
        f"# The iteration tables {', '.join(files.values())} are the configuration directory's",
        f"# {', '.join(ITERATION_FILES)}, converted (layout only).",
        f"# Budgets: {kind}'s per-level rho, for adding or removing one {unit} (Tumult Analytics' relation):",
        f"# rho = {shown_fraction(total)} in all; this spec protects changing one {unit}, and `dpspec budget`",
        f"# states that (4 x {shown_fraction(total)} = {shown_fraction(4 * total)} by group privacy).",
        f"#   {cfg['max_race_codes'].where()}: max_race_codes = {max_race}",
        *comments,
        *account.comments(),
        "",
        f'spec "2020 {product["title"]}, imported from {os.path.basename(path)}"',
        "",
        f'domain cef "2020 Census Edited File: {rec} with detailed race and ethnicity codes" {{',
        "  stage edited",
        "  geography us { state > county > tract }",
        "  crosscut { place, aiannh }",
        f"  table {rec} unit {unit} {{",
        "    hhid    : int 1..100000000",
        "    state   : category",
        "    county  : category in state",
        "    tract   : category in county",
        "    place   : category nullable",
        "    aiannh  : category nullable",
    ]
    if kind == "safetab-p":
        out += [
            "    QSEX    : {1, 2}",
            "    QAGE    : int 0..115",
            "    AGE4    : int 0..3",
            "    AGE9    : int 0..8",
            "    AGE23   : int 0..22",
        ]
    out += [
        "    QRACE1  : category",
        *[f"    QRACE{i}  : category nullable" for i in range(2, max_race + 1)],
        "    QSPAN   : category",
    ]
    if kind == "safetab-h":
        out += [
            "    HHT     : {1, 2, 3, 4, 5}",
            "    FAMILY  : {1, 2}",
            "    HHT4    : {1, 2, 3, 4}",
            "    TEN     : {1, 2, 3, 4}",
            "    TENURE3 : {1, 2, 3}",
            "  }",
            "  table person_groups unit person in households by hhid {",
            "    hhid   : int 1..100000000",
            "    state  : category",
            "    county : category in state",
            "    tract  : category in county",
            "    place  : category nullable",
            "    aiannh : category nullable",
            "    group  : category",
        ]
    out += [
        "  }",
        "}",
        "",
        "public {",
        f'  keys "{files["iterations"]}" released "U.S. Census Bureau, {product["title"]} production configuration ({os.path.basename(os.path.dirname(os.path.abspath(path)))}): the race and ethnicity characteristic iterations"',
    ]
    if kind == "safetab-h":
        for by in ("group", "state, group", "county, group", "tract, group", "place, group", "aiannh, group"):
            out.append(
                f'  count person_groups by {by} released "2020 Detailed DHC-A (SafeTab-P), population-group totals"'
            )
    out += [
        "}",
        "",
        f"unit {rec} : hamming",
        "premetric zcdp",
        "",
        "mechanism safetab {",
        f"  table: {rec}",
        f"  race_codes: {', '.join(f'QRACE{i}' for i in range(1, max_race + 1))}",
        "  ethnicity_code: QSPAN",
        f'  codes: "{files["codes"]}"',
        f'  iterations: "{files["iterations"]}"',
        f'  code_map: "{files["code_to_iteration"]}"',
        f"  max_race_codes: {max_race}",
        "  detailed_geographies: nation, state",
    ]
    if kind == "safetab-p":
        out += [
            f"  stage1_fraction: {shown_fraction(stage1)}",
            f"  zero_suppression: {shown_fraction(zero)}",
            "  suppress_at: county, tract, place, aiannh",
        ]
    else:
        out.append(
            '  public_totals: "safetab_p_published.parquet"  # SafeTab-P\'s published totals, which a compile reads'
        )
    out += [f"  total_rho: {shown_fraction(total)}", "  tables: {"]
    for t, (rho, thresholds, details) in tables.items():
        out += [f"    {t}: {{", "      rho: {"]
        for geo in GEOS.values():
            out += [
                f"        {geo}: {{",
                *[f"          level{lv}: {shown_fraction(rho[geo][lv])}" for lv in (1, 2)],
                "        }",
            ]
        out += ["      }", "      thresholds: {"]
        for geo in GEOS.values():
            out += [
                f"        {geo}: {{",
                *[f"          level{lv}: [{', '.join(str(v) for v in thresholds[(geo, lv)])}]" for lv in (1, 2)],
                "        }",
            ]
        out += ["      }", f"      details: [{', '.join(json.dumps(d) for d in details)}]", "    }"]
    out += ["  }", "}", "", f"budget rho <= {shown_fraction(4 * total)}", "", "release {", "  output counts", "}", ""]
    return "\n".join(out), account.stderr_lines(), {"rho": total, "files": {files[k]: v for k, v in extras.items()}}
