"""The nested settings of TopDown's parameter schema that more than one parameter declares: a
level's passes (estimation, rounding, constrain_to, an outer pass's own), the query shares, recodes
and structural zeros (the mechanism table's, and a joint table's), and the joint table itself.
`plugin.py` lists the parameters; the core checks a spec against them and locates their errors."""

from __future__ import annotations

import attrs

from dpspec.api import ParamSpec

# a level's passes: one list of queries ("total", "hhgq * votingage", a joint table's "NAME: QUERY"),
# or a block of named passes in order, each a list
PASSES = ParamSpec(
    "",
    "either",
    "the level's passes",
    options=(
        ParamSpec("", "list", "one pass: its queries", items="string"),
        ParamSpec(
            "",
            "map",
            "named passes in order",
            keys="names",
            values=ParamSpec("", "list", "the pass's queries", items="string"),
        ),
    ),
)
OUTER_PASS = ParamSpec(
    "",
    "block",
    "one outer pass: its passes fitted and rounded, then held",
    fields=(
        ParamSpec("estimation", "either", "its least-squares passes", required=True, options=PASSES.options),
        ParamSpec("rounding", "either", "its rounding passes", required=True, options=PASSES.options),
        ParamSpec(
            "constrain_to", "either", "per estimation pass, the queries later passes hold", options=PASSES.options
        ),
    ),
)


# a level's query shares: total, detailed (every variable), or factors joined by "*" (variables
# and recodes), each a share of the level's rho; one block for every level, or one per level
QUERY_SHARES = ParamSpec(
    "",
    "map",
    "each query's share of the level's rho (total, detailed, or var * var); must sum to 1",
    keys="names",
    values=ParamSpec("", "number", "the query's share"),
)
QUERIES = ParamSpec(
    "queries",
    "map",
    "share of each level's rho per query (total, detailed, or var*var); "
    "one block for all levels or one per level; must sum to 1",
    required=True,
    keys="names",
    values=ParamSpec(
        "",
        "either",
        "a query's share of every level's rho, or a level's own block of query shares",
        options=(ParamSpec("", "number", "the query's share of every level's rho"), QUERY_SHARES),
    ),
)

# a category as a column's values write it: a number (int 0..9, {0, 1}) or a name ({mortgage, owned})
CATEGORY = ParamSpec(
    "", "either", "a category: a number or a name", options=(ParamSpec("", "number", ""), ParamSpec("", "string", ""))
)
RECODES = ParamSpec(
    "recodes",
    "map",
    "query factors that group one variable's categories: "
    "NAME: { of: VARIABLE  LABEL: [values] ... }, a partition of the variable",
    keys="names",
    values=ParamSpec(
        "",
        "map",
        "one recode: its groups, LABEL: [categories], a partition of the variable",
        keys="names",
        fields=(ParamSpec("of", "string", "the histogram variable whose categories it groups", required=True),),
        values=ParamSpec("", "list", "the group's categories", items=CATEGORY),
    ),
)

STRUCTURAL_ZEROS = ParamSpec(
    "structural_zeros",
    "map",
    "cells that must be 0 everywhere, e.g. { nurse_nva_0: { hhgq: [3]  "
    "votingage: [0] } } (a recode may stand for its variable, its group labels for the categories in them); "
    "data with a record there is rejected",
    keys="names",
    values=ParamSpec(
        "",
        "map",
        "one set of cells: the categories each variable it names takes there",
        keys="names",
        values=ParamSpec("", "list", "the variable's categories, or the recode's group labels", items=CATEGORY),
    ),
)

JOINT = ParamSpec(
    "joint",
    "map",
    "further tables solved with this one in one problem per node: { units: { table: units  "
    "variables: vacs  queries: { total: 1/4 } } }; their query shares and this table's sum to 1 per level; a joint "
    "table may have its own recodes and structural_zeros",
    keys="names",
    values=ParamSpec(
        "",
        "block",
        "one further table, on the same geography",
        fields=(
            ParamSpec("table", "string", "the further table of the domain", required=True),
            ParamSpec(
                "variables",
                "list",
                "its histogram variables (enumerated, boolean or integer-range columns)",
                required=True,
                items="string",
            ),
            attrs.evolve(
                QUERIES,
                doc="share of each level's rho per query of this table; with the mechanism's table's "
                "they sum to 1 per level",
            ),
            RECODES,
            STRUCTURAL_ZEROS,
        ),
    ),
)
