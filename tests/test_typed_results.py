"""An optional hook's answer is a typed, frozen object (API 1.6: change_one; API 1.7: power,
budget_breakdown, semantics, expected_error, compared_counts). Each class is written to JSON as the
dict it replaces, key for key; the shape a plugin of an older API returned is still read, with a
DeprecationWarning naming the class to return, and gives the same outputs."""

from __future__ import annotations

import json
import os
import warnings
from fractions import Fraction

import attrs
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec import ir
from dpspec.api import (
    ZCDP,
    AttributeBudget,
    AttributeQuery,
    BudgetBreakdown,
    ChangeOne,
    ComparedCounts,
    ExpectedError,
    GeographyBudget,
    Power,
    Semantics,
    SemanticsRow,
    check,
    parse,
    read_source,
)
from dpspec.contract.mechanism import change_one_result
from dpspec.contract.results import budget_breakdown_result, compared_counts_result, expected_error_result, power_result
from dpspec.contract.semantics import semantics_result
from dpspec.errors import MechanismError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spec(name):
    path = os.path.join(ROOT, "specs", name)
    return parse(read_source(path), path)


def _json(value) -> str:
    return json.dumps(ir.to_jsonable(value), indent=2, default=str)


class _Named:
    name = "old_plugin"


# ---- change_one (API 1.6) -------------------------------------------------------------------


def test_a_change_one_tuple_is_read_with_a_warning_naming_the_class():
    with pytest.warns(DeprecationWarning, match=r"old_plugin.*dpspec\.api\.ChangeOne\(budget, reason\)"):
        got = change_one_result((ZCDP(1), "why"), _Named())
    assert got == ChangeOne(ZCDP(1), "why")


def test_a_change_one_object_passes_unchanged_and_is_frozen():
    answer = ChangeOne(ZCDP(1), "why")
    assert change_one_result(answer, _Named()) is answer and change_one_result(None, _Named()) is None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        answer.reason = "other"


def test_the_built_in_change_one_hooks_return_the_class():
    for name in ("sdhc_production.dps", "safetab_p_production.dps"):
        checked = check(_spec(name))
        answer = checked.mechanism.change_one(checked.spec, checked.params, ZCDP(1))
        assert isinstance(answer, ChangeOne) and answer.budget.rho == 2, name


# ---- each class is written as the dict it replaces --------------------------------------------

# the dicts the built-in plugins returned before API 1.7, in their key order
OLD_POWER = {
    "null": 5,
    "alternative": 15,
    "level": 0.05,
    "rate": 0.25,
    "total": 22053,
    "direction": "greater",
    "power_release": 0.074427,
    "power_post_processed": 0.074427,
    "size_release": 0.05,
    "size_post_processed": 0.05,
    "cell": "Cameron",
    "column": "county",
    "released": 36,
    "post_processed_value": 36,
    "reject_probability_release": 0.0,
    "reject_probability_post_processed": 0.0,
    "post_processing": "min(Y, public total): no cell exceeds the total (Z)",
    "note": "the clamp merges only values of equal evidence",
}
OLD_SEMANTICS = {
    "attributes": [
        {
            "attribute": "hhgq",
            "rho": Fraction(3, 7),
            "queries": [{"level": "state", "query": "hhgq"}, {"level": "block", "query": "detailed"}],
        },
        {"attribute": "units: ten", "rho": Fraction(1, 8), "queries": [], "tied_to": ["tenure"]},
    ],
    "geographies": [
        {"within": "blockgroup", "finest": "block", "levels": ["block"], "rho": Fraction(1, 3)},
        {"within": "nation", "finest": "block", "levels": ["state", "block"], "rho": Fraction(9, 10)},
    ],
    "across_split": {
        "finest": "block",
        "split_levels": ["state", "county"],
        "levels": ["state", "county", "block"],
        "rho": Fraction(4, 5),
        "description": "a block on the other side of the AIAN line",
    },
}
OLD_EXPECTED = {"table": "nation: total", "level": "nation", "query": "total", "variance": 2.5, "of": "noisy count"}


def test_power_is_written_as_its_dict_and_leaves_out_what_it_was_not_given():
    typed = Power(**OLD_POWER)
    assert _json(typed) == _json(OLD_POWER)
    required = {k: v for k, v in OLD_POWER.items() if k not in ("rate", "total", "direction", "column")}
    bare = {k: v for k, v in required.items() if not k.startswith("reject_")}
    assert _json(Power(**bare)) == _json(bare)  # no null for an optional field left out
    with pytest.warns(DeprecationWarning, match=r"old_plugin.*power returning a dict.*dpspec\.api\.Power"):
        read = power_result({**OLD_POWER, "by_hand": "yes"}, _Named())
    assert read == attrs.evolve(typed, extra={"by_hand": "yes"})
    assert list(ir.to_jsonable(read))[-1] == "by_hand"  # a further key is kept, after the fields


