"""The verdict: one sentence a non-expert reads about how strong a release's protection is for its unit.

The bounds a spec declares are the spec's own promises: "all hold" says the mechanism keeps
them, not that they protect anyone. The verdict reads the achieved budget through the plain-words
table (how far an attacker's belief about one unit can move from a prior of 1%, 10% and 50%) and
places it on a scale whose thresholds are stated here and in docs/guides/reading-the-report.md,
next to the warnings OpenDP gives and the published 2020 Census figures. The scale is the
reading epsilon (the budget's epsilon, or for zCDP and GDP its epsilon at the reading delta):

* strong: epsilon <= 1: from 1% a belief reaches at most 2.7%, from 50% at most 73%;
* moderate: 1 < epsilon <= 5: from 1% at most 60% (5 is where OpenDP starts warning);
* weak: epsilon > 5, or delta > 1e-6 (OpenDP's delta warning): from 1%, more than 60%;
* none: no finite budget, or a critical finding that voids the noise (a known seed).
"""

from __future__ import annotations

import math

STRONG_EPSILON = 1.0
WEAK_EPSILON = 5.0  # OpenDP warns above epsilon = 5 (and above rho = 0.5, delta = 1e-6)
WEAK_DELTA = 1e-6
VOIDING_RULES = ("known-seed", "infinite-budget", "undeclared-invariants", "empirical-verification")

HEADLINES = {
    "strong": "Strong protection",
    "moderate": "Moderate protection",
    "weak": "Weak protection",
    "none": "No protection",
    "unknown": "Protection not established",
}
THRESHOLDS = {
    "strong": f"reading epsilon at most {STRONG_EPSILON:g}",
    "moderate": f"reading epsilon above {STRONG_EPSILON:g} and at most {WEAK_EPSILON:g}",
    "weak": f"reading epsilon above {WEAK_EPSILON:g} (OpenDP's warning threshold), or delta above 1e-6",
    "none": "no finite budget, or a critical finding that voids the noise",
}


def percent(p) -> str:
    """A probability as a percentage; near-certain values are not rounded up to a false 100%."""
    p = float(p)
    if p > 0.9999:
        return "over 99.99%"
    return f"{100 * p:.4g}%"


def _level(epsilon: float, delta: float) -> str:
    if not math.isfinite(epsilon):
        return "none"
    if epsilon > WEAK_EPSILON or delta > WEAK_DELTA:
        return "weak"
    return "strong" if epsilon <= STRONG_EPSILON else "moderate"


def _beliefs(row: dict) -> str:
    """ "from 1% to 2.9%, from 10% to 25% and from 50% to 75%"; priors reaching the same figure share it."""
    groups: dict[str, list[str]] = {}
    for q in row["posteriors"]:
        groups.setdefault(percent(q["posterior"]), []).append(percent(q["prior"]))
    moves = [f"from {_words(priors, 'or')} to {after}" for after, priors in groups.items()]
    return _words(moves, "and")


def _words(items: list[str], last: str) -> str:
    return ", ".join(items[:-1]) + (f" {last} " if len(items) > 1 else "") + items[-1]


def verdict(plain_words: dict, findings: list) -> dict:
    """The verdict's model from the plain-words model and the audit's findings (dicts or Findings)."""
    voiding = [f for f in findings if _get(f, "severity") == "critical" and _get(f, "rule") in VOIDING_RULES]
    rows = plain_words.get("rows") or []
    out = {
        "level": "unknown",
        "headline": HEADLINES["unknown"],
        "sentence": "",
        "who": None,
        "epsilon": None,
        "delta": None,
        "posteriors": [],
        "reasons": [],
        "thresholds": dict(THRESHOLDS),
    }
    if rows:
        row = rows[0]  # the spec's own unit; coarser entities (group privacy) follow in the table
        epsilon, delta = float(row["epsilon"]), float(row.get("delta") or 0.0)
        level = _level(epsilon, delta)
        out.update(
            who=row["who"],
            epsilon=epsilon if math.isfinite(epsilon) else None,
            delta=delta,
            posteriors=[dict(q) for q in row["posteriors"]],
        )
        if delta > WEAK_DELTA:
            out["reasons"].append(
                f"delta = {delta:g} is above 1e-6: with that probability the guarantee may fail outright"
            )
    else:
        level = "unknown"
    if voiding:
        level = "none"
        out["reasons"] += [f"the audit's critical finding '{_get(f, 'rule')}'" for f in voiding]
    out["level"], out["headline"] = level, HEADLINES[level]
    out["sentence"] = _sentence(level, out, rows, plain_words)
    out["lead"], _, out["rest"] = out["sentence"].partition(": ")  # the bold start and the rest, for the page
    return out


def _sentence(level: str, out: dict, rows: list, plain_words: dict) -> str:
    if level == "unknown":
        why = plain_words.get("problem") or "no budget is known"
        return f"{HEADLINES['unknown']}: the report cannot say how well anyone is protected ({why})."
    who = out["who"]
    if level == "none":
        reasons = "; ".join(out["reasons"]) or "the budget is infinite"
        if rows and math.isfinite(float(rows[0]["epsilon"])) and out["reasons"]:
            return f"No protection for {who}: the noise cannot be relied on ({reasons}), whatever the budget says."
        return f"No protection for {who}: an attacker's belief about {who} can become certainty ({reasons})."
    figure = f"epsilon = {float(out['epsilon']):.4g}" + (f", delta = {out['delta']:g}" if out["delta"] else "")
    reasons = "".join(f"; {r}" for r in out["reasons"])
    return (
        f"{HEADLINES[level]} for {who}: once the release is out, what an attacker believes about {who} can "
        f"rise {_beliefs(rows[0])} ({figure}){reasons}."
    )


def _get(finding, key: str):
    return finding.get(key) if isinstance(finding, dict) else getattr(finding, key, None)
