"""Plugin discovery: built-ins through entry points, and a separately packaged third party."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest
from click.testing import CliRunner

from dpspec.contract import plugins
from dpspec.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))


def test_builtin_mechanisms_come_from_entry_points():
    assert "randomized_response" in plugins.entry_points()
    mech = plugins.mechanisms()["randomized_response"]
    assert mech.version == "1.0.0"
    assert mech._dpspec_package[0] == "dpspec"


def test_core_never_imports_a_mechanism_by_name():
    core = os.path.join(os.path.dirname(HERE), "dpspec")
    for root, _, files in os.walk(core):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as fh:
                    text = fh.read()
                for plugin in ("dpspec_rr", "dpspec_swap", "dpspec_topdown"):
                    assert f"import {plugin}" not in text and f"from {plugin}" not in text, (name, plugin)


def test_plugins_json_lists_name_and_version():
    result = CliRunner().invoke(main, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    rr = next(m for m in listed if m["name"] == "randomized_response")
    assert rr["version"] == "1.0.0"
    assert {p["name"] for p in rr["parameters"]} == {"table", "column", "p", "positive"}
    assert next(p for p in rr["parameters"] if p["name"] == "p")["range"] == [0, 1]


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory):
    """A fresh virtual environment that sees this environment's packages (dpspec and its
    dependencies, through a .pth file) and has the third-party plugin installed into it."""
    root = tmp_path_factory.mktemp("venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    with open(os.path.join(site, "host-environment.pth"), "w") as fh:
        # addsitedir (not a bare path) so that this environment's own .pth files, such as an
        # editable install's, are processed too.
        fh.write(f"import site; site.addsitedir({ours!r})\n")
    wheels = root / "wheels"
    build = subprocess.run(  # built offline with this environment's setuptools
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
            str(wheels),
            os.path.join(HERE, "thirdparty_plugin"),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("dpspec_geometric-*.whl")
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    return python


def _dpspec(python, *args, cwd=None):
    return subprocess.run([str(python), "-m", "dpspec.cli.main", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.slow  # a fresh virtual environment with the plugin's wheel built and installed (the module's plugin_venv)
def test_third_party_plugin_is_discovered(plugin_venv):
    out = _dpspec(plugin_venv, "plugins", "--json")
    assert out.returncode == 0, out.stderr
    listed = {m["name"]: m for m in json.loads(out.stdout)}
    assert listed["geometric_count"]["version"] == "0.3.0"
    assert listed["geometric_count"]["package"] == "dpspec-geometric"
    assert "randomized_response" in listed


@pytest.mark.slow  # the plugin_venv
def test_third_party_plugin_adds_a_command(plugin_venv):
    out = _dpspec(plugin_venv, "geometric-hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello from dpspec-geometric"


def use_geometric_count(small_spec) -> None:
    """Rewrite the small spec to use the third-party mechanism (add/remove one, no invariant)."""
    text = small_spec.read_text()
    text = text.replace(
        "mechanism randomized_response { table: people  column: smoker  p: 3/4 }",
        "mechanism geometric_count { table: people  epsilon: 1/2 }",
    )
    text = text.replace("unit people : hamming", "unit people : symdiff").replace("count people\n", "")
    text = text.replace("budget epsilon <= 1.1", "budget epsilon <= 0.5").replace(
        "output responses\n  output estimate", "output count"
    )
    small_spec.write_text(text)


@pytest.mark.slow  # the plugin_venv
def test_third_party_mechanism_runs_in_a_spec(plugin_venv, small_spec):
    use_geometric_count(small_spec)
    out = _dpspec(plugin_venv, "budget", "--json", str(small_spec))
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["budget"] == {"premetric": "pure", "epsilon": 0.5}
    assert summary["bounds_hold"] is True
    # The plugin is not installed in this environment, so the same spec does not resolve here.
    assert "geometric_count" not in plugins.mechanisms()


@pytest.mark.slow  # the plugin_venv
def test_third_party_likelihood_reaches_dpspec_infer(plugin_venv, small_spec, tmp_path):
    """The plugin's own likelihood is used: infer gets past 'no likelihood' to the model, which
    needs a public total for its default prior (this spec publishes none) and says so."""
    use_geometric_count(small_spec)
    release = tmp_path / "release"
    _dpspec(plugin_venv, "compile", str(small_spec), "-o", str(release), "--seed", "1")
    out = _dpspec(plugin_venv, "infer", str(small_spec), str(release), "--target", "count people")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "no public total covers 'count people'" in out.stderr and "Traceback" not in out.stderr


def test_a_plugin_that_fails_to_import_is_reported_not_fatal(monkeypatch, small_spec):
    from importlib import metadata

    real = metadata.entry_points(group="dpspec")
    broken = metadata.EntryPoint(name="broken_mechanism", value="dpspec_no_such_module_xyz", group="dpspec")

    def entry_points(group=None):
        return list(real) + [broken] if group == "dpspec" else metadata.entry_points(group=group)

    def reset():
        plugins.manager.cache_clear()
        plugins.mechanisms.cache_clear()
        plugins._failures.clear()
        plugins._distributions.clear()

    monkeypatch.setattr(plugins.metadata, "entry_points", entry_points)
    reset()
    try:
        assert "randomized_response" in plugins.mechanisms()
        ((name, why),) = plugins.failures()
        assert name == "broken_mechanism" and "dpspec_no_such_module_xyz" in why
        result = CliRunner().invoke(main, ["check", str(small_spec)])
        assert result.exit_code == 0, result.output
        text = small_spec.read_text().replace("mechanism randomized_response", "mechanism broken_mechanism")
        small_spec.write_text(text)
        result = CliRunner().invoke(main, ["check", str(small_spec)])
        assert result.exit_code == 1
        assert "the plugin providing mechanism 'broken_mechanism' failed to load: ModuleNotFoundError" in result.output
    finally:
        monkeypatch.undo()
        reset()


@pytest.mark.slow  # the plugin_venv
def test_third_party_mechanism_is_verified_through_the_generic_path(plugin_venv, small_spec):
    """`dpspec verify` finds the installed plugin by its entry point and, as it supplies no
    neighbours, builds them from the domain (issue 14)."""
    use_geometric_count(small_spec)
    out = _dpspec(plugin_venv, "verify", "--runs", "1000", "--seed", "3", "--json", str(small_spec))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["verdict"] == "consistent" and result["neighbours"] == "generic"
    assert result["mechanism"] == {"name": "geometric_count", "version": "0.3.0"}
    assert result["claimed"] == 0.5 and 0 <= result["lower_bound"] <= 0.5
