"""Z-Pufferfish classes as a spec declares them (seed 2, Definition 3): the options each class
takes, why the checker refuses one, and what its guarantee assumes in plain words. The
sensitivities a class gives are computed in dpspec.budget.pufferfish."""

from __future__ import annotations

from dpspec import ir
from dpspec.language.diagnostics import unknown

CLASS_OPTIONS = {"independent": (), "dependence": ("p0", "p1", "n"), "arbitrary": ()}

NO_FREE_LUNCH = (
    "no finite guarantee exists for 'class arbitrary': when any dependence between one unit's secret "
    "and the rest of the data (Z included) is allowed, the other units may copy it, so the statistic's "
    "distributions given the two secrets of a pair can lie as far apart as the whole population and no "
    "amount of noise bounds the privacy loss (the 'no free lunch' of Kifer & Machanavajjhala; seed 2, "
    "remarks on Example 1)"
)
NO_FREE_LUNCH_HINT = (
    "declare a narrower class: 'class independent', or 'class dependence p0 A p1 B n N' (seed 2, Section 4.4)"
)

CONDITIONAL_INDEPENDENCE = (
    "sequential composition (seed 2, Lemma 6) adds the budgets only because the releases are conditionally "
    "independent given the data and Z: each mechanism draws from its own randomness and reads no other's output"
)


def class_problems(c: ir.Pufferfish) -> list[tuple[str, str | None]]:
    """(message, hint) for a class the checker must refuse."""
    if c.kind not in CLASS_OPTIONS:
        return [unknown("class of distributions", c.kind, CLASS_OPTIONS)]
    if c.kind == "arbitrary":
        return [(NO_FREE_LUNCH, NO_FREE_LUNCH_HINT)]
    problems = []
    allowed = CLASS_OPTIONS[c.kind]
    for name, _ in c.options:
        if name not in allowed:
            problems.append(
                (f"unknown option '{name}': class {c.kind} takes " + (", ".join(allowed) or "no options"), None)
            )
    if c.kind == "dependence":
        for name in allowed:
            if c.option(name) is None:
                problems.append((f"class dependence needs '{name}' (class dependence p0 0.1 p1 0.9 n 1000)", None))
        p0, p1, n = c.option("p0"), c.option("p1"), c.option("n")
        for name, value in (("p0", p0), ("p1", p1)):
            if value is not None and not 0 <= value <= 1:
                problems.append((f"{name} = {ir.format_number(value)} is a probability: it must lie in [0, 1]", None))
        if n is not None and (n.denominator != 1 or n < 1):
            problems.append(
                (
                    "n (the number of units whose secrets may depend on one unit's) must be a whole number of at least 1",
                    None,
                )
            )
    return problems


def plain_words(c: ir.Pufferfish | None) -> str:
    """The class as an oversight body reads it: what the guarantee assumes about the data."""
    if c is None or c.kind == "independent":
        return (
            "the guarantee holds for data-generating distributions under which units are independent of "
            "each other given the public information Z; if one person's record carries information about "
            "others' (households, contagion), the stated budget does not cover it"
        )
    if c.kind == "dependence":
        return (
            f"the guarantee holds for distributions under which another unit's secret is 1 with probability "
            f"between {ir.format_number(c.option('p0'))} and {ir.format_number(c.option('p1'))} whatever one "
            f"unit's secret is, among groups of up to {ir.format_number(c.option('n'))} dependent units "
            "(seed 2, Section 4.4); stronger dependence is not covered"
        )
    return NO_FREE_LUNCH
