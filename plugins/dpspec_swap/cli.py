"""`dpspec swap ...`: the budget calculator and the what-if table of stratifications.

JSON output (stable; JSON Schemas in schemas/, each format versioned as the core's are):
  swap epsilon --json  -> [{"format_version", "b": int, "rate": float, "epsilon": float | "inf",
                            "minimum_epsilon": float, "minimum_rate": float | null}, ...]
  swap epsilon --epsilon E --json
                       -> {"format_version", "b": int, "epsilon": float, "rates": [float, float],
                           "minimum_epsilon": float, "minimum_rate": float | null,
                           "rows": [the rows above for --rate, if given]}
  swap whatif --json   -> {"format_version", "spec", "table", "swap", "hold", "rates": [float],
                           "rows": [{"match": [str], "b": int, "largest_stratum": {col: value} | null,
                                     "strata_of_two_or_more": int, "is_spec": bool,
                                     "from_invariants": bool, "keeps_nesting": bool,
                                     "epsilon": [{"rate": float, "epsilon": float | "inf"}]}]}
Infinite budgets are the string "inf" (JSON has no infinity).
"""

from __future__ import annotations

import json

import click

from dpspec.api import echo, json_number, check, LazyModule
from dpspec_swap.theorem import minimum_epsilon, rates_for_epsilon
from dpspec_swap.roles import roles, swap_table
import dpspec

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
whatif = LazyModule("dpspec_swap.whatif", "whatif", globals())  # pandas-heavy: not for `dpspec --help`

FORMAT_VERSION = "1.0"  # of both outputs: schemas/epsilon.schema.json, schemas/whatif.schema.json
RATES_HELP = "swap rates, comma-separated: 0.05, 5% or 1/20 (exact: 0.05 means one in twenty)"


def _rates(ctx, param, value):
    if value is None:
        return None
    try:
        return whatif.parse_rates(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _json(value) -> str:
    def plain(v):
        if isinstance(v, float):
            return json_number(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(value), indent=2)


def _rate_text(rate: float) -> str:
    return f"{rate:g}"


@click.group("swap")
def swap_group():
    """Permutation swapping: budgets by Theorem II.1 and what-if tables of match keys."""


@swap_group.command("epsilon")
@click.option(
    "--b", "b", type=click.IntRange(0), required=True, help="size of the largest stratum holding two different records"
)
@click.option("--rate", "rates", callback=_rates, default=None, help=RATES_HELP)
@click.option(
    "--epsilon",
    "target",
    type=float,
    default=None,
    help="the two rates whose budget is exactly this epsilon (it must be at least the minimum)",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="a list of {b, rate, epsilon, minimum_epsilon, minimum_rate}; with --epsilon an object with both rates",
)
def epsilon_cmd(b, rates, target, as_json):
    """The PSA's pure-DP budget for largest stratum B at each swap RATE, its minimum over all
    rates and the rate attaining it, and (--epsilon E) the two rates that give E."""
    if rates is None and target is None:
        raise click.UsageError("give --rate, --epsilon or both")
    least, at = minimum_epsilon(b)
    at = float(at) if at is not None else None
    minimum = {"minimum_epsilon": least, "minimum_rate": at}
    rows = [{**row, **minimum} for row in whatif.epsilon_rows(b, rates or [])]
    pair = [float(r) for r in rates_for_epsilon(b, target)] if target is not None else None
    if as_json:
        rows = [{"format_version": FORMAT_VERSION, **row} for row in rows]
        echo(
            _json(
                {
                    "format_version": FORMAT_VERSION,
                    "b": b,
                    "epsilon": target,
                    "rates": list(pair),
                    **minimum,
                    "rows": rows,
                }
                if pair
                else rows
            )
        )
        return
    echo(f"b = {b:,}")
    if at is None:
        echo("b = 0: nothing can move, every rate gives epsilon = 0")
    else:
        echo(f"smallest epsilon over all rates: ln(b+1)/2 = {least:.4f}, at rate {at:.6g} (no rate gives less)")
    if pair:
        echo(f"epsilon {target:g} is given by two rates: {pair[0]:.6g} and {pair[1]:.6g}")
    if rows:
        echo(f"{'rate':>8}  epsilon")
    for row in rows:
        echo(f"{_rate_text(row['rate']):>8}  {whatif.format_epsilon(row['epsilon'], 4)}")


@swap_group.command("whatif")
@click.argument("spec_file", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--rates", callback=_rates, default=None, help=RATES_HELP + " [default: 1%,2%,5%,10%,50%]")
@click.option("--key", "keys", multiple=True, metavar="COL[,COL...]", help="an extra match key to compare (repeatable)")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="an object with the spec, table, match keys and rates, and "
    "one row per key and rate (schemas/whatif.schema.json)",
)
def whatif_cmd(spec_file, rates, keys, as_json):
    """b, its stratum and epsilon under alternative match keys for a swap SPEC.

    Reads the confidential data: the table is for the custodian. Keys marked as published by
    the invariants disclose nothing the release does not; the others would.
    """
    spec = dpspec.api.parse(dpspec.api.read_source(spec_file), spec_file)
    checked = check(spec)
    if checked.mechanism is None or checked.mechanism.name != "swap":
        raise click.UsageError(f"{spec_file} does not use the swap mechanism")
    params = checked.params
    table = swap_table(spec, params)
    match, swap, hold = roles(spec, params)
    extra = []
    for text in keys:
        key = tuple(c.strip() for c in text.split(",") if c.strip())
        problem = whatif.validate_key(table, swap, key)
        if problem:
            raise click.BadParameter(problem, param_hint="--key")
        extra.append(key)
    source = next((d for d in spec.data if d.table == table.name), None)
    if source is None:
        raise click.UsageError(f"{spec_file} has no data for table '{table.name}'")
    frame = dpspec.api.load_table(spec, source)
    rates = rates or list(whatif.DEFAULT_RATES)
    rows = whatif.with_epsilons(whatif.stratifications(spec, params, frame, extra), rates)
    if as_json:
        echo(
            _json(
                {
                    "format_version": FORMAT_VERSION,
                    "spec": spec.title,
                    "table": table.name,
                    "swap": swap,
                    "hold": hold,
                    "rates": [float(r) for r in rates],
                    "rows": rows,
                }
            )
        )
        return
    echo(
        f"{spec.title or spec_file}: swapping {', '.join(swap)} of {table.name}; holding {', '.join(hold) or '(nothing)'}"
    )
    echo(whatif_text(rows, rates))


def whatif_text(rows: list[dict], rates) -> str:
    """A fixed-width table; marks: * the spec's key, ! not published by the invariants,
    ~ does not hold the swapped columns' parents fixed."""
    head = ["match key", "b", "largest stratum", *[f"eps@{float(r):g}" for r in rates]]
    body = []
    for row in rows:
        mark = (
            ("*" if row["is_spec"] else "")
            + ("" if row["from_invariants"] else "!")
            + ("" if row["keeps_nesting"] else "~")
        )
        key = " x ".join(row["match"]) or "(none)"
        where = ", ".join(f"{k}={v}" for k, v in (row["largest_stratum"] or {}).items()) or "-"
        eps = [whatif.format_epsilon(e["epsilon"]) for e in row["epsilon"]]
        body.append([f"{key} {mark}".rstrip(), f"{row['b']:,}", where, *eps])
    widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i in (0, 2) else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in [head, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(
        "* the spec's key   ! b not published by the declared invariants   "
        "~ key does not hold the swapped columns' parent geography fixed"
    )
    return "\n".join(lines)
