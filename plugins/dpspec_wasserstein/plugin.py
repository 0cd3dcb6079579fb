"""The Wasserstein exponential mechanism over count vectors (seed 2, Theorem 9 and Section 4.2) and
its post-processing alternative, as dpspec mechanisms.

Both release, for one period (a month), the counts of a unit table's rows by a cell column (the
counties), and optionally the counts of those rows with a binary outcome (deaths among cases).
Z is the spec's public block: the period's total (`used as total`) and the previous period's
counts by cell (`used as base`). The guarantee is epsilon-Z-Pufferfish over the spec's
`pufferfish` class; the sensitivity is the class's Wasserstein sensitivity, computed by
`dpspec.budget.pufferfish`, unless the spec states one (then the budget is scaled honestly).
"""

from __future__ import annotations

from fractions import Fraction

import dpspec
from dpspec.api import (
    BudgetBreakdown,
    BudgetStatement,
    Diagnostic,
    Mechanism,
    MechanismError,
    NativeFlavor,
    OutputKeys,
    ParamSpec,
    ParameterSchema,
    Power,
    PublicCondition,
    PureDP,
    Release,
    SpecError,
    declared_values,
    hookimpl,
    ir,
    pufferfish,
    located,
    record_measurement,
    sampler_limit_problem,
    NeighbourPair,
    LazyModule,
)
from dpspec.api import ReleaseColumns, discrete_laplace

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())
pd = LazyModule("pandas", "pd", globals())

# imported on first use: at import they would load numpy with this module
_samplers = LazyModule("dpspec_wasserstein.samplers", "_samplers", globals())
_likelihood = LazyModule("dpspec_wasserstein.likelihood", "_likelihood", globals())
_power = LazyModule("dpspec_wasserstein.power", "_power", globals())
_postprocess = LazyModule("dpspec_wasserstein.postprocess", "_postprocess", globals())

# imported on first use: `dpspec --help` loads this module, not them
_kng = LazyModule("dpspec_wasserstein.kng", "_kng", globals())

BASES = ("naive", "congenial", "prior")
# why the counts' and outcome counts' budgets add up: not Lemma 6 (the outcome's draw reads the
# released counts), but adaptive composition over one coupling of both (docs/guides/z-pufferfish.md)
COUNTS_AND_OUTCOME = (
    "counts and outcome counts add up by adaptive composition, not by Lemma 6: the outcome's draw reads the "
    "released counts (its base measure is 0..count), so the two are not conditionally independent given the data; "
    "given any released counts, the outcome's draw is an exponential mechanism of the outcome counts at its rate, "
    "and one coupling moves each differing unit with its outcome, so the two losses add pair by pair"
)


def _public_use(spec, use: str):
    return next((p for p in spec.public if p.use == use), None)


