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

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


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
    import dpspec.formatter

    monkeypatch.setattr(dpspec.formatter, "format_spec", lambda spec: 1 / 0)
    name = "acs_ma_vision_rr.dps"
    assert fuzz.run_api(fuzz.original(name), os.path.join(fuzz.SPECS_DIR, name), False).startswith("internal: ZeroDivisionError")


@pytest.mark.parametrize("kind", fuzz.KINDS)
def test_each_mutation_changes_the_text(kind):
    text = fuzz.original("acs_ma_vision_rr.dps")
    assert any(fuzz.mutate(text, kind, random.Random(i)) != text for i in range(5))


@settings(max_examples=150, **SETTINGS)
@given(name=st.sampled_from(fuzz.SPECS), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_specs_never_crash_the_api(name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_api(text, os.path.join(fuzz.SPECS_DIR, name), False)
    assert not outcome.startswith("internal"), outcome


@settings(max_examples=25, **SETTINGS)
@given(name=st.sampled_from(fuzz.SPECS), kind=st.sampled_from(fuzz.KINDS), seed=st.integers(0, 2**32))
def test_fuzzed_specs_never_crash_the_cli(mirror, name, kind, seed):
    text = fuzz.mutate(fuzz.original(name), kind, random.Random(seed))
    outcome = fuzz.run_cli(text, name, mirror, False)
    assert not outcome.startswith("internal"), outcome
