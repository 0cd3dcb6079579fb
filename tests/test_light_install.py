"""A light install: `pip install dpspec` pulls no Spark, OpenDP, documentation toolchain or
Jupyter, the main job runs without them, and a command that needs an extra says which to install.

A missing library is simulated in a subprocess by a meta-path finder that refuses to import it,
as an interpreter without it would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib

import pytest

pytestmark = pytest.mark.slow  # installs dpspec without its extras into fresh virtual environments

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as _fh:
    PROJECT = tomllib.load(_fh)["project"]

# Distributions of the optional extras, and the top-level modules they bring.
EXTRA_DISTRIBUTIONS = {
    "pyspark",
    "opendp",
    "mkdocs",
    "mkdocs-material",
    "pygments",
    "pygls",
    "lsprotocol",
    "ipykernel",
    "nbclient",
    "nbformat",
    "jupyter",
    "notebook",
    "jupyterlab",
    "pytest",
    "pytest-xdist",
    "piqp",
    "proxsuite",
    "osqp",
    "scikit-sparse",
}
EXTRA_MODULES = [
    "pyspark",
    "py4j",
    "opendp",
    "mkdocs",
    "material",
    "pygments",
    "pygls",
    "lsprotocol",
    "ipykernel",
    "IPython",
    "nbclient",
    "nbformat",
    "jupyter_client",
    "pytest",
    "xdist",
    "hypothesis",
    "piqp",
    "proxsuite",
    "osqp",
    "sksparse",
]


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower()


def without(modules, *argv, cwd=None) -> subprocess.CompletedProcess:
    """`dpspec ARGV` in a fresh interpreter in which `modules` cannot be imported."""
    script = textwrap.dedent(f"""
        import sys

        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {sorted(modules)!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Absent())
        from dpspec.cli.main import main
        main(sys.argv[1:], prog_name="dpspec")
    """)
    return subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=cwd or ROOT, timeout=120
    )


def test_the_core_dependencies_pull_no_spark_opendp_docs_toolchain_or_jupyter():
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert core & EXTRA_DISTRIBUTIONS == set()


def test_each_optional_library_has_its_extra_and_the_test_extra_pins_opendp():
    extras = {name: {_name(r) for r in reqs} for name, reqs in PROJECT["optional-dependencies"].items()}
    assert {"spark", "docs", "notebook", "lsp", "test"} <= set(extras)
    assert "pyspark" in extras["spark"] and "pygls" in extras["lsp"] and "mkdocs" in extras["docs"]
    assert {"ipykernel", "nbclient"} <= extras["notebook"]
    assert "opendp>=0.16,<0.17" in PROJECT["optional-dependencies"]["test"]
    assert extras["lsp"] | extras["docs"] | extras["notebook"] <= extras["test"]  # the suite needs them all


def test_check_budget_and_compile_run_when_no_extra_is_installed(tmp_path):
    rr = os.path.join(SPECS, "acs_ma_vision_rr.dps")
    for argv in (["check", rr], ["budget", rr], ["compile", rr, "-o", str(tmp_path / "out")]):
        res = without(EXTRA_MODULES, *argv)
        assert res.returncode == 0, (argv, res.stdout + res.stderr)
    assert (tmp_path / "out" / "manifest.json").is_file()


def test_the_spark_engine_names_the_spark_extra_when_pyspark_is_missing(tmp_path):
    res = without(
        ["pyspark", "py4j"],
        "compile",
        os.path.join(SPECS, "ma1940_swap.dps"),
        "--engine",
        "spark",
        "-o",
        str(tmp_path / "out"),
    )
    assert res.returncode == 2, res.stdout + res.stderr  # an engine that cannot start (dpspec.cli.errors.EXIT_CODES)
    assert "pip install 'dpspec[spark]'" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("missing", ["pygls", "lsprotocol"])
def test_the_language_server_names_the_lsp_extra_when_its_library_is_missing(missing):
    res = without([missing], "lsp")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"needs {missing}" in res.stderr and "pip install 'dpspec[lsp]'" in res.stderr
    assert "Traceback" not in res.stderr