class _CountRelease(Mechanism):
    """What the two methods share: parameters, data preparation, the Z-Pufferfish statement."""

    run_context = True  # run(spec, params, data, ctx): one RunContext (API 1.6)
    common = (
        ParamSpec(
            "table", "table", "the unit table (one row per protected unit, e.g. per reported case)", required=True
        ),
        ParamSpec("cell", "column", "the column whose counts are released (e.g. county)", required=True),
        ParamSpec("period", "column", "the period column (e.g. month); one period is released, earlier ones are Z"),
        ParamSpec("release_period", "string", "which period to release (default: the last)"),
        ParamSpec(
            "outcome",
            "column",
            "a bool column: also release the counts of rows where it is true (deaths), at most the cell's count",
        ),
        ParamSpec("epsilon", "number", "the Z-Pufferfish budget of the whole release", required=True, low=Fraction(0)),
        ParamSpec(
            "outcome_share",
            "number",
            "the share of epsilon spent on the outcome counts",
            default=Fraction(1, 2),
            low=Fraction(0),
            high=Fraction(1),
        ),
        ParamSpec("public_total", "int", "the period total as published (Z); checked against the data"),
    )

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], spec.unit.relation if spec.unit else "symdiff", "pure")

    def _check_common(self, spec, params):
        problems = []
        table = spec.domain.table(params["table"])
        for name in ("cell", "period", "outcome"):
            if params.get(name) is not None and table.column(params[name]) is None:
                problems.append(Diagnostic(f"table '{table.name}' has no column '{params[name]}'", path=(name,)))
        out = params.get("outcome")
        if out is not None and table.column(out) is not None and table.column(out).type.kind != "bool":
            problems.append(Diagnostic(f"outcome column '{out}' must be bool", path=("outcome",)))
        if params["epsilon"] <= 0:
            problems.append(Diagnostic("epsilon must be positive", path=("epsilon",)))
        return problems

    def _total_in_z(self, spec, params) -> bool:
        return _public_use(spec, "total") is not None

    def _epsilons(self, params):
        eps = Fraction(params["epsilon"])
        if params.get("outcome") is None:
            return eps, None
        share = Fraction(params["outcome_share"])
        return eps * (1 - share), eps * share

    def sensitivities(self, spec, params) -> dict:
        """The Wasserstein sensitivity of each released statistic's loss over the class, beside its DP one."""

        relation = spec.unit.relation if spec.unit else "symdiff"
        total_in_z = self._total_in_z(spec, params)
        # a changed unit (hamming) is one moved between cells, as a present/absent one is given the total
        counts_w = pufferfish.cell_counts_sensitivity(spec.pufferfish, total_in_z or relation == "hamming")
        scale = 2 if relation == "hamming" else 1
        out = {
            "counts": {
                "wasserstein": counts_w,
                "dp": pufferfish.dp_cell_counts_sensitivity(relation),
                "loss": "||y - counts||_1",
                "given": "the period total (Z)" if total_in_z else "nothing",
            }
        }
        c = spec.pufferfish
        if c is not None and c.kind == "dependence" and (total_in_z or relation == "hamming"):
            exact = pufferfish.dependence_given_total(c.option("p0"), c.option("p1"), int(c.option("n")))
            out["counts"]["certified"], out["counts"]["derivation"] = exact.certified, exact.reason
        if params.get("outcome") is not None:
            if total_in_z:
                # the coupling that moves the unit's count given the total moves the units that
                # differ between the two secrets' worlds, and each carries its own outcome: the
                # outcome counts' L1 loss moves by at most as much (as much when every unit has it)
                out["outcome"] = {
                    "wasserstein": counts_w,
                    "dp": pufferfish.dp_cell_counts_sensitivity(relation),
                    "loss": "||y - outcome counts||_1",
                    "given": "the period total (Z): the units differing between the pair's worlds carry their outcomes",
                }
                for key in ("certified", "derivation"):  # the counts' figure, so the counts' standing
                    if key in out["counts"]:
                        out["outcome"][key] = out["counts"][key]
            else:
                out["outcome"] = {
                    "wasserstein": pufferfish.cell_counts_sensitivity(spec.pufferfish, False) * scale,
                    "dp": pufferfish.dp_cell_counts_sensitivity(relation),
                    "loss": "||y - outcome counts||_1",
                    "given": "no outcome total in Z",
                }
        out["class"] = spec.pufferfish.kind if spec.pufferfish else "independent"
        out["class_in_words"] = pufferfish.plain_words(spec.pufferfish)
        return out

    def _conditions(self, spec):
        return tuple(
            PublicCondition(f"{p.query.describe()}" + (f" (used as {p.use})" if p.use else ""), p.source)
            for p in spec.public
        )

    def budget(self, spec, params, facts):

        sens = self.sensitivities(spec, params)
        eps_c, eps_o = self._epsilons(params)
        used = self._used_sensitivity(spec, params, sens)
        total = eps_c * Fraction(sens["counts"]["wasserstein"]) / Fraction(used["counts"])
        notes = [
            (
                "epsilon-Z-Pufferfish: the loss's Wasserstein sensitivity over the class is "
                if spec.pufferfish is not None
                else "differential privacy (no pufferfish block): the loss's sensitivity is "
            )
            + ("at most " if sens["counts"].get("certified") is False else "")
            + f"{ir.format_number(Fraction(sens['counts']['wasserstein']))} (DP sensitivity "
            f"{ir.format_number(sens['counts']['dp'])}, Lemma 12"
            + (
                "; a proven upper bound, not the exact supremum: 'certified' false in --json"
                if sens["counts"].get("certified") is False
                else ""
            )
            + ")"
        ]
        if eps_o is not None:
            total += eps_o * Fraction(sens["outcome"]["wasserstein"]) / Fraction(used["outcome"])
            notes.append(COUNTS_AND_OUTCOME)
        if used["counts"] < sens["counts"]["wasserstein"]:
            notes.append(
                f"the mechanism uses sensitivity {ir.format_number(used['counts'])}, below the class's "
                f"{ir.format_number(Fraction(sens['counts']['wasserstein']))}: its budget grows in proportion"
            )
        statement = BudgetStatement(
            PureDP(total),
            worst=PureDP(total),
            notes=tuple(notes),  # exact
            public=self._conditions(spec),
        )
        return statement

    def _used_sensitivity(self, spec, params, sens):
        return {k: Fraction(sens[k]["wasserstein"]) for k in ("counts", "outcome") if k in sens}

    def budget_breakdown(self, spec, params):

        sens = self.sensitivities(spec, params)
        jsonable = {
            k: (
                {kk: (float(vv) if isinstance(vv, Fraction) else vv) for kk, vv in v.items()}
                if isinstance(v, dict)
                else v
            )
            for k, v in sens.items()
        }
        return BudgetBreakdown(
            {
                "pufferfish": {
                    "guarantee": "epsilon-Z-Pufferfish (seed 2, Definition 3)",
                    "Z": [
                        {"statistic": p.query.describe(), "released": p.source, "used_as": p.use} for p in spec.public
                    ],
                    "secrets": "each unit's presence and record (the spec's unit)",
                    "sensitivity": jsonable,
                    "composition": COUNTS_AND_OUTCOME
                    if params.get("outcome") is not None
                    else pufferfish.CONDITIONAL_INDEPENDENCE,
                }
            }
        )

    def neighbours(self, spec, params):
        """Two miniature datasets the guarantee compares, on three cells.

        Without a total in Z: one unit present in cell a against absent, the DP pair (with the naive
        base the truncation at 0 makes the normalizers differ, so the loss is largest there). With
        the total in Z: given the total, present-against-absent couples to a unit moved from cell a
        to cell b, the pair the class's sensitivity of 2 is computed for. With an outcome the moved
        person has it, so the outcome counts are compared too. Shared by both methods."""
        table = spec.domain.table(params["table"])
        cell_col = table.column(params["cell"])
        names = ["a", "b", "c"]

        outcome = params.get("outcome")

        def rows(cells):  # the first person (the one the pair moves) has the outcome, the others not
            out = [
                {
                    **dpspec.api.miniature_record(table, {}),
                    cell_col.name: cell,
                    **({outcome: i == 0} if outcome else {}),
                }
                for i, cell in enumerate(cells)
            ]
            return {table.name: dpspec.api.typed_frame(table, out)}

        mini = {**params, "period": None, "release_period": None, "public_total": None}
        if not self._total_in_z(spec, params):
            left, right, label = rows(["a", "b"]), rows(["b"]), "one person present in cell a, or absent"
        else:
            left, right, label = (
                rows(["a", "b"]),
                rows(["b", "b"]),
                "given the total, one person in cell a or in cell b",
            )

        def batch(data, n, rng):
            frame = data[table.name]
            cell = frame[cell_col.name].astype(str)
            counts = np.array([(cell == c).sum() for c in names], dtype=np.int64)
            died = (
                None
                if outcome is None
                else np.array([((cell == c) & frame[outcome].astype(bool)).sum() for c in names], dtype=np.int64)
            )
            y, z = self._neighbour_draws(spec, mini, counts, died, int(counts.sum()), rng, n)
            return y if z is None else np.hstack([y, z])  # both statistics: the claim is the whole budget

        # a DP spec (no pufferfish block) compares datasets at their d_X: moving one unit between cells
        # is a removal and an addition under symdiff, so its claim is the group budget (Lemma 8 holds
        # the DP budget among datasets that agree with Z; none at symdiff distance 1 does here)
        moved = (
            self._total_in_z(spec, params)
            and spec.pufferfish is None
            and (spec.unit is None or spec.unit.relation == "symdiff")
        )
        return [NeighbourPair(label, left, right, params=mini, batch=batch, distance=2 if moved else 1)]

    # ---- declared keys ----
    def periods(self, spec, params) -> list[str]:
        """The declared periods, in declared order (the previous period is the one declared before)."""
        return [str(v) for v in declared_values(spec, params["table"], params["period"]) or ()]

    def release_period(self, spec, params) -> str | None:
        """The released period: the parameter, else the last declared one (never the data's last)."""
        if not params.get("period"):
            return None
        periods = self.periods(spec, params)
        label = params.get("release_period") or (periods[-1] if periods else None)
        if periods and label not in periods:
            raise SpecError(
                located(
                    spec,
                    [
                        Diagnostic(
                            f"release_period '{label}' is not a declared value of "
                            f"'{params['period']}' ({', '.join(periods)})",
                            path=("release_period",),
                        )
                    ],
                ),
                spec.path,
                spec.text,
            )
        return label

    def release_columns(self, spec, params):
        """The counts `likelihood` reads: one row per cell (of the one release period), a count each."""

        counts = (params["table"], *([params["outcome"]] if params.get("outcome") else []))
        return {"counts": ReleaseColumns((params["cell"], params["table"]), key=(params["cell"],), numbers=counts)}

    def output_keys(self, spec, params):
        """One row per declared cell, for the declared release period; the total's one row."""
        table, period = params["table"], params.get("period")
        fixed = {period: self.release_period(spec, params)} if period and self.periods(spec, params) else {}
        out = {
            "counts": OutputKeys(table, (params["cell"],), fixed),
            "total": OutputKeys(table, (), {k: v for k, v in fixed.items() if k in self._total_columns(spec)}),
        }
        if "base" in self.outputs:
            has_previous = bool(fixed) and self.periods(spec, params).index(fixed[period]) > 0
            out["base"] = OutputKeys(table, (params["cell"],) if has_previous else ())
        return out

    def _total_columns(self, spec) -> tuple:
        z = _public_use(spec, "total")
        return z.query.columns if z is not None else ()

    def laplace_scales(self, spec, params) -> dict:
        """The discrete Laplace scale each released statistic's exact sampler draws with, known from the
        parameters alone (a statistic whose scale depends on the data is left out)."""
        return {}

    def _scale_problems(self, spec, params) -> list:
        """A budget whose noise the exact samplers could not draw, refused at `check` at the epsilon line."""
        try:
            scales = self.laplace_scales(spec, params)
        except (
            ZeroDivisionError,
            SpecError,
            MechanismError,
            ValueError,
            OverflowError,
            TypeError,
        ):  # a zero share, an infinite or unreadable class: other checks say why
            return []
        for what, scale in sorted(scales.items(), key=lambda kv: kv[1], reverse=True):  # the widest bounds the budget
            problem = sampler_limit_problem("discrete_laplace", scale, ("epsilon", params["epsilon"]))
            if problem is not None:
                return [Diagnostic(f"{self.name}: the {what}' noise cannot be drawn: {problem}", path=("epsilon",))]
        return []

    def check(self, spec, params):
        problems = self._check_common(spec, params)
        if not problems:
            problems = self._scale_problems(spec, params)
        col = spec.domain.table(params["table"]).column(params["period"]) if params.get("period") else None
        if problems or col is None:
            return problems
        if col.type.kind == "category" and not col.type.keys_from:
            at = (col.loc.line, col.loc.column) if col.loc else (None, None)
            return [
                Diagnostic(
                    f"the period column '{col.name}' has no declared values: which period is released, and "
                    "which one came before it, must not be read from the data",
                    *at,
                    hint=f'declare the periods in order: \'{col.name} : {{"2020-03", "2020-04"}}\'',
                )
            ]
        try:
            self.release_period(spec, params)
        except SpecError as e:
            problems.extend(e.diagnostics)
        return problems

    # ---- data ----
    def prepare(self, spec, params, data):
        """(cells, counts, outcome counts or None, total, previous counts or None, period label)."""
        frame = data[params["table"]]
        cell = frame[params["cell"]].astype(str)
        cells = np.array(
            [str(v) for v in declared_values(spec, params["table"], params["cell"])]
        )  # declared, never found
        period_label, previous = None, None
        mask = np.ones(len(frame), dtype=bool)
        if params.get("period"):
            periods = self.periods(spec, params)
            period_label = self.release_period(spec, params)
            per = frame[params["period"]].astype(str).to_numpy()
            mask = per == period_label
            i = periods.index(period_label)
            if i > 0:
                prev_cells = cell[per == periods[i - 1]]
                previous = pd.Categorical(prev_cells, categories=cells).value_counts().to_numpy().astype(np.int64)
        cur = pd.Categorical(cell[mask], categories=cells)
        counts = cur.value_counts().to_numpy().astype(np.int64)
        outcome = None
        if params.get("outcome"):
            died = frame[params["outcome"]].to_numpy(dtype=bool)[mask]
            outcome = pd.Categorical(cell[mask][died], categories=cells).value_counts().to_numpy().astype(np.int64)
        total = int(counts.sum())
        if params.get("public_total") is not None and int(params["public_total"]) != total:
            raise SpecError(
                located(
                    spec,
                    [
                        Diagnostic(
                            f"the public total {params['public_total']:,} disagrees with the data: {total:,} rows in period "
                            f"{period_label or '(all)'}; Z must be exact statistics of the same data",
                            path=("public_total",),
                        )
                    ],
                ),
                spec.path,
                spec.text,
            )
        return cells, counts, outcome, total, previous, period_label

    def _total_frame(self, spec, params, period, total):
        """The period total the release conditions on (public: Z), as the public count query's cells."""
        z = _public_use(spec, "total")
        columns = z.query.columns if z is not None else ()
        row = {c: period for c in columns if c == params.get("period")}
        return pd.DataFrame([{**row, "count": total}])

    def _frame(self, params, cells, period, counts, outcome):
        out = {params["cell"]: cells, params["table"]: counts}
        if period is not None:
            out = {params["period"]: [period] * len(cells), **out}
        if outcome is not None:
            out[params["outcome"]] = outcome
        return pd.DataFrame(out)