def test_a_budget_breakdown_is_written_as_its_keys():
    old = {"allocation": [{"level": "nation", "rho_exact": "1/3"}], "spine": {"bypass": ["county"]}}
    assert _json(BudgetBreakdown(old)) == _json(old)
    assert _json(BudgetBreakdown()) == "{}"
    with pytest.warns(DeprecationWarning, match=r"budget_breakdown returning a dict.*dpspec\.api\.BudgetBreakdown"):
        assert budget_breakdown_result(old, _Named()) == BudgetBreakdown(old)


def test_semantics_are_written_as_their_dict_rows_and_all():
    typed = Semantics(
        [
            AttributeBudget(
                "hhgq", Fraction(3, 7), [AttributeQuery("state", "hhgq"), AttributeQuery("block", "detailed")]
            ),
            AttributeBudget("units: ten", Fraction(1, 8), [], ["tenure"]),
        ],
        [
            GeographyBudget("blockgroup", "block", ["block"], Fraction(1, 3)),
            GeographyBudget("nation", "block", ["state", "block"], Fraction(9, 10)),
        ],
        {
            "across_split": SemanticsRow(
                extra={"finest": "block", "split_levels": ["state", "county"]},
                levels=["state", "county", "block"],
                rho=Fraction(4, 5),
                description="a block on the other side of the AIAN line",
            )
        },
    )
    assert _json(typed) == _json(OLD_SEMANTICS)
    with pytest.warns(DeprecationWarning, match=r"semantics returning a dict.*dpspec\.api\.Semantics"):
        assert semantics_result({**OLD_SEMANTICS, "no_row": None}, _Named()) == typed


def test_expected_errors_and_compared_counts_are_written_as_their_dicts():
    assert _json(ExpectedError(**OLD_EXPECTED)) == _json(OLD_EXPECTED)
    with pytest.warns(DeprecationWarning, match=r"expected_error returning dicts.*dpspec\.api\.ExpectedError"):
        assert expected_error_result([OLD_EXPECTED], _Named()) == [ExpectedError(**OLD_EXPECTED)]
    truth, released = pd.Series([3, 4], index=["a", "b"]), pd.Series([2.0, 5.0], index=["a", "b"])
    old = {"table": "t: county", "level": "county", "truth": truth, "released": released}
    typed = ComparedCounts("t: county", "county", truth, released)
    assert list(ir.to_jsonable(typed)) == list(old) and all(ir.to_jsonable(typed)[k] is v for k, v in old.items())
    with pytest.warns(DeprecationWarning, match=r"compared_counts returning dicts.*dpspec\.api\.ComparedCounts"):
        (read,) = compared_counts_result([{k: v for k, v in old.items() if k != "level"}], _Named())
    assert read.table == "t: county" and read.level is None and read.truth is truth  # level was optional


def test_typed_answers_pass_unchanged_without_a_warning_and_are_frozen():
    typed = Power(**OLD_POWER)
    rows = [ExpectedError(**OLD_EXPECTED)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert power_result(typed, _Named()) is typed and power_result(None, _Named()) is None
        assert expected_error_result(rows, _Named()) == rows and expected_error_result(None, _Named()) is None
        assert compared_counts_result(None, _Named()) is None and semantics_result(None, _Named()) is None
        assert budget_breakdown_result(None, _Named()) == BudgetBreakdown()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        typed.note = "other"


def test_an_old_answer_missing_a_field_or_of_another_type_is_the_mechanisms_error():
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(MechanismError, match=r"old_plugin.*power's answer has no 'note'"),
    ):
        power_result({k: v for k, v in OLD_POWER.items() if k != "note"}, _Named())
    with pytest.raises(MechanismError, match=r"expected_error returned str, not a list of dpspec\.api\.ExpectedError"):
        expected_error_result("rows", _Named())
    with pytest.raises(MechanismError, match=r"semantics returned list, not a dpspec\.api\.Semantics"):
        semantics_result([], _Named())


# ---- every built-in plugin returns the classes ------------------------------------------------


def test_the_built_in_hooks_return_the_classes():
    for name, hooks in {
        "pl94_production_topdown.dps": ("budget_breakdown", "semantics", "expected_error"),
        "sdhc_production.dps": ("budget_breakdown", "expected_error"),
        "staff_aggregate.dps": ("budget_breakdown", "expected_error"),
        "acs_ma_vision_rr.dps": ("expected_error",),
        "safetab_p_production.dps": ("expected_error",),
        os.path.join("pa_covid", "wasserstein_naive_high_privacy.dps"): ("budget_breakdown",),
    }.items():
        c = check(_spec(name))
        m = c.mechanism
        for hook in hooks:
            args = (c.spec, c.params, {}) if hook == "expected_error" else (c.spec, c.params)
            answer = getattr(m, hook)(*args)
            if hook == "budget_breakdown":
                assert isinstance(answer, BudgetBreakdown) and answer.figures, name
            elif hook == "semantics":
                assert isinstance(answer, Semantics) and isinstance(answer.further["across_split"], SemanticsRow)
                assert all(isinstance(a, AttributeBudget) for a in answer.attributes)
                assert all(isinstance(g, GeographyBudget) for g in answer.geographies)
            else:
                assert answer and all(isinstance(e, ExpectedError) for e in answer), (name, hook)


