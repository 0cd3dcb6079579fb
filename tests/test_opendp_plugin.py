"""The `opendp` mechanism: an OpenDP measurement named by a Python entry point. The user's code runs
on compile only; its domain, metric and measure must match the spec's; OpenDP's privacy map is
checked against the stated budget."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

pytest.importorskip("opendp")
ROOT = Path(__file__).resolve().parents[1]


def _installed() -> bool:
    from dpspec.contract import plugins

    return "opendp" in plugins.mechanisms()


pytestmark = pytest.mark.skipif(
    not _installed(),
    reason="the dpspec_opendp entry point is not installed in this environment (pip install -e '.[opendp]')",
)

PIPELINE = """
import opendp.prelude as dp
dp.enable_features("contrib")
MARK = {mark!r}
if MARK:
    open(MARK, "w").write("imported")


def make():
    space = dp.vector_domain(dp.atom_domain(T={atom})), dp.{metric}()
    return space >> dp.t.then_clamp(({low}, {high})) >> dp.t.then_sum() >> dp.m.{noise}


def count_floats():
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    return space >> dp.t.then_count() >> dp.m.then_laplace(scale=2.0)


def rr():
    return dp.m.make_randomized_response_bool(0.75)


def broken():
    raise ValueError("no such column in my pipeline")


def not_a_measurement():
    return 42


def _context(values, T=int, **loss):
    atom = dp.atom_domain(T=float, nan=False) if T is float else dp.atom_domain(T=T)
    context = dp.Context.compositor(data=values, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(**loss), split_evenly_over=1,
                                    domain=dp.vector_domain(atom, size=len(values) if T is float else None))
    return context.query().clamp((T(0), T(120))).sum().laplace()


def ctx(values):
    return _context(values, epsilon=0.5)


def ctx_rho(values):
    return _context(values, rho=0.125)


def ctx_wide(values):
    return _context(values, epsilon=1.0)


def ctx_floats(values):
    return _context([float(v) for v in values], T=float, epsilon=0.5)


def ctx_transformation(values):
    context = dp.Context.compositor(data=values, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(epsilon=0.5), split_evenly_over=1,
                                    domain=dp.vector_domain(dp.atom_domain(T=int)))
    return context.query().clamp((0, 120)).sum()
