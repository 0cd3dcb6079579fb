"""Seed 2's Theorem 15 on a small exact example: a test on the Wasserstein release is at least as
powerful as any test on the release post-processed with Z, strictly so when the post-processing
merges values whose evidence differs."""

from __future__ import annotations

import numpy as np
import pytest

from dpspec_wasserstein.power import post_processed_law, powers, release_law, ump_test

N, R = 6, 0.4
ALTERNATIVES = [0.35, 0.4, 0.5, 0.6, 0.8, 0.95]


def test_the_release_has_a_monotone_likelihood_ratio_in_theta():
    for loss in ("abs", "square"):
        (a, _), (b, _) = release_law(N, 0.3, R, loss), release_law(N, 0.6, R, loss)
        assert np.all(np.diff(b / a) >= -1e-9 * (b / a)[1:])  # nondecreasing in y: Theorem 15's first claim
        assert abs(a.sum() - 1) < 1e-12 and abs(b.sum() - 1) < 1e-12
    (a, _), (b, _) = release_law(N, 0.3, R, "square"), release_law(N, 0.6, R, "square")
    assert np.all(np.diff(b / a) > 0)  # strictly, under the square loss, beyond 0 and n too


def test_both_tests_have_their_level():
    for loss in ("abs", "square"):
        null, w = release_law(N, 0.3, R, loss)
        assert abs(null @ ump_test(null, 0.05) - 0.05) < 1e-12
        merged = post_processed_law(null, N, w)
        assert abs(merged @ ump_test(merged, 0.05) - 0.05) < 1e-12


def test_the_release_test_is_uniformly_more_powerful_and_strictly_when_the_clamp_merges_evidence():
    # at high privacy (rate 0.05) the level-0.05 threshold on Y lies beyond n, inside the merged values
    square = [
        row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, 0.05, loss="square")["rows"]
    ]
    assert min(square) >= -1e-12 and max(square) > 0.05
    # at rate 0.4 the threshold falls inside 0..n, where the two tests reject the same values
    sharp = [row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, R, loss="square")["rows"]]
    assert max(abs(g) for g in sharp) < 1e-9
    # the control: under the abs loss the likelihood ratio is constant beyond 0 and n, so the clamp
    # merges only values of equal evidence and the two tests have the same power
    flat = [row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, 0.05, loss="abs")["rows"]]
    assert max(abs(g) for g in flat) < 1e-9


def test_lemma_14_the_bayes_risk_from_the_release_is_at_most_that_from_its_post_processing():
    from dpspec_wasserstein.power import bayes_risks

    grid = [i / 10 for i in range(1, 10)]
    prior = [1 / len(grid)] * len(grid)
    square = bayes_risks(N, grid, prior, 0.05, loss="square")
    assert square["release"] < square["post_processed"] - 1e-4  # strictly: the clamp merges evidence
    flat = bayes_risks(N, grid, prior, 0.05, loss="abs")
    assert abs(flat["release"] - flat["post_processed"]) < 1e-12  # equal: it merges none (the control)


def _naive_power_by_enumeration(null, alternative, total, r, level, clamp):
    """The level test's power, from P(y | c) summed term by term on 0..K (K far beyond the total),
    optionally of min(Y, total): values sorted by the likelihood ratio, the null's mass filled to
    the level, the boundary value randomized."""
    import math

    top = total + int(60 / r)

    def law(c):
        p = [math.exp(-r * abs(y - c)) for y in range(top + 1)]
        s = sum(p)
        p = [v / s for v in p]
        if clamp:
            p = p[:total] + [sum(p[total:])]
        return p

    p0, p1 = law(null), law(alternative)
    # the Neyman-Pearson order: largest ratio first (ties, of equal evidence, in any order)
    order = sorted(range(len(p0)), key=lambda y: -(p1[y] / p0[y]))
    left, power = level, 0.0
    for y in order:
        if p0[y] <= left:
            left -= p0[y]
            power += p1[y]
        else:
            power += p1[y] * left / p0[y]
            break
    return power


