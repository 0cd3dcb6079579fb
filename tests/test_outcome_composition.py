"""The cases' and deaths' budgets add up by adaptive composition, and the budget says so: the
deaths' draw reads the released cases, so Lemma 6's independence condition does not hold."""

from __future__ import annotations

import os

import dpspec
from dpspec.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "specs", "pa_covid", "wasserstein_naive_high_privacy.dps")


def test_the_outcome_budget_note_names_adaptive_composition_not_lemma_6(capsys):
    try:
        main(["budget", SPEC])
    except SystemExit as stop:
        assert stop.code in (0, None)
    text = capsys.readouterr().out
    assert "adaptive composition, not by Lemma 6" in text
    assert "not conditionally independent given the data" in text


def test_the_budget_json_composition_entry_is_the_same_sentence():
    from dpspec.api import check

    checked = check(dpspec.load(SPEC))
    breakdown = checked.mechanism.budget_breakdown(checked.spec, checked.params)
    assert breakdown.figures["pufferfish"]["composition"].startswith(
        "counts and outcome counts add up by adaptive composition"
    )
