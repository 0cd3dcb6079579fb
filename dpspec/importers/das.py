"""`dpspec import --das-config`: a DAS `.ini` (with its INCLUDE chain) becomes a TopDown spec without data.

The configuration names the geographic levels and their budget shares, the global scale (rho =
1 / global_scale^2), a strategy (the per-level query shares) and a query ordering (the estimation
and rounding passes) by name, the schema, the invariants and the constraints. The DHC runs leave
`geolevel_names` empty: the DAS then reads the levels and the total from the strategy's
allocations (rho = their sum), and runs interleaved outer passes (the `...Decomp` optimizers). The named objects
are looked up in `strategies/das.json`, a table transcribed from the published code with a
citation for each entry. The spec declares no data and no geography file: `check`, `budget` and
`audit` read it as it is; `compile` needs the data and a public geography file added.
"""

from __future__ import annotations

import os
from fractions import Fraction

from dpspec.importers import ini
from dpspec.importers.settings import Account, Setting, problem, shown_fraction, fraction
from dpspec.importers.tables import load, lookup

# The sections the DAS reads; any other is an error (a typo would otherwise drop its settings).
PRIVACY_SECTIONS = {
    "default",
    "geodict",
    "budget",
    "constraints",
    "schema",
    "reader",
    "engine",
    "gurobi",
    "workload",
    "hdmm",
}
OPERATIONAL_SECTIONS = {
    "logging",
    "environment",
    "setup",
    "writer",
    "validator",
    "takedown",
    "experiment",
    "error_metrics",
    "stats",
    "monitoring",
    "alert",
    "python",
    "spark",
    "assessment",
}

# Settings of privacy sections that only say where files are, how they are split or what is kept.
OPERATIONAL_KEYS = {
    ("reader", "grfc_path"),
    ("reader", "numreaderpartitions"),
    ("reader", "readerpartitionlen"),
    ("reader", "delimiter"),
    ("reader", "header"),
    ("engine", "save_noisy"),
    ("engine", "noisy_measurements_postfix"),
    ("engine", "delete_raw"),
}

# Settings applied to the spec: (section, key) -> what it became.
APPLIED = {
    ("geodict", "geolevel_names"): "the geography's levels",
    ("geodict", "geolevel_leng"): "checked: one geocode length per level",
    ("geodict", "geocode_length"): "checked: the block geocode length",
    ("geodict", "geo_bottomlevel"): "checked: the finest level",
    ("geodict", "target_das_aian_areas"): "spine aian",
    ("geodict", "aian_areas"): "the AIAN area types (comment)",
    ("geodict", "spine"): "spine bypass",
    ("geodict", "ignore_gqs_in_block_groups"): "spine gq_blockgroups",
    ("budget", "geolevel_budget_prop"): "levels",
    ("budget", "global_scale"): "rho",
    ("budget", "strategy"): "queries",
    ("budget", "query_ordering"): "estimation and rounding",
    ("budget", "dp_mechanism"): "checked: discrete Gaussian",
    ("budget", "privacy_framework"): "premetric",
    ("budget", "approx_dp_delta"): "the delta of the epsilon the certificate prints (comment)",
    ("budget", "print_per_attr_epsilons"): "printed by `dpspec budget`",
    ("schema", "schema"): "the histogram variables",
    ("reader", "privacy_table"): "the protected table",
    ("reader", "main_table"): "the protected table (when privacy_table is not set)",
    ("gurobi", "outer_pass"): "outer_passes",
    ("reader", "constraint_tables"): "the facilities table",
    ("reader", "tables"): "checked: the tables read",
    ("gurobi", "l2_optimization_approach"): "estimation passes",
    ("gurobi", "rounder_optimization_approach"): "rounding passes",
    ("gurobi", "datainpass_tolerancetype"): "pass_tolerance",
    ("gurobi", "dataindnpass_tolerancetype"): "pass_tolerance",
    ("gurobi", "opt_tol_slack"): "pass_tolerance",
    ("writer", "certificate_name"): "the spec's title",
    ("engine", "engine"): "checked: TopDown",
}
EXPECTED = {  # applied settings that must have one of these values (else the importer cannot say what ran)
    ("budget", "dp_mechanism"): ("discrete_gaussian_mechanism",),
    ("budget", "privacy_framework"): ("zcdp",),
    # P.L. 94-171: the passes of one optimizer; DHC: interleaved outer passes (the Decomp optimizers)
    ("gurobi", "l2_optimization_approach"): (
        "DataIndUserSpecifiedQueriesNPass",
        "DataIndUserSpecifiedQueriesNPassDecomp",
    ),
    ("gurobi", "rounder_optimization_approach"): ("MultipassRounder", "MultipassRounderDecomp"),
    ("gurobi", "outer_pass"): ("True",),
    ("engine", "engine"): ("programs.engine.topdown_engine.TopdownEngine",),
}

