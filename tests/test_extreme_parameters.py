"""Legal but extreme budgets either work or are refused at `check` as the user's to fix (exit 1, at the
budget's line, saying which range works and why), never an internal error: the Wasserstein
mechanisms at epsilon 1000 and 1e-20, TopDown at rho 1000 and 1e-40, and every plugin whose noise
scale follows from its parameters (aggregate, SafeTab, PHSafe)."""

from __future__ import annotations

import os
import shutil
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from dpspec.api import MechanismError, discrete_gaussian, discrete_laplace, sampler_limit_problem
from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")


def _spec(tmp_path, name, old, new, bound_old=None, bound_new=None):
    """A copy of a bundled spec with one setting changed, in tmp_path (data linked, never written)."""
    (tmp_path / "in").mkdir(exist_ok=True)
    if not (tmp_path / "in" / "data").exists():
        (tmp_path / "in" / "data").symlink_to(os.path.join(SPECS, "data"))
        shutil.copytree(os.path.join(SPECS, "pa_covid"), tmp_path / "in" / "pa_covid")
    text = open(os.path.join(SPECS, name), encoding="utf-8").read()
    assert old in text and (bound_old is None or bound_old in text)
    text = text.replace(old, new, 1)
    if bound_old is not None:
        text = text.replace(bound_old, bound_new)
    path = tmp_path / "in" / name
    path.write_text(text, encoding="utf-8")
    return path, text


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


WASSERSTEIN = ("pa_covid/wasserstein_naive_low_privacy.dps", "  epsilon: 10", "epsilon <= 10", "epsilon <= 2000")
POSTPROCESSED = ("pa_covid/postprocessing_low_privacy.dps", "  epsilon: 10", "epsilon <= 10", "epsilon <= 2000")
TOPDOWN = ("acs_ma_hispanic_topdown.dps", "  rho: 0.1", "rho <= 0.1", "rho <= 2000")


@pytest.mark.parametrize("name, old, bound_old, bound_new", [WASSERSTEIN, TOPDOWN])
def test_a_large_budget_compiles(tmp_path, name, old, bound_old, bound_new):
    path, _ = _spec(tmp_path, name, old, old.split(":")[0] + ": 1000", bound_old, bound_new)
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code in (0, 1) and "internal error" not in res.output, res.output
    assert (tmp_path / "out" / "manifest.json").exists(), res.output  # (exit 1 too: a known seed is a critical finding)


CHECKED = [
    (*WASSERSTEIN, "1e-20", "epsilon", "wasserstein_exponential"),
    (*POSTPROCESSED, "1e-20", "epsilon", "noisy_postprocessed"),
    (*TOPDOWN, "1e-40", "rho", "topdown"),
    ("staff_aggregate.dps", "  epsilon: 1\n", "epsilon <= 1\n", "epsilon <= 2000\n", "1e-20", "epsilon", "aggregate"),
]


@pytest.mark.parametrize("name, old, bound_old, bound_new, value, word, plugin", CHECKED)
def test_a_budget_too_small_to_draw_is_refused_at_check_at_its_line(
    tmp_path, name, old, bound_old, bound_new, value, word, plugin
):
    path, text = _spec(
        tmp_path,
        name,
        old,
        old.split(":")[0] + ": " + value + ("\n" if old.endswith("\n") else ""),
        bound_old,
        bound_new,
    )
    res = CliRunner().invoke(main, ["check", str(path)])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    line = _line_of(text, f"{word}: {value}")
    assert f"{path.name}:{line}:3: error: {plugin}:" in res.output, res.output
    assert "beyond the 64-bit integers" in res.output and "below 2^56" in res.output, res.output  # the range, and why
    assert f"Declare a larger budget: {word} of at least about" in res.output and "works)" in res.output, res.output
    # the budget the message names as working does work
    works = res.output.split(f"({word} = ")[1].split(" works)")[0]
    path.write_text(text.replace(f"{word}: {value}", f"{word}: {works}", 1), encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(path)])
    assert res.exit_code == 0, res.output


def test_compile_refuses_it_too_before_drawing(tmp_path):
    path, _ = _spec(tmp_path, *TOPDOWN[:2], "  rho: 1e-40", *TOPDOWN[2:])
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code == 1 and "internal error" not in res.output and "rho of at least about" in res.output, (
        res.output
    )
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


@pytest.mark.parametrize(
    "spec, old, new, at, plugin",
    [
        ("safetab_h_production.dps", "level1: 0.006915", "level1: 1e-40", "level1: 1e-40", "safetab"),
        ("sdhc_production.dps", '"usa_A-G": 0.002619', '"usa_A-G": 1e-40', '"usa_A-G": 1e-40', "phsafe"),
    ],
)
def test_production_plugins_refuse_a_measurement_rho_too_small_to_draw_at_its_line(
    tmp_path, spec, old, new, at, plugin
):
    path, text = _spec(tmp_path, spec, old, new)
    for total in ("total_rho: 8.895302", "total_rho: 1.257281"):  # the declared total no longer adds up: drop it
        text = text.replace(total, "")
    path.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(path)])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    assert f"{path.name}:{_line_of(text, at)}:" in res.output and f"error: {plugin}: the noise of" in res.output, (
        res.output
    )
    assert "sigma² below (2^56 - 1)²" in res.output and "of at least about" in res.output, res.output


