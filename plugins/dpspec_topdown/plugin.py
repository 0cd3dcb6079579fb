"""The `topdown` mechanism: the 2020 Census TopDown algorithm as a dpspec plugin.

The spec names the person table, the histogram variables (enumerated columns), the total rho
and its split over geographic levels (`levels`) and over queries (`queries`: one block for every
level, or one block per level). Geography comes from the domain's hierarchy; the root level may
be given a share under the name `nation`. The spec's declared invariants on the person table
are enforced exactly and are the mechanism's induced invariants: an invariant it cannot keep
(a column that is neither a level nor a histogram variable) is a check error.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec.api import (
    BudgetBreakdown,
    ExpectedError,
    Mechanism,
    NativeFlavor,
    Semantics,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    ir,
    BudgetStatement,
    ZCDP,
    ReleaseColumns,
    discrete_gaussian_variance,
    LazyModule,
)

from .measurement.allocation import JOINT_MARK, _is_joint_key, _only_queries, allocate, split_allocation
from .params.checks import column_problems, setting_problems
from .params.joint import _joint_tables, _tied_attributes
from .params.schema import JOINT, PASSES, OUTER_PASS, QUERIES, RECODES, STRUCTURAL_ZEROS
from .params.spine import _aian_split_levels, _spine
from .params.tables import ROOT, _canonical_strategy, _invariants, _joint, _levels, _relation, _schema, _variables
from .release.report import _guarantee_notes, _query_labels, allocation_rows, bypass_rows
from .semantics import across_split_rho, attribute_rhos, geography_rhos, tied_attribute_rhos

# imported on first use: `dpspec --help` loads this module, not them
_design = LazyModule("dpspec_topdown.design", "_design", globals())
_broken_places = LazyModule("dpspec_topdown.params.broken_places", "_broken_places", globals())
_outputs = LazyModule("dpspec_topdown.release.outputs", "_outputs", globals())
_context = LazyModule("dpspec_topdown.run.context", "_context", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_inputs = LazyModule("dpspec_topdown.run.inputs", "_inputs", globals())
_topdown = LazyModule("dpspec_topdown.run.topdown", "_topdown", globals())
_likelihood = LazyModule("dpspec_topdown.likelihood", "_likelihood", globals())
# numpy and pandas, for `dpspec infer` only
_measured = LazyModule("dpspec_topdown.release.measured", "_measured", globals())
_neighbours = LazyModule("dpspec_topdown.neighbours", "_neighbours", globals())

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())

__version__ = "1.0.0"


class TopDown(Mechanism):
    name = "topdown"
    version = __version__
    description = (
        "The 2020 Census TopDown algorithm: integer noise from a discrete Gaussian (bell-shaped) "
        "distribution on every count of every geographic unit, then, from the nation down, the "
        "nonnegative whole-number counts closest to the noisy ones (least squares) that keep the invariants."
    )
    proof = "Abowd et al. (2022), The 2020 Census Disclosure Avoidance System TopDown Algorithm, Harvard Data Science Review: zCDP of the discrete Gaussian measurements (Canonne, Kamath & Steinke 2020) composed over levels and queries (Bun & Steinke 2016); estimation and rounding are post-processing"
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Gaussian rejection sampler on integers and rationals (dpspec.api.discrete_gaussian), no floating point"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the person table", required=True),
            ParamSpec(
                "variables",
                "columns",
                "the histogram variables (enumerated, boolean or integer-range columns)",
                required=True,
            ),
            ParamSpec("rho", "number", "the total zCDP budget", required=True, low=Fraction(0)),
            ParamSpec(
                "levels",
                "shares",
                "share of rho per geographic level ('nation' is the root); must sum to 1",
                required=True,
            ),
            QUERIES,
            RECODES,
            ParamSpec(
                "estimation",
                "map",
                "least-squares passes per level: { county: [total] } fits the total "
                "first and then the other queries, keeping earlier answers within pass_tolerance",
                keys="levels",
                values=PASSES,
            ),
            ParamSpec(
                "rounding",
                "map",
                'rounding passes per level: { county: { pass1: ["total"]  pass2: ["hhgq", "hhgq * hispanic"] } } '
                "keeps each pass's margins within floor/ceil of the fit, then fixes them",
                keys="levels",
                values=PASSES,
            ),
            ParamSpec(
                "outer_passes",
                "map",
                "interleaved outer passes per level: { county: { outer1: { estimation: "
                '{ pass1: ["total"] }  rounding: { pass1: ["total"] } }  outer2: { ... } } }: each outer pass fits '
                "and rounds its queries, then its last rounding pass's answers are fixed exactly for the next; with a joint table a "
                'pass names its queries as "NAME: QUERY"',
                keys="levels",
                values=ParamSpec("", "map", "the level's outer passes in order", keys="names", values=OUTER_PASS),
            ),
            ParamSpec(
                "constrain_to",
                "map",
                "per level and estimation pass, the queries later passes hold within "
                'pass_tolerance: { county: { pass1: ["total", "hhgq"] } } (default: the queries the pass names)',
                keys="levels",
                values=PASSES,
            ),
            ParamSpec(
                "pass_tolerance",
                "number",
                "how far a later estimation pass may move earlier passes' answers "
                "(production: 1/10); with pass_tolerance_type: opt_tol, the slack added to the LP-optimal tolerance",
                low=Fraction(0),
            ),
            ParamSpec(
                "pass_tolerance_type",
                "choice",
                "const: later passes hold earlier answers within pass_tolerance; "
                "opt_tol: within the LP-optimal tolerance plus pass_tolerance (production's opt_tol, opt_tol_slack)",
                choices=("const", "opt_tol"),
            ),
            STRUCTURAL_ZEROS,
            ParamSpec(
                "constraints",
                "map",
                "bounds on persons per block from a second table, e.g. { hhgq_total_lb_ub: "
                "{ of: hhgq  table: facilities  type: gqtype  occupied: [1, 2] } }: none of a type the block "
                "lacks, at least one per occupied facility (sense: upper or lower keeps one side); its counts "
                "by block and type must be invariants",
                keys="names",
                values=ParamSpec(
                    "",
                    "block",
                    "one bound",
                    fields=(
                        ParamSpec("of", "string", "the histogram variable or recode bounded", required=True),
                        ParamSpec("table", "table", "the second table whose rows set the bounds", required=True),
                        ParamSpec("type", "string", "its column of the rows' category of `of`", required=True),
                        ParamSpec(
                            "occupied",
                            "list",
                            "the types whose rows stand for occupied facilities: at least one person each",
                        ),
                        ParamSpec(
                            "sense",
                            "choice",
                            "both (default), lower or upper: which bounds are kept",
                            choices=("both", "lower", "upper"),
                        ),
                    ),
                ),
            ),
            ParamSpec(
                "spine",
                "block",
                "the geographic spine, as production ran it: { aian: COLUMN } splits the state "
                "(the first level) and the levels below it but the finest into their parts inside and outside "
                "AIAN areas (COLUMN: 1 inside), measured separately; the state invariant holds on the parts' sum",
                fields=(
                    ParamSpec(
                        "aian",
                        "column",
                        "the person column marking the units inside AIAN areas (0/1 or "
                        "boolean, constant within each finest unit)",
                        table_param="table",
                    ),
                    ParamSpec(
                        "bypass",
                        "list",
                        "levels whose single-child units are measured once with their "
                        "child's share (production's optimized spine)",
                        items="level",
                    ),
                    ParamSpec(
                        "gq_blockgroups",
                        "block",
                        "split the level above the finest by the group-quarters types each finest unit has",
                        fields=(
                            ParamSpec("table", "table", "the facilities table", required=True),
                            ParamSpec("type", "string", "its column of the facility type", required=True),
                            ParamSpec("types", "list", "the types that split a block group", required=True),
                        ),
                    ),
                    ParamSpec("geography", "table", "the reference geography: every finest unit, populated or not"),
                ),
            ),
            ParamSpec(
                "equal_to",
                "map",
                "hold the release to a product already released: { pl94: { table: T  query: "
                "\"hhgq * votingage\" } } keeps that marginal equal to T's at every finest unit (T declared public; T's columns "
                "take exactly the factors' groups, and the marginal's groups nest with every invariant's below the root)",
                keys="names",
                values=ParamSpec(
                    "",
                    "block",
                    "one product held",
                    fields=(
                        ParamSpec("table", "string", "the released product's table (declared public)", required=True),
                        ParamSpec(
                            "query", "string", 'the marginal held equal to it, e.g. "hhgq * votingage"', required=True
                        ),
                    ),
                ),
            ),
            JOINT,
            ParamSpec(
                "cross_constraints",
                "map",
                "equalities across jointly solved tables at every unit: { h1: { left: "
                '"households: total"  right: "units: occupancy = occupied" } }',
                keys="names",
                values=ParamSpec(
                    "",
                    "block",
                    "one equality",
                    fields=(
                        ParamSpec("left", "string", '"TABLE: QUERY" or "TABLE: QUERY = LABEL"', required=True),
                        ParamSpec("right", "string", '"TABLE: QUERY" or "TABLE: QUERY = LABEL"', required=True),
                    ),
                ),
            ),
            ParamSpec(
                "failsafe",
                "block",
                "production's failsafe: { minimal_schema: [hhgq] } re-solves a node that has no "
                "solution with its children sums relaxed, the sums over the other variables kept exact",
                fields=(
                    ParamSpec(
                        "minimal_schema",
                        "list",
                        "the histogram variables whose sums stay exact when the "
                        "children sums are relaxed (production's minimalSchema)",
                        required=True,
                        items="string",
                    ),
                ),
            ),
            ParamSpec(
                "postprocess_only",
                "list",
                "constraints left out of every solve and repaired after each node's "
                "rounding (production's postprocess_only_constr_names): [hhgq_total_ub, hhgq_total_lb]; needs "
                "postprocess_heuristics: true",
                items="string",
            ),
            ParamSpec(
                "postprocess_heuristics",
                "choice",
                "production's use_postprocess_heuristics: true repairs the "
                "postprocess_only constraints by moving records within a child",
                choices=("true", "false"),
            ),
            ParamSpec(
                "postprocess_require_feasible",
                "list",
                "levels where a record may also change the structural "
                "zeros' other variable and a row left broken stops the run (production's "
                "require_feasible_postproc_dim): [state, county]",
                items="level",
            ),
            ParamSpec("workers", "int", "solver processes (default: all cores)", low=Fraction(1), high=Fraction(256)),
        )
    )
    outputs = {
        "microdata": "privacy-protected person records (geography and histogram variables); named after the table",
        "measurements": "the noisy measurements: level, geocode, query, cell, value, variance",
        "joint_measurements": "with a joint table (joint: {...}): its noisy measurements, as measurements "
        "(its microdata is named after its table)",
    }
    engine_tables = True  # a Parquet person table stays on the engine: TopDown only counts it
    run_context = True  # run(spec, params, data, ctx): one dpspec.api.RunContext (API 1.6)
    uses_engine = True  # each level's nodes are solved as units of work on ctx.engine

    def check(self, spec, params):
        return column_problems(spec, params) or setting_problems(spec, params, self._allocation)

    def _allocation(self, spec, params):
        """The allocation over every measured query; a joint table's queries are keyed
        ("@NAME", *factors) and share each level's budget with the mechanism's table's."""
        strategy = _canonical_strategy(params, _schema(spec, params))
        for j in _joint(spec, params):
            for lv, entries in j["strategy"].items():
                strategy[lv] = strategy[lv] + [((JOINT_MARK + j["name"], *q), s) for q, s in entries]
        return allocate(
            params["rho"], params["levels"], strategy, _relation(spec, params), names=_query_labels(spec, params)
        )

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], _relation(spec, params), "zcdp")

    def output_keys(self, spec, params):
        """The microdata (the person table's and any joint table's) are records; their geography
        columns, and the release tables counted from them, range over the declared geography.
        The measurements' level and geocode are not domain columns, and their rows no product of
        declared columns: `run` checks them against the declared hierarchy itself (geography/
        declared.py's check_structure), and `release_columns` declares every row for `dpspec infer`."""
        return {name: OutputKeys(name, records=True) for name in [params["table"], *_joint_tables(spec, params)]}

    def induced_invariants(self, spec, params):
        invariants, problems = _invariants(spec, params)
        for j in _joint(spec, params):  # a joint table's invariants are kept on its release too
            more, extra = _invariants(spec, j["params"])
            invariants, problems = invariants + more, problems + extra
        return [] if problems else [q for _, _, q in invariants]

    def budget(self, spec, params, facts):

        alloc = self._allocation(spec, params)
        notes = [
            f"rho = {ir.format_number(alloc.rho)} split over geographic levels in shares "
            + ", ".join(f"{lv} {ir.format_number(s)}" for lv, s in alloc.level_shares.items()),
            f"L2 sensitivity squared s^2 = {alloc.queries[0].sensitivity2} per query under {alloc.relation} "
            "(the sum of the squared changes one record can make to a query's counts); each query's noise "
            "variance is s^2 / (2 rho_q), rho_q being that query's share of rho",
        ]
        spine = _spine(spec, params)
        if "aian" in spine:
            notes.append(
                f"spine: each {spine['aian'][0]} and the levels below it are measured as their AIAN and "
                f"non-AIAN parts (flag '{spine['aian'][1]}'), each part with its level's share"
            )
        if "bypass" in spine:
            notes.append(
                f"spine: single-child units of {', '.join(spine['bypass'])} are measured once with their "
                "child's share added (the child not at all); every block's geounits still spend rho"
            )
        notes.extend(_guarantee_notes(spec, params))
        if alloc.rho_spent != alloc.total_rho:
            notes.append(
                f"noise variances were rounded up to exact rationals: the noise costs rho = "
                f"{float(alloc.rho_spent):.12g}, within the stated {float(alloc.total_rho):.12g}"
            )
        return BudgetStatement.fixed(ZCDP(alloc.total_rho), *notes)  # exact

    def budget_breakdown(self, spec, params):
        """The allocation an auditor re-derives: one row per (level, query)."""
        alloc = self._allocation(spec, params)
        labels = _query_labels(spec, params, alloc)
        out = {"allocation": allocation_rows(alloc, labels)}
        spine = _spine(spec, params)
        if "bypass" in spine:
            out.setdefault("spine", {})["bypass"] = bypass_rows(alloc, _levels(spec), spine["bypass"], labels)
        if "aian" in spine:
            level, column = spine["aian"]
            split = _aian_split_levels(spec, spine)
            out.setdefault("spine", {})["aian"] = {
                "column": column,
                "split_levels": split,
                "geounit_classes": [
                    {
                        "class": f"{part} part",
                        "levels": split,
                        "budget": "the level's share (the allocation rows of the level)",
                    }
                    for part in ("AIAN", "non-AIAN")
                ],
                "invariants": f"held at {level} on the sum of each unit's two parts, never on a part",
            }
        return BudgetBreakdown(out)

    def expected_error(self, spec, params, facts):
        """Per (level, query): the variance of each noisy measurement, from the allocation alone
        (the discrete Gaussian's exact variance at its sigma²); post-processing is not included."""
        alloc = self._allocation(spec, params)
        return [
            ExpectedError(
                f"{row['level']}: {row['query']}",
                row["level"],
                row["query"],
                float(row["noise_variance"]),
                "noisy measurement, before post-processing",
            )
            for row in allocation_rows(alloc, _query_labels(spec, params, alloc))
        ]

    def semantics(self, spec, params):
        """Per-attribute and per-geography rho, as the P.L. 94-171 certificates account them."""

        alloc = self._allocation(spec, params)
        # per attribute of each table (a joint table's as 'TABLE: attribute'): a table's queries
        # read only its own attributes, but a cross constraint ties attributes across tables; per
        # geography every query counts (a record moved between blocks moves its joint records too)
        own = _only_queries(alloc, [q for q in alloc.queries if not _is_joint_key(q.query)])
        labels = _query_labels(spec, params, alloc)  # queries named as the allocation names them
        joint = _joint(spec, params)
        if joint:
            parts = [("", own, _schema(spec, params), labels)]
            for j in joint:
                mark = JOINT_MARK + j["name"]
                _, theirs = split_allocation(alloc, j["name"])
                stripped = {(lv, q[1:]): name for (lv, q), name in labels.items() if q[:1] == (mark,)}
                parts.append((f"{j['table']}: ", theirs, j["schema"], stripped))
            attributes = tied_attribute_rhos(parts, _tied_attributes(spec, params, joint))
        else:
            attributes = attribute_rhos(own, _schema(spec, params), labels)
        across = across_split_rho(alloc, _levels(spec), _aian_split_levels(spec, _spine(spec, params)))
        # additive: the AIAN spine's parts are measured apart
        return Semantics(
            attributes, geography_rhos(alloc, _levels(spec)), {"across_split": across} if across is not None else {}
        )

    def run(self, spec, params, data, ctx):
        """The design parsed once, the data read, TopDown run, and its release. `ctx` is the
        API's RunContext; TopDown's own (run/context.py) adds the worker count and names each
        progress stage as a level. TopDown keeps no truths: `ctx.keep_truths` is not read (the
        sweep compares the released microdata's count tables with the data's)."""
        with _broken_places.located(spec, params):  # data that break a construct: the DataError cites its line
            records = _inputs.read_records(spec, params, data, ctx.engine)
            report = ctx.progress
            run = _context.RunContext(
                ctx.rng,
                ctx.engine,
                workers=params.get("workers"),
                progress=lambda stage, done, total: report(f"{stage} level", done, total),
            )
            result = _topdown.run_topdown(records, _design.design_from_spec(spec, params), run)
            return _outputs.release_of(spec, params, data, result, records.declared_geography)

    def release_columns(self, spec, params):
        """The measurements `likelihood` reads: one row per (level, geocode, query, cell), and each
        row's variance the one its (level, query) gets from the allocation (or a bypass class's);
        the rows themselves declared from the spec (release/measured.py), so a deleted one is refused."""

        alloc = self._allocation(spec, params)
        allowed = {}
        for q in alloc.queries:
            allowed.setdefault((q.level, q.name), set()).add(discrete_gaussian_variance(q.sigma2))
        spine = _spine(spec, params)
        if "bypass" in spine:
            for row in bypass_rows(alloc, _levels(spec), spine["bypass"], {})["classes"]:
                allowed.setdefault((row["level"], row["query"]), set()).add(row["noise_variance"])

        def implied(frame):
            return {"variance": _likelihood.variances_agree(frame, allowed)}

        def rows():
            return _measured.declared_rows(
                spec,
                _design.design_from_spec(spec, params),
                params["table"],
                alloc,
                _schema(spec, params),
                gq_split="gq_blockgroups" in spine,
            )

        return {
            "measurements": ReleaseColumns(
                ("level", "geocode", "query", "cell", "value", "variance"),
                key=("level", "geocode", "query", "cell"),
                numbers=("cell", "value", "variance"),
                implied=implied,
                declared_rows=rows,
            )
        }

    def likelihood(self, spec, params, outputs):
        return _likelihood.measurement_likelihoods(spec, params, outputs)

    def utility(self, spec, params, data, releases):
        runs = [r.internal["errors"] for r in releases]
        table = pd.concat([pd.DataFrame(r) for r in runs])
        summary = (
            table.groupby(["level", "query"], sort=False)["mean_absolute_error"].agg(["mean", "std"]).reset_index()
        )
        return {
            "runs": len(releases),
            "error_by_level_and_query": [
                {
                    "level": row.level,
                    "query": row.query,
                    "mean_absolute_error": float(row["mean"]),
                    "sd_over_runs": float(row["std"]) if len(releases) > 1 else None,
                }
                for _, row in summary.iterrows()
            ],
        }

    def neighbours(self, spec, params):
        """Miniature neighbours and batched noisy measurements for `dpspec verify`."""
        return _neighbours.topdown_pairs(self, spec, params, _variables, ROOT, recodes=_schema(spec, params).recodes)