"""


def example(
    tmp_path,
    *,
    unit="symdiff",
    premetric="pure",
    budget="epsilon: 0.5",
    entry="pipe:make",
    atom="int",
    metric="symmetric_distance",
    noise="then_laplace(scale=240.0)",
    mark="",
    column_type="int 0..120",
    low=0,
    high=120,
):
    home = tmp_path / "in"  # outputs go to tmp_path/..., never among the inputs
    if home.exists():
        shutil.rmtree(home)
    shutil.copytree(ROOT / "specs" / "data" / "opendp_example", home / "data")
    (home / "pipe.py").write_text(PIPELINE.format(mark=mark, atom=atom, metric=metric, noise=noise, low=low, high=high))
    text = (ROOT / "specs" / "opendp_sum.dps").read_text()
    text = (
        text.replace("data/opendp_example/", "data/")
        .replace("unit people : symdiff", f"unit people : {unit}")
        .replace("premetric pure", f"premetric {premetric}")
        .replace("epsilon: 0.5", budget)
        .replace('"opendp_sum_pipeline:make_measurement"', f'"{entry}"')
        .replace("age : int 0..120", f"age : {column_type}")
        .replace("budget epsilon <= 0.5\n", "")
    )
    spec = home / "s.dps"
    spec.write_text(text)
    return spec


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_the_bundled_example_compiles_and_reports_opendps_claim(tmp_path):
    out = tmp_path / "out"
    result = run("compile", ROOT / "specs" / "opendp_sum.dps", "-o", out)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert "epsilon = 0.5" in json.dumps(report)
    assert len((out / "release.csv").read_text().splitlines()) == 2  # header and the one noisy sum


def test_check_budget_and_audit_never_run_the_users_code(tmp_path):
    mark = tmp_path / "imported.txt"  # outside the spec folder
    spec = example(tmp_path, mark=str(mark))
    for command in ("check", "budget", "audit"):
        assert run(command, spec).exit_code == 0
    assert not mark.exists()
    assert run("compile", spec, "-o", tmp_path / "o").exit_code == 0
    assert mark.exists()  # and compile does


@pytest.mark.parametrize(
    "changes,both",
    [
        ({"premetric": "zcdp", "budget": "rho: 1"}, ("MaxDivergence", "zcdp")),
        ({"entry": "pipe:rr"}, ("DiscreteDistance", "people : symdiff")),
        ({"entry": "pipe:count_floats"}, ("AtomDomain(T=f64", "column 'age'")),
    ],
)
def test_a_mismatch_is_a_located_spec_error_naming_both_sides(tmp_path, changes, both):
    spec = example(tmp_path, **changes)
    assert run("check", spec).exit_code == 0
    result = run("compile", spec, "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    line = next(n for n, t in enumerate(spec.read_text().splitlines(), 1) if "measurement:" in t)
    assert f"s.dps:{line}:" in result.output
    for needle in both:
        assert needle in result.output
    assert not (tmp_path / "o").exists()


def test_a_library_claim_above_the_stated_budget_releases_nothing(tmp_path):
    spec = example(tmp_path, budget="epsilon: 0.25")
    result = run("compile", spec, "-o", tmp_path / "o")
    assert result.exit_code == 1 and "above the stated" in result.output and "0.5" in result.output
    assert not (tmp_path / "o").exists()


def test_a_change_one_unit_is_two_steps_of_symmetric_distance(tmp_path):
    assert run("compile", example(tmp_path, unit="hamming"), "-o", tmp_path / "o").exit_code == 1  # claims 1.0 > 0.5
    spec = example(tmp_path, unit="hamming", budget="epsilon: 1")
    result = run("compile", spec, "-o", tmp_path / "o2")
    assert result.exit_code == 0, result.output
    assert "d_in = 2" in (tmp_path / "o2" / "report.md").read_text()


@pytest.mark.parametrize(
    "entry,needle",
    [
        ("pipe:broken", "raised ValueError: no such column in my pipeline"),
        ("pipe:not_a_measurement", "returned int, not an OpenDP Measurement"),
        ("pipe:missing", "has no function 'missing'"),
        ("no_such_module:make", "cannot import 'no_such_module'"),
    ],
)
def test_an_entry_point_that_fails_is_a_user_error_not_an_internal_one(tmp_path, entry, needle):
    result = run("compile", example(tmp_path, entry=entry), "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    assert needle in result.output and "internal error" not in result.output


def test_the_budget_must_be_stated_in_the_premetric(tmp_path):
    result = run("check", example(tmp_path, premetric="zcdp"))
    assert result.exit_code == 1 and "rho" in result.output


# ---- an OpenDP Context query -----------------------------------------------------------------


def test_the_bundled_context_example_compiles_and_reports_the_contexts_accounting(tmp_path):
    out = tmp_path / "out"
    result = run("compile", ROOT / "specs" / "opendp_context.dps", "-o", out)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    section = next(s for s in report["sections"] if s["title"] == "OpenDP measurement")
    assert section["data"]["claim"] == "epsilon = 0.5" and section["data"]["d_in"] == 1
    assert "spent [0.5], remaining []" in section["data"]["context"]
    assert len((out / "release.csv").read_text().splitlines()) == 2


def test_a_context_query_is_released_through_its_context_after_the_checks(tmp_path):
    mark = tmp_path / "imported.txt"
    spec = example(tmp_path, entry="pipe:ctx", mark=str(mark))
    assert run("check", spec).exit_code == 0 and not mark.exists()  # check never builds the Context
    result = run("compile", spec, "-o", tmp_path / "o")
    assert result.exit_code == 0, result.output
    total = sum(
        int(a)
        for a in (tmp_path / "in" / "data" / "people.csv").read_text().splitlines()[1:]
        for a in [a.split(",")[1]]
    )
    released = int((tmp_path / "o" / "release.csv").read_text().splitlines()[1])
    assert abs(released - total) < 240 * 40  # Laplace scale 240 at epsilon 0.5: P(miss) < e^-40


@pytest.mark.parametrize(
    "changes,both",
    [
        ({"entry": "pipe:ctx_rho"}, ("the Context's privacy measure ZeroConcentratedDivergence", "premetric (pure)")),
        (
            {"entry": "pipe:ctx", "unit": "hamming", "budget": "epsilon: 1"},
            ("privacy unit is d_in = 1", "people : hamming", "d_in = 2"),
        ),
        ({"entry": "pipe:ctx_floats"}, ("AtomDomain(T=f64", "column 'age'")),
    ],
)
def test_a_context_that_does_not_match_the_spec_is_a_located_error_naming_both(tmp_path, changes, both):
    spec = example(tmp_path, **changes)
    result = run("compile", spec, "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    assert f"s.dps:{_measurement_line(spec)}:" in result.output
    for needle in both:
        assert needle in result.output
    assert not (tmp_path / "o").exists()


def test_a_contexts_loss_above_the_stated_budget_releases_nothing(tmp_path):
    result = run("compile", example(tmp_path, entry="pipe:ctx_wide"), "-o", tmp_path / "o")
    assert result.exit_code == 1 and "above the stated" in result.output and "epsilon': 1.0" in result.output
    assert not (tmp_path / "o").exists()


def test_a_context_query_that_is_not_yet_a_measurement_is_a_user_error(tmp_path):
    result = run("compile", example(tmp_path, entry="pipe:ctx_transformation"), "-o", tmp_path / "o")
    assert result.exit_code == 1, result.output
    assert "does not resolve to a measurement" in result.output and "internal error" not in result.output


def test_an_approximate_premetric_is_stated_with_epsilon_and_delta(tmp_path):
    spec = example(tmp_path, premetric="approximate delta 1e-9", budget="epsilon: 0.5\n  delta: 1e-9")
    assert run("check", spec).exit_code == 0
    result = run("compile", spec, "-o", tmp_path / "o")  # a Laplace sum is MaxDivergence, not approximate
    assert result.exit_code == 1 and "Approximate" not in result.output and "premetric (approximate)" in result.output


def _measurement_line(spec: Path) -> int:
    return next(n for n, t in enumerate(spec.read_text().splitlines(), 1) if "measurement:" in t)


def test_the_random_source_named_is_opendps_own_not_dpspecs_stream(tmp_path):
    """OpenDP draws its own noise: the manifest, certificate and report must not say dpspec's ChaCha20
    stream (or a seed) made the release."""
    out = tmp_path / "out"
    result = run("compile", ROOT / "specs" / "opendp_sum.dps", "--seed", "7", "-o", out)
    assert result.exit_code == 0, result.output
    policy = json.loads((out / "manifest.json").read_text())["seed_policy"]
    assert policy["seeded"] is False and policy["source"].startswith("OpenDP's own generator"), policy
    assert "the given seed do not reach it" in policy["source"]
    assert "Random source: OpenDP's own generator" in (out / "report.md").read_text()
    certificate = json.loads((out / "certificate.json").read_text())
    assert "OpenDP's own generator" in json.dumps(certificate)


def test_a_built_in_mechanism_still_names_dpspecs_stream():
    from dpspec.report.model import seed_policy

    assert seed_policy(None)["source"].startswith("ChaCha20")
    assert seed_policy(None, object())["source"].startswith("ChaCha20")
    assert seed_policy(3)["seeded"] is True