# ---- the one test the samplers and `check` share --------------------------------------------------


def test_the_limit_is_the_samplers_own_at_its_boundary():
    top = (1 << 56) - 1
    assert sampler_limit_problem("discrete_laplace", Fraction(top)) is None
    assert "below 2^56" in sampler_limit_problem("discrete_laplace", Fraction(top + 1))
    assert sampler_limit_problem("discrete_laplace", Fraction(top, 7)) is None
    assert sampler_limit_problem("discrete_gaussian", Fraction(top * top - 1)) is None
    assert "sigma² below (2^56 - 1)²" in sampler_limit_problem("discrete_gaussian", Fraction(top * top))
    rng = np.random.default_rng(1)
    assert discrete_laplace(Fraction(top), 4, rng).dtype == np.int64  # the largest scale still draws
    with pytest.raises(MechanismError) as exc:  # and the sampler refuses in the same words
        discrete_laplace(Fraction(top + 1), 4, rng)
    assert str(exc.value) == sampler_limit_problem("discrete_laplace", Fraction(top + 1))
    with pytest.raises(MechanismError) as exc:
        discrete_gaussian(Fraction(10) ** 40, 4, rng)
    assert str(exc.value) == sampler_limit_problem("discrete_gaussian", Fraction(10) ** 40)
    with pytest.raises(ValueError, match="no exact sampler"):
        sampler_limit_problem("laplace", 1)


def test_a_budget_large_enough_but_written_with_too_many_digits_is_told_so():
    eps = Fraction("0.99999999999999999999")
    message = sampler_limit_problem("discrete_laplace", 1 / eps, ("epsilon", eps))
    assert "large enough, but its exact fraction has too many digits" in message and "(epsilon = 1 works)" in message


def test_a_draw_that_would_leave_the_64_bit_integers_is_refused_never_wrapped(monkeypatch):
    import dpspec.run.noise as noise

    monkeypatch.setattr(noise, "_geometric_exp_one", lambda size, rng: np.full(size, 1000, dtype=np.int64))
    with pytest.raises(MechanismError, match="left the 64-bit integers"):
        noise.discrete_laplace(Fraction(1 << 55), 3, np.random.default_rng(0))
    out = noise.discrete_laplace(Fraction(3), 3, np.random.default_rng(0))  # a small scale: 3·1000 fits
    assert (np.abs(out) >= 3000).all()


@pytest.mark.parametrize(
    "name",
    ["wasserstein_naive_low_privacy.dps", "wasserstein_congenial_high_privacy.dps", "postprocessing_low_privacy.dps"],
)
def test_the_scale_check_computes_is_the_one_the_sampler_draws_with(name):
    from dpspec.api import check, parse, read_source

    path = os.path.join(SPECS, "pa_covid", name)
    checked = check(parse(read_source(path), path))
    mech, spec, params = checked.mechanism, checked.spec, checked.params
    scales = mech.laplace_scales(spec, params)
    drawn = (
        mech.noise_scales(spec, params)
        if hasattr(mech, "noise_scales")
        else {"counts": 1 / mech.rates(spec, params)[0]}
    )
    assert scales["counts"] == drawn["counts"] and scales["counts"] > 0


def test_the_kng_refuses_an_epsilon_too_small_to_draw_at_its_line():
    from dpspec.api import SpecError, check, parse

    from tests.test_wasserstein import KNG

    text = KNG.replace("MECH", "wasserstein_kng").replace("  epsilon: 1\n", "  epsilon: 1e-20\n")
    with pytest.raises(SpecError) as exc:
        check(parse(text))
    [d] = exc.value.diagnostics
    assert d.line == _line_of(text, "epsilon: 1e-20") and d.message.startswith("wasserstein_kng: the rate's noise")
    assert "epsilon of at least about" in d.message
    check(parse(text.replace("epsilon: 1e-20", "epsilon: 1e-15")))  # the range the message names works


@pytest.mark.parametrize(
    "name, old, bound_old, bound_new, value, word", [(*WASSERSTEIN, "1e-20", "epsilon"), (*TOPDOWN, "1e-40", "rho")]
)
def test_the_budget_the_refusal_names_compiles(tmp_path, name, old, bound_old, bound_new, value, word):
    """At the edge of the range: noise near 2^56 is drawn, added and post-processed without an error."""
    path, text = _spec(tmp_path, name, old, old.split(":")[0] + ": " + value, bound_old, bound_new)
    refused = CliRunner().invoke(main, ["check", str(path)])
    works = refused.output.split(f"({word} = ")[1].split(" works)")[0]
    path.write_text(text.replace(f"{word}: {value}", f"{word}: {works}", 1), encoding="utf-8")
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code in (0, 1) and "internal error" not in res.output, res.output
    assert (tmp_path / "out" / "manifest.json").exists(), res.output  # (exit 1: a known seed is a critical finding)


