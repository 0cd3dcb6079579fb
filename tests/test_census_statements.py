"""The bundled 2020 production specs state what the Census Bureau published, and say which
unit a figure counts (issue 25, item 2).

Sources: the P.L. 94-171 US-Persons production certificate (DAS_2020_Redistricting_Production_Code,
docs/certificates/...-US-Persons.certificate.pdf: "Total zCDP-implied epsilon = 17849145/1041158",
delta = 1e-10, rho = 293764/114921); the SafeTab-H production code (DAS_2020_DDHCB_Production_Code:
configs/safetab-h/NMFv5/config.json budgets, AddOneRow in safetab_h_analytics.py) and its
documentation ("measured with respect to adding/removing one household"); the OpenDP deployments
registry's Detailed DHC-B figure, rho 17.79.
"""

import os
from fractions import Fraction

import pytest

from dpspec.budget.budget_report import budget_summary
from dpspec.language.parser import parse, read_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PL94 = os.path.join(ROOT, "specs", "pl94_production_topdown.dps")
SAFETAB_H = os.path.join(ROOT, "specs", "safetab_h_production.dps")

CERTIFICATE_EPSILON = Fraction(17849145, 1041158)  # ~17.14, US-Persons certificate page 2 of 88
DDHC_B_PUBLISHED_RHO = 17.79  # Detailed DHC-B, change one household (OpenDP registry)
# configs/safetab-h/NMFv5/config.json, US keys: per table, 5 x level-1 (usa, state, county, tract,
# place) + 2 x level-2 at 1.9208 (usa, state) + 4 x level-2 at 0.142869 (county, tract, place, aiannh)
SAFETAB_H_ADD_REMOVE = 2 * (5 * Fraction("0.006915") + 2 * Fraction("1.9208") + 4 * Fraction("0.142869"))


def _summary(path):
    return budget_summary(parse(read_source(path), path))


def test_pl94_persons_states_the_certificate_epsilon():
    text = read_source(PL94)
    assert "17849145/1041158" in text and "epsilon 17.90 at delta 1e-10" not in text
    s = _summary(PL94)
    cks = next(c for c in s["conversions"] if c["method"] == "cks20")
    bs = next(c for c in s["conversions"] if c["method"] == "bs16")
    assert round(cks["epsilon"], 2) == round(float(CERTIFICATE_EPSILON), 2) == 17.14
    assert round(bs["epsilon"], 2) == 17.90  # the looser conversion: not the published figure
    bound = next(b for b in s["bounds"] if "epsilon" in b["bound"])
    assert "cks20" in bound["bound"] and bound["holds"]
    assert bound["achieved"] == pytest.approx(float(CERTIFICATE_EPSILON), abs=1e-6)


def test_safetab_h_says_which_unit_counts_what():
    assert SAFETAB_H_ADD_REMOVE == Fraction("8.895302")
    s = _summary(SAFETAB_H)
    native = s["native"]
    assert native["flavor"]["relation"] == "symdiff"  # production: add/remove one household
    assert native["budget"]["rho"] == pytest.approx(float(SAFETAB_H_ADD_REMOVE))
    # the ledger's generic conversion (two add/remove steps): 4x
    assert s["budget"]["rho"] == pytest.approx(float(4 * SAFETAB_H_ADD_REMOVE))
    [note] = [n for n in native["notes"] if n.startswith("change one household")]
    tight = 2 * SAFETAB_H_ADD_REMOVE
    assert f"rho = 2 x 8.895302 = {float(tight)}" in note and "rho x 4 = 35.581208" in note
    assert round(float(tight), 2) == DDHC_B_PUBLISHED_RHO  # the published figure is the tight change-one count
    text = read_source(SAFETAB_H)
    assert "ADDING OR REMOVING one household" in text and "17.790604 = 2 x 8.895302" in text


def test_no_change_one_note_when_the_spec_protects_add_remove():
    text = read_source(SAFETAB_H).replace("unit households : hamming", "unit households : symdiff")
    text = text.replace("budget rho <= 35.581208", "budget rho <= 8.895302")
    s = budget_summary(parse(text, SAFETAB_H))
    assert not [n for n in s["native"]["notes"] if n.startswith("change one")]
    assert s["budget"]["rho"] == pytest.approx(8.895302)