def test_infer_power_reports_theorem_15_on_a_compiled_release(tmp_path):
    import json

    import pandas as pd
    from click.testing import CliRunner

    from dpspec import schemas
    from dpspec.cli.main import main

    from .test_wasserstein_infer_period import TARGET, _release

    spec, out = _release(tmp_path, seed=1)
    result = CliRunner().invoke(
        main,
        [
            "infer",
            str(spec),
            str(out),
            "--target",
            TARGET,
            "--seed",
            "3",
            "--power",
            "Erie:1:4",
            "--level",
            "0.1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["format_version"] == "1.1" and not schemas.problems("inference", doc)
    p = doc["power"]
    assert (p["cell"], p["null"], p["alternative"], p["level"], p["total"], p["direction"]) == (
        "Erie",
        1,
        4,
        0.1,
        4,
        "greater",
    )
    assert abs(p["size_release"] - 0.1) < 1e-12 and abs(p["size_post_processed"] - 0.1) < 1e-12
    for key, clamp in (("power_release", False), ("power_post_processed", True)):
        assert abs(p[key] - _naive_power_by_enumeration(1, 4, 4, p["rate"], 0.1, clamp)) < 1e-9, key
    assert p["power_release"] > 0.1  # unbiased: the MLR test's power exceeds its level
    # the abs loss's ratio is constant beyond the total: the clamp loses nothing (Theorem 15, not strict)
    assert abs(p["power_release"] - p["power_post_processed"]) < 1e-9 and "not strict" in p["note"]
    released = int(pd.read_csv(out / "counts.csv").set_index("county").loc["Erie", "cases"])
    assert p["released"] == released and p["post_processed_value"] == min(released, 4)
    text = CliRunner().invoke(
        main, ["infer", str(spec), str(out), "--target", TARGET, "--seed", "3", "--power", "Erie:1:4"]
    )
    assert text.exit_code == 0 and "power (seed 2, Theorem 15)" in text.stdout and "on f(Y) = min(Y, 4):" in text.stdout
    bad = CliRunner().invoke(main, ["infer", str(spec), str(out), "--target", TARGET, "--power", "Nowhere:1:4"])
    assert bad.exit_code != 0 and "no released cell 'Nowhere'" in bad.output
    lone = CliRunner().invoke(main, ["infer", str(spec), str(out), "--target", TARGET, "--level", "0.1"])
    assert lone.exit_code != 0 and "--level goes with --power" in lone.output


def test_the_infer_reports_show_the_power_section_with_the_json_figures(tmp_path):
    """`infer --power -o DIR`: report.html and report.md carry Theorem 15's two tests with the
    figures result.json holds (six decimals, as the terminal prints them); without --power neither
    has the section."""
    import json

    from click.testing import CliRunner

    from dpspec.cli.main import main

    from .test_wasserstein_infer_period import TARGET, _release

    spec, out = _release(tmp_path, seed=1)
    result = CliRunner().invoke(
        main,
        [
            "infer",
            str(spec),
            str(out),
            "--target",
            TARGET,
            "--seed",
            "3",
            "--power",
            "Erie:1:4",
            "--level",
            "0.1",
            "-o",
            str(tmp_path / "inf"),
        ],
    )
    assert result.exit_code == 0, result.output
    p = json.loads((tmp_path / "inf" / "result.json").read_text())["power"]
    html = (tmp_path / "inf" / "report.html").read_text()
    md = (tmp_path / "inf" / "report.md").read_text()
    for text in (html, md):
        assert "Power of a test with and without Z (seed 2, Theorem 15)" in text
        assert "level-0.1 test of county Erie" in text
        for key in ("power_release", "power_post_processed", "size_release", "size_post_processed"):
            assert f"{p[key]:.6f}" in text, key
        assert f"{p['reject_probability_release']:.4g}" in text
    assert '<section id="power">' in html and "| the release Y | " in md
    plain = CliRunner().invoke(
        main, ["infer", str(spec), str(out), "--target", TARGET, "--seed", "3", "-o", str(tmp_path / "plain")]
    )
    assert plain.exit_code == 0, plain.output
    for name in ("report.html", "report.md"):
        assert "Theorem 15" not in (tmp_path / "plain" / name).read_text()


def test_the_power_section_escapes_what_a_plugin_writes(tmp_path):
    """A mechanism's power result is plugin text: markup in its cell name, note or post-processing
    prints as text in both reports."""
    from dpspec.inference import infer
    from dpspec.inference.report import report_files

    from .test_wasserstein_infer_period import TARGET, _release

    spec, out = _release(tmp_path, seed=1)
    result = infer(str(spec), str(out), TARGET, draws=20, seed=3)
    result.power = {
        "cell": "<img src=x onerror=alert(1)>",
        "null": 1,
        "alternative": 4,
        "level": 0.1,
        "power_release": 0.5,
        "power_post_processed": 0.25,
        "size_release": 0.1,
        "size_post_processed": 0.1,
        "released": 3,
        "post_processed_value": 3,
        "post_processing": "<script>f</script>",
        "note": "a | b **bold** [link](http://x)",
    }
    files = report_files(result, with_draws=False)
    html, md = files["html"][1], files["markdown"][1]
    assert "<img" not in html and "<script>f" not in html and "&lt;img src=x" in html and "&lt;script&gt;f" in html
    assert "<img" not in md and "<script>" not in md and "a \\| b \\*\\*bold\\*\\*" in md
    assert "0.500000" in html and "0.250000" in md


@pytest.mark.parametrize("base", ["congenial", "prior"])
def test_infer_power_refuses_a_base_that_draws_the_cells_jointly(tmp_path, base):
    from click.testing import CliRunner

    from dpspec.cli.main import main

    from .test_wasserstein_infer_period import CASE_STUDY, TARGET, _release

    spec, out = _release(tmp_path, seed=1, spec=CASE_STUDY.with_name(f"wasserstein_{base}_high_privacy.dps"))
    result = CliRunner().invoke(main, ["infer", str(spec), str(out), "--target", TARGET, "--power", "Erie:1:3"])
    assert result.exit_code != 0 and "draws the cells jointly" in result.output
    assert "no single size" in " ".join(result.output.split())
