"""The wheel carries the grammar and every built-in plugin, registered by entry points."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from tests.test_installed_package import _clean_copy


@pytest.mark.slow  # builds a wheel
def test_wheel_ships_grammar_and_plugins(tmp_path):
    # From a copy: a build in the checkout would leave build/ and dpspec.egg-info there, and pip
    # then takes a checkout on PYTHONPATH for an installed dpspec (tests/test_installed_package.py).
    source = _clean_copy(str(tmp_path / "src"))
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "wheel"),
            source,
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "wheel").glob("dpspec-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(zf.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "dpspec/grammar/dps.lark" in names
    assert "dpspec/registry/schema/deployments-schema.yaml" in names  # the registry schema export/import validate with
    from dpspec.schemas import FORMAT_VERSIONS

    assert {f"dpspec/schemas/{kind}.schema.json" for kind in FORMAT_VERSIONS} <= names  # every JSON output's schema
    assert {"dpspec_swap/schemas/epsilon.schema.json", "dpspec_swap/schemas/whatif.schema.json"} <= names
    for plugin in (
        "dpspec_rr/__init__.py",
        "dpspec_swap/__init__.py",
        "dpspec_topdown/__init__.py",
        "dpspec_declared/__init__.py",
    ):
        assert plugin in names
    assert "[dpspec]" in entry_points and "randomized_response = dpspec_rr" in entry_points
    assert "dpspec = dpspec.cli.main:main" in entry_points