class WassersteinExponential(_CountRelease):
    name = "wasserstein_exponential"
    version = "1.0.0"
    description = (
        "Seed 2's Wasserstein exponential mechanism over count vectors, loss ||y - counts||_1, with a base "
        "measure from public information (naive, deterministic congenial, prior congenial); exact draws."
    )
    proof = "Theorem 9 of the second seed paper (Z-Pufferfish through the Wasserstein mechanism, with the exact infinity-Wasserstein sensitivity of dpspec.budget.pufferfish) and the exponential mechanism's analysis (McSherry & Talwar 2007)"
    sampling = "exact: draws from the base measure's integer law accepted by exact Bernoulli(exp(-x)) trials (dpspec.api.bernoulli_exp), no floating point"
    parameters = ParameterSchema(
        _CountRelease.common
        + (
            ParamSpec(
                "base",
                "choice",
                "the base measure: naive (nonnegative integers), congenial (vectors summing to the "
                "public total), prior (Dirichlet-multinomial from the previous period's counts)",
                default="naive",
                choices=BASES,
            ),
            ParamSpec(
                "prior_offset",
                "int",
                "the prior base's concentrations: previous counts plus this (0 is the paper's "
                "literal choice; a cell with no previous count then has no mass)",
                default=1,
                low=Fraction(0),
            ),
            ParamSpec(
                "sensitivity",
                "number",
                "the sensitivity the sampler uses (default: the class's Wasserstein sensitivity)",
                low=Fraction(0),
            ),
            ParamSpec(
                "max_proposals",
                "int",
                "refuse when an exact draw would need more proposed counts than this",
                default=10**8,
                low=Fraction(1),
            ),
        )
    )
    outputs = {
        "counts": "the released counts by cell (and outcome counts) for the period",
        "total": "the period total the release conditions on (Z, public)",
        "base": "the previous period's counts by cell the prior base measure is built from (Z, public; no rows if none)",
    }

    def check(self, spec, params):
        problems = super().check(spec, params)
        if params["base"] in ("congenial", "prior") and _public_use(spec, "total") is None:
            problems.append(
                Diagnostic(
                    f"base measure '{params['base']}' conditions on the period total, but the public "
                    "block declares none 'used as total'",
                    path=("base",),
                )
            )
        if params["base"] == "prior" and _public_use(spec, "base") is None:
            problems.append(
                Diagnostic(
                    "base measure 'prior' is built from the previous period's counts, but the public "
                    "block declares none 'used as base'",
                    path=("base",),
                )
            )
        if params.get("sensitivity") is not None and params["sensitivity"] <= 0:
            problems.append(Diagnostic("sensitivity must be positive", path=("sensitivity",)))
        return problems

    def _used_sensitivity(self, spec, params, sens):
        used = super()._used_sensitivity(spec, params, sens)
        if params.get("sensitivity") is not None:
            used = {k: Fraction(params["sensitivity"]) for k in used}
        return used

    def laplace_scales(self, spec, params) -> dict:
        """1/rate: the naive and congenial bases draw the counts by discrete Laplace proposals of scale at
        least that (the congenial tilt only lowers the rate; at a scale too large for any such tilt it
        uses the prior's integer tables, so the check stays conservative), the outcome always; the
        prior base draws the counts from its own integer law."""
        used = self._used_sensitivity(spec, params, self.sensitivities(spec, params))
        eps_c, eps_o = self._epsilons(params)  # 1 / rate = 2 Delta / epsilon (samplers.rate; numpy not loaded at check)
        out = {} if params["base"] == "prior" else {"counts": 2 * Fraction(used["counts"]) / eps_c}
        if eps_o is not None:
            out["outcome counts"] = 2 * Fraction(used["outcome"]) / eps_o
        return out

    def rates(self, spec, params):
        sens = self.sensitivities(spec, params)
        used = self._used_sensitivity(spec, params, sens)
        eps_c, eps_o = self._epsilons(params)
        return _samplers.rate(eps_c, used["counts"]), (
            None if eps_o is None else _samplers.rate(eps_o, used["outcome"])
        )

    def draw(self, spec, params, counts, outcome, total, previous, rng, draws: int = 1):
        """`draws` releases of (counts, outcome counts) and the samplers' measured acceptance."""
        r_c, r_o = self.rates(spec, params)
        base, limit = params["base"], int(params["max_proposals"])
        if base == "naive":
            y, info = _samplers.naive(counts, r_c, draws, rng)
        elif base == "congenial":
            y, info = _samplers.congenial(counts, total, r_c, draws, rng, limit)
        else:
            alpha = self.concentrations(params, previous, len(counts))  # no earlier period: a flat Dirichlet
            live = alpha > 0  # a cell without concentration has no mass: it stays at 0
            y = np.zeros((draws, len(counts)), dtype=np.int64)
            y[:, live], info = _samplers.prior(counts[live], alpha[live], total, r_c, draws, rng, limit)
        z = None
        if outcome is not None:
            # the outcome's base measure: counting measure on 0..released count (cases >= deaths)
            z = _samplers.truncated_laplace(np.broadcast_to(outcome, y.shape), 0, y, r_o, rng)
        return y, z, info

    def zero_mass(self, spec, params, cells, counts, previous):
        """A prior base that gives no mass to the confidential counts is refused: the mechanism could
        never release anything near them (and Theorem 9 needs the base to support them)."""
        if params["base"] != "prior" or previous is None:
            return
        dead = (previous + int(params.get("prior_offset", 1)) == 0) & (counts > 0)
        if dead.any():
            names = ", ".join(f"{c} ({n:,} now)" for c, n in zip(cells[dead][:5], counts[dead][:5]))
            raise SpecError(
                located(
                    spec,
                    [
                        Diagnostic(
                            f"the prior base measure puts no mass on the confidential counts: with prior_offset "
                            f"{params.get('prior_offset')}, cells with no count in the previous period get concentration 0, but "
                            f"{names} have counts now",
                            hint="use prior_offset 1 (the default)",
                            path=("prior_offset",),
                        )
                    ],
                ),
                spec.path,
                spec.text,
            )

    def run(self, spec, params, data, ctx):
        cells, counts, outcome, total, previous, period = self.prepare(spec, params, data)
        self.zero_mass(spec, params, cells, counts, previous)
        self.record(spec, params, counts, outcome, total, previous)
        y, z, info = self.draw(spec, params, counts, outcome, total, previous, ctx.rng)
        frame = self._frame(params, cells, period, y[0], None if z is None else z[0])
        # the previous period's counts (no period column: they are not the released period's)
        base = self._frame(params, cells, None, counts if previous is None else previous, None)
        base = base.iloc[:0] if previous is None else base  # no earlier period: no rows
        return Release(
            outputs={"counts": frame, "total": self._total_frame(spec, params, period, total), "base": base},
            facts={"total": total, "period": period, "sampler": info},
            internal={"counts": counts, "outcome": outcome},
        )

    def record(self, spec, params, counts, outcome, total, previous):
        """What `dpspec verify --replay` reads: the loss ||y - c||_1 moves by ||c - c'||_1, so the
        count vectors are the scores, at rate r per unit of loss; the total (Z) and the previous
        period's counts (the base, Z) are released exactly."""
        r_c, r_o = self.rates(spec, params)
        used = self._used_sensitivity(spec, params, self.sensitivities(spec, params))
        record_measurement("total", total, "none")
        if previous is not None:
            record_measurement("base", previous, "none")
        record_measurement("counts", counts, "exponential", r_c, sensitivity=used["counts"], norm="l1")
        if outcome is not None:
            record_measurement("outcome", outcome, "exponential", r_o, sensitivity=used["outcome"], norm="l1")

    def _neighbour_draws(self, spec, params, counts, outcome, total, rng, n):
        """n releases (counts, outcome counts or None) without a period, one row each, for `neighbours`."""
        y, z, _ = self.draw(spec, params, counts, outcome, total, None, rng, draws=n)
        return y, z

    def likelihood(self, spec, params, outputs):
        """Every base measure's release likelihood. The naive one is independent across cells given
        the counts: P(y | c) = exp(-r |y - c|) / Z_r(c), Z_r(c) = (1 - e^{-r(c+1)} + e^{-r}) / (1 - e^{-r}).
        The congenial ones normalize over all vectors summing to the total, a term that couples the
        cells (`CountLikelihood.joint`); the prior base's weights need the previous period's counts,
        which the release carries as `output base` (Z, public)."""
        r_c, r_o = self.rates(spec, params)
        alpha = None
        if params["base"] == "prior":
            base = outputs.get("base")
            if base is None:
                raise MechanismError(
                    "the prior base measure's likelihood needs the previous period's counts it was "
                    "built from: add 'output base' to the spec's release block (they are public, Z)"
                )
            frame = outputs["counts"]
            prev = dict(zip(base[params["cell"]].astype(str), base[params["table"]].to_numpy(dtype=np.int64)))
            previous = np.array([prev.get(c, 0) for c in frame[params["cell"]].astype(str)], dtype=np.int64)
            alpha = self.concentrations(params, previous if len(base) else None, len(frame))
        return _likelihood.naive_likelihoods(
            params, outputs, r_c, r_o, _public_use(spec, "total"), params["base"], alpha
        )

    def power(self, spec, params, outputs, cell, null, alternative, level):
        """Theorem 15 on one released cell: the power of the level test of its count on the release,
        and on the release post-processed with Z (clamped to the public total). The naive base only:
        a congenial base draws the cells jointly, so one cell's law depends on every other count, and
        "this cell's count is H0" is a composite hypothesis: the total fixes the other counts' sum,
        not the counts, and the test's size changes with how they share it."""
        if params["base"] != "naive":
            raise MechanismError(
                f"--power needs one cell's release law given its count alone; the '{params['base']}' "
                "base draws the cells jointly on the vectors meeting the total, so a cell's law depends "
                "on every other count (the naive base's does not): 'this cell's count is H0' fixes only the "
                "other counts' sum, so the test has no single size and no exact power to report"
            )
        if not self._total_in_z(spec, params) or "total" not in outputs or not len(outputs["total"]):
            raise MechanismError(
                "--power compares the release with its post-processing by Z, the public total: "
                "the spec's public block declares none 'used as total'"
            )
        total = int(outputs["total"]["count"].iloc[0])
        frame = outputs["counts"]
        names = frame[params["cell"]].astype(str).to_numpy()
        if cell not in set(names):
            shown = ", ".join(list(names[:5])) + (", ..." if len(names) > 5 else "")
            raise MechanismError(f"--power: no released cell '{cell}' in column '{params['cell']}' (cells: {shown})")
        y = int(frame[params["table"]].to_numpy(dtype=np.int64)[names == cell][0])
        r_c, _ = self.rates(spec, params)
        out = _power.cell_count_powers(int(null), int(alternative), total, float(r_c), float(level))
        phi_y, phi_f = out.pop("reject_release"), out.pop("reject_post_processed")
        f = min(y, total)
        return Power(
            **out,
            cell=cell,
            column=params["cell"],
            released=y,
            post_processed_value=f,
            reject_probability_release=float(phi_y[min(y, len(phi_y) - 1)]),
            reject_probability_post_processed=float(phi_f[f]),
            post_processing="min(Y, public total): no cell exceeds the total (Z)",
            note=(
                "the loss is |y - c|, whose likelihood ratio is constant beyond the total, so the clamp "
                "merges only values of equal evidence and Theorem 15's improvement is not strict here"
                if abs(out["power_release"] - out["power_post_processed"]) < 1e-9
                else "the clamp merges values whose evidence differs: the test on the release is strictly more powerful"
            ),
        )

    def concentrations(self, params, previous, n: int):
        """The prior base's Dirichlet concentrations: previous counts plus the offset (flat without them)."""
        alpha = (previous if previous is not None else np.zeros(n, dtype=np.int64)) + int(params.get("prior_offset", 1))
        return np.maximum(alpha, 1) if previous is None else alpha