# ---- an old-style plugin: the same outputs, with a warning ------------------------------------


def _old_shape(value):
    """What a plugin written for API 1.6 returned for a typed answer: its dicts and lists, the
    values as they were (exact rhos stay Fractions)."""
    if isinstance(value, list):
        return [_old_shape(v) for v in value]
    if not attrs.has(type(value)):
        return value
    out = {}
    for f in attrs.fields(type(value)):
        v, how = getattr(value, f.name), f.metadata.get("json")
        if how == "inline":
            out.update({k: _old_shape(x) for k, x in v.items()})
        elif how != "optional" or v not in (None, ()):
            out[f.name] = _old_shape(list(v) if isinstance(v, tuple) else v)
    return out


@pytest.fixture
def old_style(monkeypatch):
    """Make a built-in mechanism answer `hooks` as a plugin of API 1.6 did, for one test."""
    from dpspec.contract import plugins

    def patch(name, *hooks):
        mech = plugins.mechanisms()[name]
        for hook in hooks:
            typed = getattr(mech, hook)
            monkeypatch.setattr(mech, hook, lambda *a, _typed=typed: _old_shape(_typed(*a)))
        return mech

    return patch


def _budget_and_reports(*specs) -> dict:
    """`dpspec budget --json` and the three reports of each spec, as the command writes them."""
    from dpspec.budget.budget_report import budget_summary
    from dpspec.report import render_all
    from dpspec.schemas import versioned

    out = {}
    for spec in specs:
        out.update({(spec.path, k): text for k, (_, text) in render_all(spec=spec).items()})
        summary = versioned("budget", budget_summary(spec))
        out[spec.path, "budget"] = json.dumps(summary, indent=2, sort_keys=False, default=str)
    return out


def test_an_old_semantics_and_breakdown_give_the_same_budget_json_and_reports_with_a_warning(old_style):
    # TopDown's own report section reads its typed breakdown, so PHSafe's answers the old way
    specs = _spec("pl94_production_topdown.dps"), _spec("sdhc_production.dps")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        typed = _budget_and_reports(*specs)
    old_style("topdown", "semantics")
    old_style("phsafe", "budget_breakdown")
    with pytest.warns(DeprecationWarning) as seen:
        old = _budget_and_reports(*specs)
    words = " ".join(str(w.message) for w in seen)
    assert "'topdown': semantics returning a dict" in words and "dpspec.api.Semantics(" in words
    assert "'phsafe': budget_breakdown returning a dict" in words and "dpspec.api.BudgetBreakdown(" in words
    assert old == typed
    budgets = typed[specs[0].path, "budget"] + typed[specs[1].path, "budget"]
    assert '"across_split"' in budgets and '"household_rho_exact"' in budgets  # what was compared


def test_old_expected_errors_and_compared_counts_give_the_same_sweep_files_with_a_warning(old_style):
    from dpspec.sweep import report
    from dpspec.sweep.grid import parse_axis
    from dpspec.sweep.runner import run_sweep

    def files():
        spec = _spec("acs_ma_vision_rr.dps")
        sweep = run_sweep(spec, [parse_axis("p=0.7")], [{"p": Fraction(7, 10)}], runs=1, seed=5)
        return {k: v if isinstance(v, str) else v.to_csv(index=False) for k, (_, v) in report.files(sweep).items()}

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        typed = files()
    old_style("randomized_response", "expected_error", "compared_counts")
    with pytest.warns(DeprecationWarning) as seen:
        old = files()
    words = " ".join(str(w.message) for w in seen)
    assert "dpspec.api.ExpectedError(" in words and "dpspec.api.ComparedCounts(" in words
    assert old == typed
    assert "proportion of 'yes'" in typed["expected_csv"] and "count of 'yes' (estimated)" in typed["realized_csv"]


def test_an_old_power_dict_gives_the_same_inference_json_with_a_warning(old_style, tmp_path):
    from dpspec.cli.main import main
    from dpspec.inference.power import power

    path = os.path.join(ROOT, "specs", "pa_covid", "wasserstein_naive_high_privacy.dps")
    out = tmp_path / "release"
    ran = CliRunner().invoke(main, ["compile", path, "-o", str(out), "--seed", "1", "--allow-critical"])
    assert ran.exit_code == 0, ran.output
    spec = _spec(os.path.join("pa_covid", "wasserstein_naive_high_privacy.dps"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        typed = json.dumps(power(spec, str(out), "Cameron:5:15"), indent=2)
    old_style("wasserstein_exponential", "power")
    with pytest.warns(DeprecationWarning, match=r"power returning a dict.*dpspec\.api\.Power"):
        old = json.dumps(power(spec, str(out), "Cameron:5:15"), indent=2)
    assert old == typed and '"power_release"' in typed and "null" not in typed.replace('"null"', "")
