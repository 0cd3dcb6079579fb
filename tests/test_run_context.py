"""A mechanism's run is given one `RunContext` (random source, engine, progress, keep_truths), not
arguments chosen by inspecting its signature; a plugin written before API 1.6 still runs, through
an adapter that warns and names the replacement."""

from __future__ import annotations

import importlib.util
import os
import warnings

import attrs
import numpy as np
import pandas as pd
import pytest

from dpspec.api import Mechanism, NativeFlavor, Release, RunContext
from dpspec.contract.mechanism import call_run, takes_engine
from dpspec.contract.plugins import mechanisms
from dpspec.engine import EngineRun, LocalEngine, run_mechanism

HERE = os.path.dirname(os.path.abspath(__file__))


def _legacy01():
    """The 0.1-era plugin of tests/contract_plugins (its run is `run(spec, params, data, rng)`),
    imported from its source."""
    path = os.path.join(HERE, "contract_plugins", "legacy01", "dpspec_legacy01", "__init__.py")
    spec = importlib.util.spec_from_file_location("dpspec_legacy01_under_test", path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # its 0.1 import paths warn; test_plugin_api asserts those
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)
    return module


class _Seen(Mechanism):
    """An API 1.1-style mechanism that names every optional argument and records what it got."""

    name = "seen_old_style"

    def __init__(self):
        self.got = {}

    def flavor(self, spec, params):
        return NativeFlavor("t", "symdiff", "pure")

    def run(self, spec, params, data, rng, engine=None, keep_truths=False):
        self.got = {"rng": rng, "engine": engine, "keep_truths": keep_truths}
        return Release(outputs={})


class _New(Mechanism):
    name = "seen_new_style"
    run_context = True

    def __init__(self):
        self.got = None

    def run(self, spec, params, data, ctx):
        self.got = ctx
        return Release(outputs={})


def test_a_plugin_written_to_the_old_signature_runs_through_the_adapter_with_a_warning_naming_the_new_one():
    legacy = _legacy01().LegacyCount()
    assert not legacy.run_context
    data = {"people": pd.DataFrame({"x": range(7)})}
    with pytest.warns(DeprecationWarning) as caught:
        release = run_mechanism(
            legacy, None, {"table": "people", "epsilon": 1}, data, np.random.default_rng(3), EngineRun(LocalEngine(), 5)
        )
    message = str(caught[0].message)
    assert "legacy_count" in message and "run_context = True" in message and "dpspec.api.RunContext" in message
    assert "removed in plugin API 2.0" in message
    # the same draw as the old direct call: the adapter hands it the random source unchanged
    direct = legacy.run(None, {"table": "people", "epsilon": 1}, data, np.random.default_rng(3))
    pd.testing.assert_frame_equal(release.outputs["count"], direct.outputs["count"])


def test_the_adapter_passes_engine_and_keep_truths_only_to_a_run_that_names_them():
    old, rng, run = _Seen(), np.random.default_rng(1), EngineRun(LocalEngine(), 9)
    with pytest.warns(DeprecationWarning, match="seen_old_style"):
        call_run(old, None, {}, {}, RunContext(rng, engine=run, keep_truths=True))
    assert old.got == {"rng": rng, "engine": run, "keep_truths": True}
    with pytest.warns(DeprecationWarning):  # no engine given: none is passed, as before
        call_run(old, None, {}, {}, RunContext(rng))
    assert old.got["engine"] is None and old.got["keep_truths"] is False
    legacy = _legacy01().LegacyCount()  # names neither: gets the random source alone
    with pytest.warns(DeprecationWarning):
        call_run(
            legacy,
            None,
            {"table": "t", "epsilon": 1},
            {"t": pd.DataFrame({"x": [1]})},
            RunContext(rng, engine=run, keep_truths=True),
        )
    assert takes_engine(old) and not takes_engine(legacy)


def test_a_mechanism_declaring_run_context_gets_the_one_object_and_no_warning():
    new, run = _New(), EngineRun(LocalEngine(), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_mechanism(new, None, {}, {}, np.random.default_rng(0), run, keep_truths=True)
    ctx = new.got
    assert isinstance(ctx, RunContext) and ctx.engine is run and ctx.keep_truths is True
    assert callable(ctx.progress)
    assert not takes_engine(new)  # it declares no use of the engine (`uses_engine`)


def test_the_run_context_is_frozen():
    ctx = RunContext(np.random.default_rng(0))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ctx.keep_truths = True


def test_every_built_in_mechanism_takes_the_context():
    """Every built-in mechanism is on API 1.6 (TopDown, the last, since its package layout);
    only the test plugins written to older APIs are left on the adapter."""
    old = sorted(
        name
        for name, m in mechanisms().items()
        if not m.run_context
        and type(m).__module__.split(".")[0].startswith("dpspec_")
        and type(m).__module__.split(".")[0] not in ("dpspec_legacy01", "dpspec_geometric")
    )
    assert old == []
    assert mechanisms()["topdown"].run_context and takes_engine(mechanisms()["topdown"])