class NoisyPostprocessed(_CountRelease):
    name = "noisy_postprocessed"
    version = "1.0.0"
    description = (
        "Seed 2's post-processing alternative: discrete Laplace counts made congenial (nonnegative, summing to "
        "the public total, outcome at most the count) by a deterministic two-stage post-processing."
    )
    proof = "Section 4 of the second seed paper: discrete Laplace counts (pure epsilon for adding or removing one event; Canonne, Kamath & Steinke 2020), then post-processing (the two-stage projection onto the public total)"
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Laplace rejection sampler (dpspec.api.discrete_laplace), no floating point"
    parameters = ParameterSchema(_CountRelease.common)
    outputs = {
        "counts": "the post-processed counts by cell (and outcome counts) for the period",
        "total": "the period total the release conditions on (Z, public)",
    }

    def sensitivities(self, spec, params):
        """Under a pufferfish block: the noise is added to the count vector before the post-processing,
        which reads only the noisy counts and Z, so a pair's privacy loss given Z is at most the
        noise's rate times the L1 distance the pair can move that vector given Z (the vector's
        W_inf over the class, the same as the exponential mechanism's loss sensitivity); the noise
        is calibrated to it, so `epsilon` is the Z-Pufferfish budget. Without one (a DP spec),
        Lemma 8: the DP geometric mechanism restricted by exact public counts keeps its budget."""
        out = super().sensitivities(spec, params)
        for k in ("counts", "outcome"):
            if k not in out:
                continue
            if spec.pufferfish is None:
                out[k]["wasserstein"] = out[k]["dp"]
                out[k]["given"] = "nothing (differential privacy, Lemma 8: the DP noise, then post-processing with Z)"
            else:
                out[k]["given"] += "; the noise is added to these counts before the post-processing with Z"
        return out

    def laplace_scales(self, spec, params) -> dict:
        scales = self.noise_scales(spec, params)
        return {"counts": scales["counts"], **({"outcome counts": scales["outcome"]} if "outcome" in scales else {})}

    def noise_scales(self, spec, params) -> dict:
        """The discrete Laplace scale of each released statistic's noise: its sensitivity over its epsilon."""
        used = self._used_sensitivity(spec, params, self.sensitivities(spec, params))
        eps_c, eps_o = self._epsilons(params)
        out = {"counts": used["counts"] / eps_c}
        if eps_o is not None:
            out["outcome"] = used["outcome"] / eps_o
        return out

    def draw(self, spec, params, counts, outcome, total, rng, draws: int = 1):

        scales = self.noise_scales(spec, params)
        used = self._used_sensitivity(spec, params, self.sensitivities(spec, params))
        record_measurement("total", total, "none")  # the post-processing makes the counts sum to it (Z)
        record_measurement(
            "counts", counts, "discrete_laplace", scales["counts"], sensitivity=used["counts"], norm="l1"
        )
        noisy_c = counts + discrete_laplace(scales["counts"], draws * len(counts), rng).reshape(draws, -1)
        noisy_o = None
        if outcome is not None:
            record_measurement(
                "outcome", outcome, "discrete_laplace", scales["outcome"], sensitivity=used["outcome"], norm="l1"
            )
            noisy_o = outcome + discrete_laplace(scales["outcome"], draws * len(counts), rng).reshape(draws, -1)
        cases, deaths, flags = _postprocess.two_stage(noisy_c, noisy_o, total)
        return cases, deaths, flags

    def check(self, spec, params):
        """The post-processing makes the counts sum to the period total, so the release publishes that
        total exactly: without it in Z (`used as total`), the exact total would leak unprotected and
        no epsilon would hold (`verify` finds the loss unbounded)."""
        problems = super().check(spec, params)
        if _public_use(spec, "total") is None:
            problems.append(
                Diagnostic(
                    "noisy_postprocessed makes its counts sum to the period total and so publishes "
                    "it exactly, but the public block declares no total 'used as total': the exact "
                    "total would leak with no budget covering it",
                    path=("cell",),
                    hint="declare the published total in the public block, e.g. "
                    "'count cases by month released \"...\" used as total'",
                )
            )
        return problems

    def _neighbour_draws(self, spec, params, counts, outcome, total, rng, n):
        """n post-processed releases (counts, outcome counts or None), one row each, for `neighbours`."""
        y, z, _ = self.draw(spec, params, counts, outcome, total, rng, draws=n)
        return y, z

    def run(self, spec, params, data, ctx):
        cells, counts, outcome, total, previous, period = self.prepare(spec, params, data)
        y, z, flags = self.draw(spec, params, counts, outcome, total, ctx.rng)
        frame = self._frame(params, cells, period, y[0], None if z is None else z[0])
        return Release(
            outputs={"counts": frame, "total": self._total_frame(spec, params, period, total)},
            facts={"total": total, "period": period},
            internal={"contractions": {k: int(v.sum()) for k, v in flags.items()}},
        )


@hookimpl
def dpspec_mechanisms():
    return [
        WassersteinExponential(),
        NoisyPostprocessed(),
        _kng.WassersteinKNG(),
        _kng.WassersteinKNGMean(),
        _kng.WassersteinKNGSlope(),
    ]
