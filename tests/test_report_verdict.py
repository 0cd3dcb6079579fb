"""The report's verdict and its NIST SP 800-226 sections (issue 42): weak protection is called weak
at the top, "all bounds hold" stands beside the verdict and never for it, and each of the eight
sections is in the HTML, the Markdown and report.json, saying where the spec is silent."""

from __future__ import annotations

import json
import math
import os

import pytest

from dpspec.audit.verdict import verdict
from dpspec.budget.interpret import PRIORS, posterior
from dpspec.language.parser import load_text_or_path
from dpspec.report import render_all
from tests.conftest import SPECS


def _plain(epsilon: float, delta: float = 0.0, who: str = "one person") -> dict:
    return {
        "rows": [
            {
                "who": who,
                "epsilon": epsilon,
                "delta": delta,
                "posteriors": [{"prior": p, "posterior": posterior(p, epsilon)} for p in PRIORS],
            }
        ]
    }


@pytest.mark.parametrize(
    "epsilon, delta, level",
    [
        (0.5, 0.0, "strong"),
        (1.0, 0.0, "strong"),
        (1.0001, 0.0, "moderate"),
        (5.0, 0.0, "moderate"),
        (5.0001, 0.0, "weak"),
        (15.43, 0.0, "weak"),
        (0.5, 1e-5, "weak"),
        (0.5, 1e-6, "strong"),
        (math.inf, 0.0, "none"),
    ],
)
def test_the_scale_has_the_thresholds_the_docs_state(epsilon, delta, level):
    assert verdict(_plain(epsilon, delta), [])["level"] == level


def test_the_sentence_says_what_the_beliefs_become():
    v = verdict(_plain(15.43, who="one household"), [])
    assert v["sentence"] == (
        "Weak protection for one household: once the release is out, what an attacker believes "
        "about one household can rise from 1%, 10% or 50% to over 99.99% (epsilon = 15.43)."
    )
    strong = verdict(_plain(1.0), [])["sentence"]
    assert "from 1% to 2.672%, from 10% to 23.2% and from 50% to 73.11%" in strong


def test_a_finding_that_voids_the_noise_means_no_protection_whatever_the_budget():
    v = verdict(_plain(0.1), [{"rule": "known-seed", "severity": "critical"}])
    assert v["level"] == "none" and "known-seed" in v["sentence"]
    assert verdict(_plain(0.1), [{"rule": "fine-invariants", "severity": "info"}])["level"] == "strong"


def test_no_budget_is_not_called_protection():
    v = verdict({"rows": [], "problem": "no budget is known for this spec"}, [])
    assert v["level"] == "unknown" and "cannot say" in v["sentence"]


@pytest.fixture(scope="module")
def swap_files():
    return render_all(spec=load_text_or_path(os.path.join(SPECS, "ma1940_swap.dps")))


def test_the_swap_report_leads_with_weak_protection_in_all_three_forms(swap_files):
    model = json.loads(swap_files["json"][1])
    assert model["format_version"] == "1.1" and model["verdict"]["level"] == "weak"
    assert model["verdict"]["bounds"].startswith("All bounds the spec declares hold")
    html, md = swap_files["html"][1], swap_files["markdown"][1]
    assert html.index('id="verdict"') < min(html.index('id="summary"'), html.index('id="notation"'))
    assert md.index("**Weak protection for one household:**") < md.index("## The specification in one line")


NIST = (
    "The guarantee: definition and parameters",
    "Unit of privacy and neighbouring relation",
    "Composition across every release of the same people (the ledger)",
    "Algorithms and the evidence for them",
    "Utility and the bias post-processing adds",
    "Security and side channels",
    "Trust model",
    "Exposure outside the noise",
)


def test_the_eight_nist_sections_are_in_all_three_forms_and_say_where_the_spec_is_silent(swap_files):
    model = json.loads(swap_files["json"][1])
    assert [n["title"] for n in model["nist"]] == list(NIST)
    assert all(n["paragraphs"] for n in model["nist"])
    composition = next(n for n in model["nist"] if n["id"] == "composition")
    assert (
        "Other releases of the same people, and the total budget across them: not stated in the spec."
        in composition["paragraphs"]
    )
    html, md = swap_files["html"][1], swap_files["markdown"][1]
    for i, title in enumerate(NIST, 1):
        assert f"{i}. {title}" in html and f"### {i}. {title}" in md
    # the spec is silent on the rest (the plugin states its proof and sampling)
    assert html.count("not stated in the spec") >= 5 and md.count("not stated in the spec") >= 5
    terms = [g["term"] for g in model["glossary"]]
    assert {"flavor", "currency", "bs16", "cks20"} <= set(terms) and any("MULT" in t for t in terms)
    assert html.index('id="glossary"') < html.index("flavor to the spec")  # glossed before its first use


def test_a_seeded_release_withholds_its_seed_from_every_published_file(small_spec, tmp_path):
    """The seed is a secret (whoever knows it removes the noise): a seeded compile, allowed through
    the critical gate, writes no file of its set that holds the seed's value."""
    from click.testing import CliRunner

    from dpspec.cli.main import main

    out = tmp_path / "seeded"
    result = CliRunner().invoke(
        main, ["compile", str(small_spec), "-o", str(out), "--seed", "987654321", "--allow-critical"]
    )
    assert result.exit_code == 0, result.output
    written = sorted(p for p in out.rglob("*") if p.is_file())
    assert any(p.name == "report.html" for p in written)
    for p in written:
        assert b"987654321" not in p.read_bytes(), p.name


def test_the_algorithms_section_cites_the_plugins_proof_and_how_it_samples(swap_files):
    """The evidence comes from the mechanism plugin (`Mechanism.proof`, `Mechanism.sampling`);
    a plugin that gives none leaves the section saying so."""
    from dpspec.report.nist import _algorithms

    model = json.loads(swap_files["json"][1])
    algorithms = next(n for n in model["nist"] if n["id"] == "algorithms")
    text = " ".join(algorithms["paragraphs"])
    assert "Where the guarantee is proved (the mechanism plugin's citation): Bailie, Gong & Meng" in text
    assert "How the randomness is drawn: exact:" in text
    bare = {**model, "mechanism": {**model["mechanism"], "proof": "", "sampling": ""}}
    silent = " ".join(_algorithms(bare)["paragraphs"])
    assert "A citation of the guarantee's proof (the mechanism plugin gives none): not stated in the spec." in silent