# ---- the K-norm gradient mean and slope: their scale depends on the data, refused at check for the worst case


def _grid_kng(name: str, epsilon: str) -> str:
    from tests.test_wasserstein_kng import MEAN, SLOPE

    text = (
        MEAN.replace("CLASS", "independent") if name == "wasserstein_kng_mean" else SLOPE.replace("INTERCEPT", "0")
    ).replace("MECH", name)
    return text.replace("  epsilon: 1\n", f"  epsilon: {epsilon}\n")


@pytest.mark.parametrize(
    "name, refused, why",
    [
        ("wasserstein_kng_mean", "1e-20", "widest at n = 1"),
        ("wasserstein_kng_slope", "1e-15", "the sum of the clipped x²"),
    ],
)
def test_the_kng_mean_and_slope_refuse_at_check_an_epsilon_no_dataset_could_be_drawn_for(tmp_path, name, refused, why):
    """Their grid's scale 2 Delta / (epsilon step N) takes N from the data (n, or A = sum x²); `check`
    refuses the epsilon the worst admissible N could not draw, at its line, saying why, and the
    epsilon it names then checks and compiles (before, only compile refused it)."""
    from dpspec.api import SpecError, check, parse

    text = _grid_kng(name, refused)
    with pytest.raises(SpecError) as exc:
        check(parse(text))
    [d] = exc.value.diagnostics
    assert d.line == _line_of(text, f"epsilon: {refused}") and d.message.startswith(f"{name}: the ")
    assert "below 2^56" in d.message and why in d.message and "epsilon of at least about" in d.message
    works = d.message.split("(epsilon = ")[1].split(" works)")[0]
    ok = text.replace(f"epsilon: {refused}", f"epsilon: {works}").replace(
        "budget epsilon <= 1", f"budget epsilon <= {works}"
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "people.csv").write_text("age\n4\n12\n" if "age" in text else "x,y\n1,3\n2,-1\n")  # any n draws
    path = tmp_path / "in" / "ok.dps"
    path.write_text(ok.replace("unit people", 'data people from "people.csv"\nunit people'), encoding="utf-8")
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code in (0, 1) and "internal error" not in res.output, res.output
    assert (tmp_path / "out" / "manifest.json").exists(), res.output  # (exit 1: a known seed is a critical finding)


# ---- SafeTab: check uses the fan-out k the run uses, so check and compile agree at the boundary


@pytest.mark.slow  # runs SafeTab at an extreme budget
@pytest.mark.parametrize("rho, checks", [("5e-34", False), ("1e-33", True)])
def test_safetab_checks_a_cells_noise_with_the_fan_out_the_run_uses(tmp_path, rho, checks):
    """SafeTab-H declares max_groups 9: sigma² = 9 / (2 rho). At rho 5e-34 that is 9e33, past the
    samplers' (2^56 - 1)² (5.2e33), though 1 / (2 rho) (the fan-out's lower bound check used) is not:
    check refuses it at its line, naming k. At 1e-33 (4.5e33) check passes and compile draws it."""
    path, text = _spec(tmp_path, "safetab_h_production.dps", "level1: 0.006915", f"level1: {rho}")
    text = text.replace("total_rho: 8.895302", "")
    path.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(main, ["check", "--no-bounds", str(path)])
    assert "internal error" not in res.output, res.output
    if not checks:
        assert res.exit_code == 1, res.output
        assert f"{path.name}:{_line_of(text, f'level1: {rho}')}:" in res.output, res.output
        assert "fan-out k = 9" in res.output and "sigma² below (2^56 - 1)²" in res.output, res.output
        return
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code in (0, 1) and "internal error" not in res.output, res.output
    assert (tmp_path / "out" / "manifest.json").exists(), res.output  # (exit 1: a known seed is a critical finding)


def test_safetab_without_max_groups_checks_with_the_iteration_tables_bound(tmp_path):
    """No max_groups: the run's k is the public iteration table's bound h_r * max(2, r) + h_e, and
    check uses that bound, not 1."""
    path, text = _spec(tmp_path, "safetab_h_production.dps", "level1: 0.006915", "level1: 5e-34")
    text = text.replace("total_rho: 8.895302", "").replace("  max_groups: 9\n", "")
    path.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(main, ["check", "--no-bounds", str(path)])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    assert f"{path.name}:{_line_of(text, 'level1: 5e-34')}:" in res.output and "fan-out k = " in res.output, res.output
