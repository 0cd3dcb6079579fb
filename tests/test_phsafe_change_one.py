"""PHSafe's change-one bound (rho x 2, plugins/dpspec_phsafe/change_one.py) checked on the
mechanism's own tabulation: for random changes of one person with their households' unit
records, every measurement's exact zCDP cost ||true counts' change||^2 / (2 sigma^2) stays
within twice its rho; a constructed change attains it; a change outside the relation (two unit
records given other MAFIDs) exceeds it, so the relation's restriction is needed."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.api import DataError, load
from dpspec_phsafe.plugin import PHSafe
from dpspec_phsafe.synthetic import population
from dpspec_phsafe.tabulate import Records, truths

ROOT = Path(__file__).resolve().parent.parent
US = ROOT / "specs" / "sdhc_production.dps"
STATES = ("09", "23")
UNIT_ATTRS = ["state", "RTYPE", "HHT", "HHT2", "CPLT", "TEN", "HHRACE", "HHSPAN"]


@pytest.fixture(scope="module")
def design():
    from dpspec.contract.mechanism import resolve_params

    spec = load(str(US))
    params, problems = resolve_params(PHSafe(), spec.mechanism, spec)
    assert not problems
    return PHSafe().design(spec, params)


def _counts(design, persons, units):
    return {
        (m.table, m.geography, m.level): (m, truth)
        for m, truth, *_ in truths(design, Records(persons, units, STATES, "test"))
    }


def _ratios(design, before, persons, units) -> dict:
    """Each measurement's exact zCDP cost of the change over its rho (a Fraction)."""
    after = _counts(design, persons, units)
    out = {}
    for key, (m, old) in before.items():
        new = after[key][1]
        assert new.shape == old.shape
        sq = int(((new - old) ** 2).sum())
        out[key] = F(sq) / (2 * design.sigma2(m)) / m.rho
    return out


@pytest.fixture(scope="module")
def base(design):
    units, persons = population(120, list(STATES), seed=7)
    return units, persons, _counts(design, persons, units)


@pytest.mark.slow  # PHSafe runs for many random one-person changes
def test_random_changes_of_one_person_cost_at_most_twice_rho(design, base):
    """A person replaced by a copy of another person's record in a random household, with (a) the
    units they leave and join changed in place or (b) any one unit record replaced by another
    (its MAFID included). Changes that break a table's cell rules are data errors and skipped."""
    units, persons, before = base
    rng = np.random.default_rng(2020)
    mafids = units["MAFID"].to_numpy()
    worst, valid = F(0), 0
    for trial in range(80):
        p = persons.copy()
        u = units.copy()
        i, j = rng.integers(len(p), size=2)
        a = p.at[i, "MAFID"]
        b = mafids[rng.integers(len(mafids))] if trial % 3 else a  # a third stay in their household
        p.loc[i] = p.loc[j]
        p.at[i, "MAFID"] = b
        if trial % 2 == 0:  # (a) both households' records changed in place, to one other unit's values
            k = rng.integers(len(u))
            for mafid in {a, b}:
                u.loc[u["MAFID"] == mafid, UNIT_ATTRS] = u.loc[k, UNIT_ATTRS].to_numpy()
        else:  # (b) one unit record replaced by any other: here a copy of another unit, MAFID and all
            r, k = rng.integers(len(u), size=2)
            u.loc[r] = u.loc[k]
            if rng.random() < 0.5:
                u.at[r, "MAFID"] = b
        try:
            ratios = _ratios(design, before, p, u)
        except DataError:
            continue
        valid += 1
        top = max(ratios.values())
        assert top <= 2, (trial, max(ratios, key=ratios.get), top)
        worst = max(worst, top)
    assert valid >= 40  # enough of the changes were consistent records
    assert worst > 1  # the changes did cost more than one add/remove step somewhere


def _hh(mafid, ten, members, race=1):
    unit = dict(MAFID=mafid, state="09", RTYPE=2, HHT=1, HHT2=2, CPLT=1, TEN=ten, HHRACE=race, HHSPAN=1)
    people = [dict(MAFID=mafid, RTYPE=3, RELSHIP=rel, QAGE=age, CENRACE=race, CENHISP=1) for rel, age in members]
    return unit, people


def _frames(households):
    return (pd.DataFrame([p for _, ps in households for p in ps]), pd.DataFrame([u for u, _ in households]))


def test_two_units_changed_in_place_attain_twice_rho_in_a_unit_table(design):
    """Two owner-occupied married households; a spouse-aged adult moves from one to the other and
    both units become renter-occupied: PH8_denom moves 2 units from owner to renter in each of its
    measurements, ||change||^2 = 8 = 2 D^2, exactly twice rho; no measurement exceeds it."""
    couple = [(20, 40), (21, 38), (28, 70)]
    old = [_hh(1, 1, couple), _hh(2, 1, couple)]
    persons, units = _frames(old)
    before = _counts(design, persons, units)
    new = [_hh(1, 3, couple[:2]), _hh(2, 3, couple + [(28, 70)])]
    ratios = _ratios(design, before, *_frames(new))
    ph8 = {k: v for k, v in ratios.items() if k[0] == "PH8_denom" and k[2] != "H,I"}
    assert ph8 and all(v == 2 for v in ph8.values())
    assert max(ratios.values()) == 2


def test_outside_the_relation_two_units_given_other_mafids_exceed_twice_rho(design):
    """Two households whose MAFID is repeated in the unit records (dropped, as production's
    DropNonUnique) and two without a unit: giving one repeated record of each a new MAFID makes
    four households count, 4 x 10 persons in one PH7 cell. That is four of production's unit steps,
    not a change of one person's households: the x 2 bound does not hold there (group privacy's x 4
    does), which is why the relation keeps a changed unit's MAFID."""
    ten = [(20, 40)] + [(28, 30)] * 9
    units, persons = [], []
    for mafid in (1, 2, 3, 4):
        u, ps = _hh(mafid, 1, ten)
        persons += ps
        if mafid <= 2:
            units += [u, dict(u)]  # repeated MAFID
    before = _counts(design, pd.DataFrame(persons), pd.DataFrame(units))
    units[1]["MAFID"], units[3]["MAFID"] = 3, 4
    persons[0] = dict(persons[0], QAGE=41)  # and one person changed
    ratios = _ratios(design, before, pd.DataFrame(persons), pd.DataFrame(units))
    assert ratios[("PH7", "usa", "*")] > 2
    assert max(ratios.values()) <= 4
