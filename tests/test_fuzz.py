"""Fuzzing as a test: hypothesis drives scripts/fuzz.py's mutations of every bundled spec through
the API and the CLI, with a small budget; `python scripts/fuzz.py` runs 100,000 cases."""

from __future__ import annotations

import importlib.util
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("dpspec_fuzz", os.path.join(ROOT, "scripts", "fuzz.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

SETTINGS = dict(
    deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("fuzz-mirror"))
    fuzz.mirror(tmp)
    return tmp


def test_every_bundled_spec_is_fuzzed_and_passes_unmutated(mirror):
    assert len(fuzz.SPECS) >= 20 and "acs_program/program.dps" in fuzz.SPECS
    for name in ("acs_ma_vision_rr.dps", "acs_program/program.dps", "acs_national_topdown.dps"):
        assert fuzz.run_api(fuzz.original(name), os.path.join(fuzz.SPECS_DIR, name), False) == "ok"
        assert fuzz.run_cli(fuzz.original(name), name, mirror, False) == "ok"


def test_the_oracle_catches_an_internal_error(monkeypatch):
    import dpspec.language.formatter

    monkeypatch.setattr(dpspec.language.formatter, "format_spec", lambda spec: 1 / 0)
    name = "acs_ma_vision_rr.dps"
    assert fuzz.run_api(fuzz.original(name), os.path.join(fuzz.SPECS_DIR, name), False).startswith(
        "internal: ZeroDivisionError"
    )


@pytest.mark.parametrize("kind", fuzz.KINDS)
def test_each_mutation_changes_the_text(kind):
    text = fuzz.original("acs_ma_vision_rr.dps")
    assert any(fuzz.mutate(text, kind, random.Random(i)) != text for i in range(5))


@pytest.mark.slow  # the fuzzer (many mutated specs through the API)
@settings(max_examples=150, **SETTINGS)
@given(name=st.sampled_from(fuzz.SPECS), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_specs_never_crash_the_api(name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_api(text, os.path.join(fuzz.SPECS_DIR, name), False)
    assert not outcome.startswith("internal"), outcome


@pytest.mark.slow  # the fuzzer (many mutated specs through the command line)
@settings(max_examples=25, **SETTINGS)
@given(name=st.sampled_from(fuzz.SPECS), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_specs_never_crash_the_cli(mirror, name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_cli(text, name, mirror, False)
    assert not outcome.startswith("internal"), outcome


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz-scratch"))


@pytest.mark.slow  # every fuzzer input compiled unmutated
def test_the_newer_inputs_pass_unmutated(scratch):
    """Each fuzzed input of the newer commands is accepted as it is, so mutations start from valid."""
    for name in fuzz.ENTRIES:
        assert fuzz.run_entry(fuzz.original(name), os.path.join(fuzz.SPECS_DIR, name)) == "ok", name
    assert fuzz.run_convert({"rho": "0.5"}, {"to": "approx", "delta": 1e-10}) == "ok"
    assert fuzz.run_verify_json(fuzz.verify_json(), scratch) == "ok"
    assert fuzz.run_infer({"target": "count persons by DEYE", "draws": 10, "seed": 1}, scratch) == "ok"
    assert (
        fuzz.run_verify(fuzz.original("acs_ma_vision_rr.dps"), os.path.join(fuzz.SPECS_DIR, "acs_ma_vision_rr.dps"), 1)
        == "ok"
    )


@pytest.mark.slow  # the fuzzer (many registry entries)
@settings(max_examples=60, **SETTINGS)
@given(name=st.sampled_from(fuzz.ENTRIES), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_registry_entries_never_crash_import(name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_entry(text, os.path.join(fuzz.SPECS_DIR, name))
    assert not outcome.startswith("internal"), outcome


@settings(max_examples=150, **SETTINGS)
@given(seed=st.integers(0, 2**32))
def test_fuzzed_convert_parameters_never_crash(seed):
    params, options = fuzz.convert_case(random.Random(seed))
    outcome = fuzz.run_convert(params, options)
    assert not outcome.startswith("internal"), (params, options, outcome)


@settings(max_examples=60, **SETTINGS)
@given(kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_verification_results_never_crash(scratch, kind, seed):
    outcome = fuzz.run_verify_json(fuzz.mutate(fuzz.verify_json(), kind, random.Random(seed)), scratch)
    assert not outcome.startswith("internal"), outcome


@pytest.mark.slow  # the fuzzer (many inference arguments)
@settings(max_examples=12, **SETTINGS)
@given(seed=st.integers(0, 2**32))
def test_fuzzed_infer_arguments_never_crash(scratch, seed):
    args = fuzz.infer_case(random.Random(seed), scratch)
    outcome = fuzz.run_infer(args, scratch)
    assert not outcome.startswith("internal"), (args, outcome)


@pytest.mark.slow  # the fuzzer (mutated specs through verify)
@settings(max_examples=8, **SETTINGS)
@given(name=st.sampled_from(fuzz.SPECS), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_specs_never_crash_verify(name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_verify(text, os.path.join(fuzz.SPECS_DIR, name), seed)
    assert not outcome.startswith("internal"), outcome


@pytest.mark.parametrize("kind", sorted(set(fuzz.DATA_KINDS)))
def test_every_hostile_data_generator_is_refused_or_read_right(scratch, kind):
    """Each generator of hostile data sources (issue 29), a few seeds each: refused when it must
    be (a loop, a device, an odd type, a ragged row), read with the right rows when not."""
    for seed in range(4):
        outcome = fuzz.run_data(kind, random.Random(f"{kind}:{seed}"), scratch)
        assert outcome == ("ok" if kind in ("folder-link", "bidi-report") else "user-error"), outcome


def test_the_data_oracle_catches_hostile_data_that_is_read(scratch, monkeypatch):
    import dpspec.check.sources

    def unguarded(path):  # the walk before issue 29: links to folders silently skipped, loops never seen
        return sorted(os.path.relpath(os.path.join(root, f), path) for root, _, files in os.walk(path) for f in files)

    monkeypatch.setattr(dpspec.check.sources, "data_files", unguarded)
    outcome = fuzz.run_data("folder-loop", random.Random(1), scratch)
    assert outcome == "internal: hostile data (folder-loop) was read instead of refused", outcome


def test_the_bidi_oracle_catches_a_control_that_reaches_a_report(scratch, monkeypatch):
    import dpspec.report.model

    monkeypatch.setattr(dpspec.report.model, "neutral", lambda model: model)  # the isolation removed
    outcome = fuzz.run_data("bidi-report", random.Random(3), scratch)
    assert outcome.startswith("internal: AssertionError: a bidi control reached"), outcome


@pytest.mark.parametrize("seed", range(4))
def test_the_third_round_generators_find_nothing(scratch, seed):
    """Line ends, malformed language-server frames and doctored release numbers (issue 43): each
    generator's oracle holds, a few seeds each."""
    rng = random.Random(seed)
    assert fuzz.run_line_ends(rng.choice(fuzz.SPECS), rng) == "ok"
    assert fuzz.run_frames(rng) == "ok"
    assert fuzz.run_release_values(rng, scratch) == "user-error"


def test_the_line_end_oracle_catches_a_bare_cr_read_as_one_line(monkeypatch):
    import dpspec.line_ends

    monkeypatch.setattr(dpspec.line_ends, "normal", lambda text: text)  # the language before issue 43
    outcomes = {fuzz.run_line_ends("acs_ma_vision_rr.dps", random.Random(i)) for i in range(3)}
    assert any(o.startswith("internal") for o in outcomes), outcomes


def test_the_terminal_oracle_catches_a_raw_escape(mirror, monkeypatch):
    import dpspec.report.terminal

    monkeypatch.setattr(dpspec.report.terminal, "terminal_text", lambda text: str(text))  # the marking removed
    text = fuzz.original("acs_ma_vision_rr.dps").replace('spec "', 'spec "\x1b]0;x\x07', 1)
    assert fuzz.run_cli(text, "acs_ma_vision_rr.dps", mirror, False).startswith("internal: dpspec show printed a raw")


@pytest.mark.parametrize("command", ["compile-full-disk", "audit-full-disk"])
def test_a_full_disk_under_a_writer_is_the_machines_and_leaves_nothing(scratch, command, monkeypatch):
    assert fuzz.run_writer(command, "elsewhere", scratch) == "user-error"
    import dpspec.cli.errors

    monkeypatch.setattr(dpspec.cli.errors, "_MACHINE", set())  # the classification before issue 43: exit 3
    assert fuzz.run_writer(command, "elsewhere", scratch).startswith("internal: dpspec")
