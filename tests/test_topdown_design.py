"""TopDown's design is parsed once into a frozen object, and a run is handed its records, that
design and a frozen run context: a script calling `run_topdown` that way publishes what
`Mechanism.run` publishes for the same spec, data and key."""

from __future__ import annotations

import os

import attrs
import numpy as np
import pandas as pd
import pytest

from dpspec.api import RunContext as ApiRunContext
from dpspec.check.checker import check
from dpspec.language.parser import parse, read_source
from dpspec.check.data import load_data
from tests.conftest import SPECS

ACS = os.path.join(SPECS, "acs_ma_hispanic_topdown.dps")


def _checked(path):
    spec = parse(read_source(path), path)
    return spec, check(spec).params


def test_the_design_is_frozen_and_read_from_the_parameters():
    from dpspec_topdown.design import Design, design_from_spec

    spec, params = _checked(ACS)
    design = design_from_spec(spec, params)
    assert isinstance(design, Design)
    assert design.levels[0] == "nation" and list(design.levels[1:]) == list(spec.domain.geography.levels)
    assert design.rho == params["rho"] and design.level_shares == params["levels"]
    assert set(design.variables) == set(params["variables"])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        design.rho = 1


def test_the_run_context_and_the_records_are_frozen():
    from dpspec_topdown.run.context import Records, RunContext

    ctx = RunContext(np.random.default_rng(0), workers=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ctx.workers = 2
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Records(None).persons = 1


def test_run_topdown_from_its_three_objects_publishes_what_the_mechanism_publishes():
    from dpspec_topdown.design import design_from_spec
    from dpspec_topdown.plugin import TopDown
    from dpspec_topdown.run.context import RunContext
    from dpspec_topdown.run.inputs import read_records
    from dpspec_topdown.run.topdown import run_topdown

    spec, params = _checked(ACS)
    data, _ = load_data(spec)
    release = TopDown().run(spec, params, data, ApiRunContext(np.random.default_rng(5)))
    result = run_topdown(
        read_records(spec, params, data),
        design_from_spec(spec, params),
        RunContext(np.random.default_rng(5), workers=params.get("workers")),
    )
    theirs = pd.concat(list(release.outputs["measurements"].iter_chunks()), ignore_index=True)
    ours = pd.concat(list(result.measurements_table().iter_chunks()), ignore_index=True)
    pd.testing.assert_frame_equal(ours, theirs)
    assert len(ours) > 0