# [gurobi] settings that shape the DHC's post-processing (what is held, repaired or required after
# the solves): they bear on the release, not on the budget, and this importer does not state them.
NOT_STATED = {
    "postprocess_only_constr_names": "the constraints production leaves out of the solves and repairs afterwards "
    "(optimization/geo_optimizers.py:48-53); not stated by this importer",
    "conditional_constr_names": "production's conditional constraint (the release equal to a public table); "
    "not stated by this importer",
    "require_feasible_secondary_dim": "production's post-processing feasibility requirement; not stated by this importer",
    "require_feasible_postproc_dim": "production's per-level post-processing feasibility flags; not stated by this importer",
    "use_postprocess_heuristics": "production's post-processing repair heuristic; not stated by this importer",
}


def _required(config: ini.Config, section: str, key: str, root: str) -> Setting:
    found = config.get(section, key)
    if found is None or str(found.value).strip() == "":
        raise problem(
            root, f"the configuration (with its INCLUDE chain) does not set [{section}] {key}", key=f"[{section}] {key}"
        )
    return found


def _list(setting: Setting) -> list[str]:
    return [p.strip() for p in str(setting.value).replace("\n", ",").split(",") if p.strip()]


def _bool(setting: Setting) -> bool:
    text = str(setting.value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise problem(setting, f"expected True or False, got {setting.value!r}")


def _frac(setting: Setting, text: str) -> Fraction:

    return fraction(setting, text)


def import_das(path: str) -> tuple[str, list[str], dict]:
    """(spec text, stderr lines, figures) for the DAS configuration at `path`."""
    config = ini.read(path)
    table = load("das")
    for name, setting in config.names.items():
        if name not in PRIVACY_SECTIONS | OPERATIONAL_SECTIONS:
            known = ", ".join(sorted(PRIVACY_SECTIONS | OPERATIONAL_SECTIONS))
            raise problem(
                setting.file,
                f"unknown section [{setting.section}]: the DAS reads {known}",
                key=f"[{setting.section}]",
                line=setting.line,
            )
    account = Account()
    for section, key, setting in config.items():
        if (section, key) in APPLIED:
            want = EXPECTED.get((section, key))
            if want is not None and str(setting.value).strip() not in want:
                raise problem(
                    setting,
                    f"this importer reads only {' or '.join(repr(w) for w in want)} (the 2020 P.L. 94-171 "
                    f"and DHC production settings); {str(setting.value).strip()!r} is not supported",
                )
        elif section == "gurobi" and key in NOT_STATED:
            account.not_understood(setting, NOT_STATED[key])
        elif (
            section in OPERATIONAL_SECTIONS
            or section == "gurobi"
            or (section, key) in OPERATIONAL_KEYS
            or (section == "reader" and key.endswith(".path"))
        ):
            account.set_aside(setting, "operational")
        elif section == "constraints" and (key.startswith("theinvariants.") or key.startswith("theconstraints.")):
            pass  # applied below
        else:
            account.not_understood(setting)

    root = config.files[0]
    geolevels = table["geolevels"]
    strategy_s = _required(config, "budget", "strategy", root)
    strategy = lookup(table, "strategies", strategy_s)
    ordering_s = _required(config, "budget", "query_ordering", root)
    ordering = lookup(table, "orderings", ordering_s)
    schema_s = _required(config, "schema", "schema", root)
    schema = lookup(table, "schemas", schema_s)
    if strategy["schema"] != schema_s.value:
        raise problem(
            strategy_s,
            f"strategy {strategy_s.value!r} is for schema {strategy['schema']}, "
            f"the configuration's is {schema_s.value}",
        )
    for key in ("dp_mechanism", "privacy_framework"):
        _required(config, "budget", key, root)
    levels_s = config.get("geodict", "geolevel_names")
    if levels_s is None or str(levels_s.value).strip() == "":
        names, props, rho, queries = _from_strategy(config, strategy_s, strategy, account, root)
    else:
        names, props, rho, queries = _from_config(config, levels_s, strategy_s, strategy, root)
    for n in names:
        if n not in geolevels:
            raise problem(levels_s or strategy_s, f"level {n!r} is not one of the 2020 levels ({', '.join(geolevels)})")
    lengs = config.get("geodict", "geolevel_leng")
    if lengs is not None and len(_list(lengs)) != len(names):
        raise problem(lengs, f"{len(_list(lengs))} geocode lengths for {len(names)} levels")
    for n in names:
        if sum(queries[n].values()) != 1:  # the table itself is wrong: a bug of ours, not the user's
            raise AssertionError(f"strategy table: {strategy_s.value} {n} shares sum to {sum(queries[n].values())}")

    if schema.get("kind") == "units_households":
        text = _households(
            path,
            config,
            table,
            names,
            geolevels,
            props,
            rho,
            queries,
            strategy_s,
            strategy,
            ordering_s,
            ordering,
            schema_s,
            schema,
            account,
        )
        return text, account.stderr_lines(), {"rho": rho}
    privacy = config.get("reader", "privacy_table") or _required(config, "reader", "main_table", root)
    hist = config.get("reader", f"{privacy.value.strip()}.histogram")
    if hist is not None:
        read = [schema["reader_names"].get(v, v) for v in str(hist.value).split()]
        if read != schema["histogram"]:
            raise problem(
                hist,
                f"the histogram {' x '.join(read)} is not schema {schema_s.value}'s "
                f"({' x '.join(schema['histogram'])})",
            )
        _reader_settings(config, account, privacy.value.strip(), schema)

    invariants, inv_lines = _invariants(config, table, geolevels, account, schema)
    zeros, cons, con_notes = _constraints(config, table, geolevels, account, schema)
    spine, spine_notes = _spine(config, names, geolevels, schema)
    text = _spec_text(
        path,
        config,
        names,
        geolevels,
        props,
        rho,
        queries,
        strategy_s,
        strategy,
        ordering_s,
        ordering,
        schema_s,
        schema,
        invariants,
        inv_lines,
        zeros,
        cons,
        con_notes,
        spine,
        spine_notes,
        account,
    )
    return text, account.stderr_lines(), {"rho": rho}


def _from_config(config, levels_s, strategy_s, strategy, root):
    """Levels and their shares from geolevel_names and geolevel_budget_prop; rho from global_scale."""
    if "queries" not in strategy:
        raise problem(
            strategy_s,
            f"strategy {strategy_s.value!r} states allocations, not shares: the DAS reads it "
            "with an empty geolevel_names (levels and total from the strategy)",
        )
    names = _list(levels_s)[::-1]  # written smallest to largest; the budget is top-down
    props_s = _required(config, "budget", "geolevel_budget_prop", root)
    props = [_frac(props_s, p) for p in _list(props_s)]
    if len(props) != len(names):
        raise problem(props_s, f"{len(props)} shares for {len(names)} levels ({', '.join(names)})")
    if sum(props) != 1:
        raise problem(props_s, f"the level shares sum to {shown_fraction(sum(props))}, not 1")
    if any(p < 0 for p in props):
        raise problem(props_s, "a level share is negative")
    scale_s = _required(config, "budget", "global_scale", root)
    scale = _frac(scale_s, str(scale_s.value))
    if scale <= 0:
        raise problem(scale_s, "the global scale must be positive")
    missing = [n for n in names if n not in strategy["queries"]]
    if missing:
        raise problem(strategy_s, f"strategy {strategy_s.value!r} has no queries for level(s) {', '.join(missing)}")
    queries = {n: {q: Fraction(v) for q, v in strategy["queries"][n].items()} for n in names}
    return names, props, 1 / (scale * scale), queries


def _from_strategy(config, strategy_s, strategy, account, root):
    """With geolevel_names empty the DAS takes the levels and the total from the strategy
    (programs/engine/budget.py:43-48, 74-90, 424-460 of the DHC code): a level's budget is the sum
    of its (household and unit) query allocations, the total their sum, rho = the total
    (global_scale_sq = 1 / total), and each query's share its allocation over its level's budget.
    geolevel_budget_prop and global_scale, if set, are not read."""
    if "allocations" not in strategy:
        raise problem(
            config.get("geodict", "geolevel_names") or root,
            f"geolevel_names is empty, but strategy {strategy_s.value!r} states no levels of its own",
            key="[geodict] geolevel_names",
        )
    for key in ("geolevel_budget_prop", "global_scale"):
        found = config.get("budget", key)
        if found is not None and str(found.value).strip():
            account.not_understood(
                found,
                "not read by the DAS: geolevel_names is empty, so the levels and the total "
                "come from the strategy (programs/engine/budget.py:74-90)",
            )
    for override in _overrides(config, strategy):
        raise problem(
            override,
            "a per-query budget override (programs/engine/budget.py:426-439) is not supported by this importer",
        )
    names = list(strategy["levels"])
    units = strategy.get("unit_allocations", {})
    level_budget = {
        n: sum(Fraction(v) for v in strategy["allocations"][n].values())
        + sum(Fraction(v) for v in units.get(n, {}).values())
        for n in names
    }
    total = sum(level_budget.values())
    props = [level_budget[n] / total for n in names]
    queries = {
        n: {q: Fraction(v) / level_budget[n] for q, v in {**strategy["allocations"][n], **units.get(n, {})}.items()}
        for n in names
    }
    return names, props, total, queries


def _overrides(config, strategy):
    for n in strategy["levels"]:
        for q in {**strategy["allocations"][n], **strategy.get("unit_allocations", {}).get(n, {})}:
            found = config.get("budget", f"{n}_{q}")
            if found is not None:
                yield found


def _reader_settings(config, account, privacy: str, schema: dict) -> None:
    """The reader's value ranges and histogram are checked against the schema (and so applied)."""
    for section, key, setting in config.items():
        if section != "reader":
            continue
        base = key.split(".")[0]
        if base in schema["reader_names"] and key.endswith(".legal"):
            var = schema["reader_names"][base]
            want = schema["sizes"][var]
            text = str(setting.value).strip()
            if text != f"0-{want - 1}":
                raise problem(setting, f"schema {var} has {want} values (0-{want - 1}); the reader declares {text}")
            _drop(account, setting)
            continue
        if key in (f"{privacy.lower()}.histogram",):
            _drop(account, setting)


def _drop(account: Account, setting: Setting) -> None:
    account.unknown[:] = [(s, w) for s, w in account.unknown if s is not setting]


def _level(setting, geolevels) -> str:
    """The level a `theInvariants.LEVEL` / `theConstraints.LEVEL` key names (option names are case-insensitive)."""
    level = setting.key.split(".", 1)[1]
    for name in geolevels:
        if name.lower() == level.lower():
            return name
    raise problem(setting, f"{level!r} is not a geographic level ({', '.join(geolevels)})")


def _invariants(config, table, geolevels, account, schema):
    out, lines = [], []
    known = {**table["invariants"], **schema.get("invariants", {})}  # the schema's own citations first
    for section, key, setting in config.items():
        if section != "constraints" or not key.startswith("theinvariants."):
            continue
        level = _level(setting, geolevels)
        for name in _list(setting):
            entry = known.get(name)
            if entry is None:
                raise problem(setting, f"unknown invariant {name!r}: the table knows {', '.join(sorted(known))}")
            if "implied_by" in entry:
                lines.append(
                    f"#   {setting.where()}: {name} at {level}: implied by {entry['implied_by']} ({entry['source']})"
                )
                continue
            by = ([geolevels[level]] if geolevels[level] != "nation" else []) + entry["by"]
            text = f"count {entry['table']}" + (f" by {', '.join(by)}" if by else "")
            out.append((list(geolevels).index(level), text))
            lines.append(f"#   {setting.where()}: {name} at {level} -> {text} ({entry['source']})")
    return [t for _, t in sorted(out, key=lambda p: p[0])], lines


def _constraints(config, table, geolevels, account, schema):
    zeros, pairs, notes = {}, set(), []
    seen, unstated = {}, {}
    known = {**table["constraints"], **schema.get("constraints", {})}  # the schema's own names first
    for section, key, setting in config.items():
        if section != "constraints" or not key.startswith("theconstraints."):
            continue
        level = _level(setting, geolevels)
        for name in _list(setting):
            entry = schema.get("constraints", {}).get(name) or table["constraints"].get(name)
            if entry is None:
                raise problem(setting, f"unknown constraint {name!r}: the table knows {', '.join(sorted(known))}")
            seen.setdefault(name, []).append(level)
            if "not_applied" in entry:
                unstated.setdefault(name, (setting, entry, []))[2].append(level)
                continue
            if "structural_zero" in entry:
                zeros[name] = entry["structural_zero"]
            elif "pair" in entry:
                pairs.add(entry["pair"])
            notes.append(f"#   {setting.where()}: {name} at {level} ({entry['source']})")
    for name, (setting, entry, levels) in unstated.items():
        account.not_understood(
            setting,
            f"constraint {name} (at {', '.join(levels)}; {entry['source']}) is NOT applied: {entry['not_applied']}",
        )
    for pair in pairs:
        halves = [n for n, e in table["constraints"].items() if e.get("pair") == pair]
        if not all(h in seen for h in halves):
            raise problem(
                config.files[0], f"constraint pair {pair} needs both {' and '.join(halves)}", key="[constraints]"
            )
    return zeros, sorted(pairs), notes


def _spine(config, names, geolevels, schema):
    out, notes = {}, []
    aian = config.get("geodict", "target_das_aian_areas")
    if aian is not None and _bool(aian):
        out["aian"] = "aian"
        notes.append(
            f"#   {aian.where()}: target_das_aian_areas = True -> spine aian (each state split into its AIAN and non-AIAN parts)"
        )
    spine = config.get("geodict", "spine")
    if spine is not None:
        kind = str(spine.value).strip()
        if kind == "opt_spine":
            inner = [
                geolevels[n] for n in names if geolevels[n] not in ("nation", "state", "block")
            ]  # between state and block
            out["bypass"] = inner
            notes.append(
                f"#   {spine.where()}: spine = opt_spine -> bypass {', '.join(inner)} (single-child geounits measured with their child)"
            )
        elif kind not in ("non_aian_spine", "aian_spine"):
            raise problem(spine, f"unknown spine {kind!r}: the DAS knows opt_spine, aian_spine, non_aian_spine")
    gqs = config.get("geodict", "ignore_gqs_in_block_groups")
    if gqs is not None and not _bool(gqs):
        out["gq_blockgroups"] = list(range(1, schema["unit_types"]))
        notes.append(
            f"#   {gqs.where()}: ignore_gqs_in_block_groups = False -> block groups split by the group-quarters types of their blocks"
        )
    return out, notes


def _tolerance(config) -> Setting | None:
    kind = config.get("gurobi", "DataIndNPass_toleranceType")
    slack = config.get("gurobi", "opt_tol_slack")
    if kind is not None and str(kind.value).strip() != "opt_tol":
        raise problem(kind, f"only opt_tol is supported, got {kind.value!r}")
    return slack


def _spec_text(
    path,
    config,
    names,
    geolevels,
    props,
    rho,
    queries,
    strategy_s,
    strategy,
    ordering_s,
    ordering,
    schema_s,
    schema,
    invariants,
    inv_lines,
    zeros,
    cons,
    con_notes,
    spine,
    spine_notes,
    account,
) -> str:
    lv = [geolevels[n] for n in names]
    below = [l for l in lv if l != "nation"]
    title_s = config.get("writer", "certificate_name")
    title = str(title_s.value).strip() if title_s is not None else os.path.basename(path)
    delta = config.get("budget", "approx_dp_delta")
    scale = config.get("budget", "global_scale")
    chain = " > ".join(config.files)
    out = [
        f"# Imported by `dpspec import --das-config` from {os.path.basename(path)}.",
        f"# INCLUDE chain, as the DAS reads it: {chain}",
        "# No data and no geography file are declared: `dpspec check`, `budget` and `audit` read this spec",
        "# as it is; `compile` needs the data and the public geography (one row per block) added.",
        "# Where each part comes from:",
    ]
    if "allocations" in strategy:
        out += [
            f"#   {strategy_s.where()}: strategy {strategy_s.value} ({strategy['source']}, transcribed in",
            "#     dpspec/importers/strategies/das.json): geolevel_names is empty, so, as the DAS does",
            "#     (programs/engine/budget.py:74-90, 424-460), the levels are the strategy's, rho is the sum of",
            f"#     every query's allocation = {shown_fraction(rho)}, each level's share its allocations' sum over",
            "#     that total and each query's share its allocation over its level's sum (exact)",
        ]
    else:
        out += [
            f"#   {scale.where()}: global_scale = {scale.value} -> rho = 1 / global_scale^2 = {shown_fraction(rho)}",
            f"#   {config.get('budget', 'geolevel_budget_prop').where()}: geolevel_budget_prop -> levels",
            f"#   {strategy_s.where()}: strategy {strategy_s.value} -> queries ({strategy['source']}, "
            f"transcribed in dpspec/importers/strategies/das.json)",
        ]
    out += [
        f"#   {ordering_s.where()}: query_ordering {ordering_s.value} -> "
        f"{'outer_passes' if 'outer_passes' in ordering else 'estimation, rounding'} ({ordering['source']})",
        *_outer_notes(ordering),
        f"#   {schema_s.where()}: schema {schema_s.value} -> persons' variables ({schema['source']})",
        *inv_lines,
        *con_notes,
        *spine_notes,
    ]
    if delta is not None:
        out.append(
            f"#   {delta.where()}: approx_dp_delta = {delta.value}: the certificate's epsilon is at this delta "
            "(`dpspec budget` prints it by cks20, the DAS's conversion)"
        )
    aian_ty = config.get("geodict", "aian_areas")
    if aian_ty is not None:
        out.append(f"#   {aian_ty.where()}: aian_areas = {' '.join(str(aian_ty.value).split())}")
    out += account.comments()
    geo_cols = [("state", "category")] + [(l, f"category in {below[i - 1]}") for i, l in enumerate(below) if i > 0]
    width = max(len(c) for c in [*below, *schema["histogram"], "aian", "gqtype"])

    def col(name, ty):
        return f"    {name.ljust(width)} : {ty}"

    def values(n):
        return "{" + ", ".join(str(i) for i in range(n)) + "}"

    out += [
        "",
        f'spec "{_quote(title)} (imported from {_quote(os.path.basename(path))})"',
        "",
        'domain cef "2020 Census Edited File" {',
        "  stage edited",
        f"  geography census {{ {' > '.join(below)} }}",
        "  table persons unit person {",
    ]
    out += [col(n, t) for n, t in geo_cols]
    out += [col(v, values(schema["sizes"][v])) for v in schema["histogram"]]
    if "aian" in spine:
        out.append(col("aian", "{0, 1}"))
    out += ["  }", "  table facilities unit facility {"]
    out += [col(n, t) for n, t in geo_cols]
    out += [col("gqtype", values(schema["unit_types"])), "  }", "}", ""]
    out += ["invariants {", *[f"  {i}" for i in invariants], "}", ""]
    out += [
        "unit persons : hamming",
        "premetric zcdp",
        "",
        "mechanism topdown {",
        "  table: persons",
        f"  variables: {', '.join(schema['histogram'])}",
        f"  rho: {shown_fraction(rho)}",
    ]
    if spine:
        out.append("  spine: {")
        if "aian" in spine:
            out.append("    aian: aian")
        if "bypass" in spine:
            out.append(f"    bypass: {', '.join(spine['bypass'])}")
        if "gq_blockgroups" in spine:
            out += [
                "    gq_blockgroups: {",
                "      table: facilities",
                "      type: gqtype",
                f"      types: [{', '.join(str(t) for t in spine['gq_blockgroups'])}]",
                "    }",
            ]
        out.append("  }")
    if schema.get("recodes"):
        out.append("  recodes: {")
        for name, r in schema["recodes"].items():
            out.append(f"    {name}: {{")
            out.append(f"      of: {r['of']}")
            out += [f"      {g}: [{', '.join(str(v) for v in vals)}]" for g, vals in r.items() if g != "of"]
            out.append("    }")
        out.append("  }")
    if zeros:
        out.append("  structural_zeros: {")
        for name, cells in zeros.items():
            out.append(f"    {name}: {{")
            out += [f"      {v}: [{', '.join(str(x) for x in vals)}]" for v, vals in cells.items()]
            out.append("    }")
        out.append("  }")
    if "hhgq_total_lb_ub" in cons:
        out += [
            "  constraints: {",
            "    hhgq_total_lb_ub: {",
            "      of: hhgq",
            "      table: facilities",
            "      type: gqtype",
            f"      occupied: [{', '.join(str(t) for t in range(1, schema['unit_types']))}]",
            "    }",
            "  }",
        ]
    est = {geolevels[k]: v for k, v in ordering.get("estimation", {}).items() if k in names}
    if est:
        out.append("  estimation: {")
        out += [f"    {k}: [{', '.join(v)}]" for k, v in est.items()]
        out.append("  }")
    slack = _tolerance(config)
    if slack is not None:
        if "outer_passes" in ordering:
            out.append("  pass_tolerance_type: opt_tol")
        out.append(f"  pass_tolerance: {shown_fraction(_frac(slack, str(slack.value)))}")
    if "outer_passes" in ordering:
        out += _outer_passes(ordering, names, geolevels)
    else:
        out.append("  rounding: {")
        for n in names:
            passes = ordering["rounding"].get(n)
            if not passes:
                continue
            out.append(f"    {geolevels[n]}: {{")
            out += [f"      pass{i + 1}: [{', '.join(_q(q) for q in p)}]" for i, p in enumerate(passes)]
            out.append("    }")
        out.append("  }")
    out.append("  levels: {")
    out += [f"    {geolevels[n]}: {shown_fraction(p)}" for n, p in zip(names, props)]
    out += ["  }", "  queries: {"]
    for n in names:
        out.append(f"    {geolevels[n]}: {{")
        out += [f"      {q}: {shown_fraction(s)}" for q, s in queries[n].items()]
        out.append("    }")
    out += [
        "  }",
        "}",
        "",
        f"budget rho <= {shown_fraction(rho)}",
        "",
        "release {",
        "  microdata persons",
        "  output measurements",
        "}",
        "",
    ]
    return "\n".join(out)


def _outer_passes(ordering, names, geolevels) -> list[str]:
    """The interleaved outer passes (the same at every level): each outer pass's least-squares
    and rounder passes. The constrain-to lists are not written (see _outer_notes)."""
    out = ["  outer_passes: {"]
    for n in names:
        out.append(f"    {geolevels[n]}: {{")
        for i, outer in enumerate(ordering["outer_passes"]):
            out.append(f"      outer{i + 1}: {{")
            for kind, key in (("estimation", "l2"), ("rounding", "rounding")):
                out.append(f"        {kind}: {{")
                out += [f"          pass{j + 1}: [{', '.join(_q(q) for q in p)}]" for j, p in enumerate(outer[key])]
                out.append("        }")
            out.append("      }")
        out.append("    }")
    out.append("  }")
    return out


def _outer_notes(ordering) -> list[str]:
    if "outer_passes" not in ordering:
        return []
    held = "; ".join(
        f"outer pass {i + 1}: {', '.join(q for p in o['constrain_to'] for q in p)}"
        for i, o in enumerate(ordering["outer_passes"])
    )
    return [
        "#     NOT written: the ordering's constrain-to lists (" + held + "). Each outer pass here has a",
        "#     single least-squares pass, so no later pass of it would hold them; dpspec's outer_passes",
        "#     take no such list.",
    ]


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")


def _households(
    path,
    config,
    table,
    names,
    geolevels,
    props,
    rho,
    queries,
    strategy_s,
    strategy,
    ordering_s,
    ordering,
    schema_s,
    schema,
    account,
) -> str:
    """The DHC units/households run: the unit histogram (tenvacgq) is the main table, the household
    histogram a joint table solved with it, as specs/dhc_households_production_topdown.dps states them."""
    units, hh = schema["units"], schema["households"]
    pseudo = {
        "reader_names": {**hh["reader_names"], units["reader"]: units["variable"]},
        "sizes": {**hh["sizes"], units["variable"]: len(units["values"])},
    }
    privacy = config.get("reader", "privacy_table") or _required(config, "reader", "main_table", config.files[0])
    for table_key, want in (
        (f"{privacy.value.strip()}.histogram", hh["histogram"]),
        ("unit.histogram", [units["variable"]]),
    ):
        hist = config.get("reader", table_key)
        if hist is None:
            continue
        read = [pseudo["reader_names"].get(v, v) for v in str(hist.value).split()]
        if read != want:
            raise problem(
                hist, f"the histogram {' x '.join(read)} is not schema {schema_s.value}'s ({' x '.join(want)})"
            )
        _drop(account, hist)
    _reader_settings(config, account, privacy.value.strip(), pseudo)

    inv_text, notes = [], []
    for section, key, setting in config.items():
        if section == "constraints" and key.startswith("theinvariants."):
            level = _level(setting, geolevels)
            for name in _list(setting):
                entry = schema["invariants"].get(name)
                if entry is None:
                    raise problem(
                        setting,
                        f"unknown invariant {name!r}: schema {schema_s.value} knows "
                        f"{', '.join(sorted(schema['invariants']))}",
                    )
                if "not_applied" in entry:
                    account.not_understood(
                        setting,
                        f"invariant {name} at {level} ({entry['source']}) is NOT applied: {entry['not_applied']}",
                    )
                elif "implied_by" in entry:
                    notes.append(
                        f"#   {setting.where()}: {name} at {level}: implied by {entry['implied_by']} ({entry['source']})"
                    )
                else:
                    if level != "Block":
                        raise problem(setting, f"invariant {name} is read at the block only, not at {level}")
                    inv_text.append(entry["text"])
                    notes.append(f"#   {setting.where()}: {name} at {level} -> {entry['text']} ({entry['source']})")
    zeros, cross, seen, unstated = {}, {}, {}, {}
    for section, key, setting in config.items():
        if section != "constraints" or not key.startswith("theconstraints."):
            continue
        level = _level(setting, geolevels)
        for name in _list(setting):
            entry = schema["constraints"].get(name)
            if entry is None:
                raise problem(
                    setting,
                    f"unknown constraint {name!r}: schema {schema_s.value} knows "
                    f"{', '.join(sorted(schema['constraints']))}",
                )
            seen.setdefault(name, []).append(level)
            if "not_applied" in entry:
                unstated.setdefault(name, (setting, entry, []))[2].append(level)
            zeros.update(entry.get("structural_zeros", {}))
            cross.update(entry.get("cross", {}))
    for name, levels in seen.items():
        entry = schema["constraints"][name]
        if "not_applied" not in entry:
            what = (
                "structural zeros " + ", ".join(entry["structural_zeros"])
                if "structural_zeros" in entry
                else "cross constraints " + ", ".join(entry["cross"])
                if "cross" in entry
                else f"follows from the invariant {entry['follows_from_invariant']}"
            )
            notes.append(f"#   [constraints] {name} at {', '.join(levels)}: {what} ({entry['source']})")
    for name, (setting, entry, levels) in unstated.items():
        account.not_understood(
            setting,
            f"constraint {name} (at {', '.join(levels)}; {entry['source']}) is NOT applied: {entry['not_applied']}",
        )
    for key in ("dataindnpass_tolerancetype", "opt_tol_slack"):
        found = config.get("gurobi", key)
        if found is not None:
            account.not_understood(
                found,
                "not stated: each outer pass of this ordering has a single least-squares "
                "pass, so the tolerance holds nothing",
            )
    spine, spine_notes = _spine(config, names, geolevels, {"unit_types": len(units["gqhh_vect"])})

    def rename(q: str) -> str:
        return " * ".join(hh["rename"].get(p.strip(), p.strip()) for p in q.split("*"))

    def named(q: str) -> str:
        return units["query_names"][q] if q in units["query_names"] else f"households: {rename(q)}"

    lv = [geolevels[n] for n in names]
    below = [l for l in lv if l != "nation"]
    title_s = config.get("writer", "certificate_name")
    title = str(title_s.value).strip() if title_s is not None else os.path.basename(path)
    out = [
        f"# Imported by `dpspec import --das-config` from {os.path.basename(path)}.",
        f"# INCLUDE chain, as the DAS reads it: {' > '.join(config.files)}",
        "# No data and no geography file are declared: `dpspec check`, `budget` and `audit` read this spec",
        "# as it is; `compile` needs the data and the public geography (one row per block) added.",
        "# Where each part comes from:",
        f"#   {strategy_s.where()}: strategy {strategy_s.value} ({strategy['source']}, transcribed in",
        "#     dpspec/importers/strategies/das.json): geolevel_names is empty, so, as the DAS does",
        "#     (programs/engine/budget.py:74-90, 424-460), the levels are the strategy's, rho is the sum of",
        f"#     every household and unit query's allocation = {shown_fraction(rho)}, each level's share its",
        "#     allocations' sum over that total and each query's share its allocation over its level's sum",
        f"#   {ordering_s.where()}: query_ordering {ordering_s.value} -> outer_passes ({ordering['source']})",
        *_outer_notes(ordering),
        f"#   {schema_s.where()}: schema {schema_s.value} -> the units' {units['variable']} and the households' "
        f"{' x '.join(hh['histogram'])} ({schema['source']})",
        f"#   the household queries name the tenure {', '.join(f'{a} as {b}' for a, b in hh['rename'].items())}; "
        f"the units' {', '.join(f'{a} is their {b}' for a, b in units['query_names'].items())} query",
        *notes,
        *spine_notes,
    ]
    aian_ty = config.get("geodict", "aian_areas")
    if aian_ty is not None:
        out.append(f"#   {aian_ty.where()}: aian_areas = {' '.join(str(aian_ty.value).split())}")
    out += account.comments()
    geo_cols = [("state", "category")] + [(l, f"category in {below[i - 1]}") for i, l in enumerate(below) if i > 0]
    width = max(len(c) for c in [*below, *hh["histogram"], "aian", units["variable"], "gqhh_vect"])

    def col(name, ty):
        return f"    {name.ljust(width)} : {ty}"

    def vals(items):
        return ", ".join(str(v) for v in items)

    def recodes(rs, pad):
        lines = []
        for name, r in rs.items():
            lines.append(f"{pad}{name}: {{")
            lines.append(f"{pad}  of: {r['of']}")
            lines += [f"{pad}  {g}: [{vals(v)}]" for g, v in r.items() if g not in ("of", "_source")]
            lines.append(f"{pad}}}")
        return lines

    out += [
        "",
        f'spec "{_quote(title)} (imported from {_quote(os.path.basename(path))})"',
        "",
        'domain cef "2020 Census Edited File" {',
        "  stage edited",
        f"  geography census {{ {' > '.join(below)} }}",
        f"  table {units['table']} unit {units['unit']} {{",
    ]
    out += [col(n, t) for n, t in geo_cols]
    out += [
        col(units["variable"], "{" + vals(units["values"]) + "}"),
        col("gqhh_vect", "{" + vals(units["gqhh_vect"]) + "}"),
    ]
    if "aian" in spine:
        out.append(col("aian", "{0, 1}"))
    out += ["  }", f"  table {hh['table']} unit {hh['unit']} {{"]
    out += [col(n, t) for n, t in geo_cols]
    if "aian" in spine:
        out.append(col("aian", "{0, 1}"))
    out += [col(v, "{" + vals(range(hh["sizes"][v])) + "}") for v in hh["histogram"]]
    out += [
        "  }",
        "}",
        "",
        "invariants {",
        *[f"  {i}" for i in inv_text],
        "}",
        "",
        f"unit {units['table']} : hamming",
        "premetric zcdp",
        "",
        "mechanism topdown {",
        f"  table: {units['table']}",
        f"  variables: {units['variable']}",
        f"  rho: {shown_fraction(rho)}",
    ]
    if spine:
        out.append("  spine: {")
        if "aian" in spine:
            out.append("    aian: aian")
        if "bypass" in spine:
            out.append(f"    bypass: {', '.join(spine['bypass'])}")
        out.append("  }")
    out += ["  recodes: {", *recodes(units["recodes"], "    "), "  }"]
    unit_names = {n: set(strategy.get("unit_allocations", {}).get(n, {})) for n in names}
    out.append("  levels: {")
    out += [f"    {geolevels[n]}: {shown_fraction(p)}" for n, p in zip(names, props)]
    out += ["  }", "  queries: {"]
    for n in names:
        out.append(f"    {geolevels[n]}: {{")
        out += [f"      {named(q)}: {shown_fraction(s)}" for q, s in queries[n].items() if q in unit_names[n]]
        out.append("    }")
    out += [
        "  }",
        "  joint: {",
        f"    {hh['table']}: {{",
        f"      table: {hh['table']}",
        f"      variables: {', '.join(hh['histogram'])}",
        "      recodes: {",
        *recodes(hh["recodes"], "        "),
        "      }",
    ]
    if zeros:
        out.append("      structural_zeros: {")
        for name, cells in zeros.items():
            out.append(f"        {name}: {{")
            out += [f"          {v}: [{vals(x)}]" for v, x in cells.items()]
            out.append("        }")
        out.append("      }")
    out.append("      queries: {")
    for n in names:
        out.append(f"        {geolevels[n]}: {{")
        out += [f"          {rename(q)}: {shown_fraction(s)}" for q, s in queries[n].items() if q not in unit_names[n]]
        out.append("        }")
    out += ["      }", "    }", "  }", "  outer_passes: {"]
    for n in names:
        out.append(f"    {geolevels[n]}: {{")
        for i, outer in enumerate(ordering["outer_passes"]):
            if len(outer["l2"]) != 1 or len(outer["rounding"]) != 1:
                raise AssertionError(
                    f"ordering table: {ordering_s.value}: one least-squares and one rounder pass per outer pass"
                )
            out += [
                f"      outer{i + 1}: {{",
                f"        estimation: [{', '.join(_q(named(q)) for q in outer['l2'][0])}]",
                f"        rounding: [{', '.join(_q(named(q)) for q in outer['rounding'][0])}]",
                "      }",
            ]
        out.append("    }")
    out.append("  }")
    if cross:
        out.append("  cross_constraints: {")
        for name, (left, right) in cross.items():
            out += [f"    {name}: {{", f"      left: {_q(left)}", f"      right: {_q(right)}", "    }"]
        out.append("  }")
    out += [
        "}",
        "",
        f"budget rho <= {shown_fraction(rho)}",
        "",
        "release {",
        f"  microdata {units['table']}",
        f"  microdata {hh['table']}",
        "}",
        "",
    ]
    return "\n".join(out)
