"""The versioned plugin contract (issue 27 item 1): a plugin written against dpspec 0.1's contract
and one written against today's both load when installed; 0.1's import paths warn once per
plugin, naming the new import; a plugin declaring an API this dpspec does not serve is refused
by name and version, not by an import crash; `dpspec.api` serves no CLI helper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = {
    "legacy01": os.path.join(HERE, "contract_plugins", "legacy01"),
    "future": os.path.join(HERE, "contract_plugins", "future"),
    "geometric": os.path.join(HERE, "thirdparty_plugin"),
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The three plugins built offline and installed into one folder (`pip install --target`): a
    real installation, entry points and all, seen through PYTHONPATH."""
    root = tmp_path_factory.mktemp("plugins")
    sources = [shutil.copytree(src, root / name) for name, src in PLUGINS.items()]  # builds leave the checkout alone
    target = root / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--target",
            str(target),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    return target


def dpspec(site, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "dpspec.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow  # three plugins built and installed (the module's `installed`)
def test_both_contracts_load_and_the_old_one_warns_once_naming_the_new_imports(installed):
    out = dpspec(installed, "plugins", "--json")
    assert out.returncode == 0, out.stderr
    listed = {m["name"]: m for m in json.loads(out.stdout)}
    assert listed["legacy_count"]["package"] == "dpspec-legacy01"  # 0.1's contract
    assert listed["geometric_count"]["package"] == "dpspec-geometric"  # today's, DPSPEC_API = "1.1"
    lines = [x for x in out.stderr.splitlines() if "DeprecationWarning" in x]
    assert all(x.startswith("warning: plugin 'legacy01': ") for x in lines), out.stderr
    for old, new in [
        ("dpspec.hookspecs import hookimpl", "from dpspec.api import hookimpl"),
        ("dpspec.mechanism import Mechanism", "from dpspec.api import Mechanism"),
        ("dpspec.noise import discrete_laplace", "from dpspec.api import discrete_laplace"),
    ]:
        (line,) = [x for x in lines if f"`from {old}`" in x]  # once, not once per use
        assert new in line
    assert any("dpspec.cli_errors import friendly" in x and "drop the decorator" in x for x in lines)


@pytest.mark.slow  # the installed plugins
def test_old_contract_plugin_compiles_a_spec_and_its_command_runs(installed, small_spec, tmp_path):
    text = small_spec.read_text()
    text = text.replace(
        "mechanism randomized_response { table: people  column: smoker  p: 3/4 }",
        "mechanism legacy_count { table: people  epsilon: 1/2 }",
    )
    text = text.replace("unit people : hamming", "unit people : symdiff").replace("count people\n", "")
    text = text.replace("budget epsilon <= 1.1", "budget epsilon <= 0.5").replace(
        "output responses\n  output estimate", "output count"
    )
    small_spec.write_text(text)
    out = dpspec(installed, "compile", str(small_spec), "-o", str(tmp_path / "out"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mechanism: legacy_count 0.1.0" in out.stdout
    assert out.stderr.count("`from dpspec.mechanism import Mechanism`") == 1
    hello = dpspec(installed, "legacy-hello")
    assert hello.returncode == 0 and hello.stdout.strip() == "hello from dpspec-legacy01", hello.stderr


@pytest.mark.slow  # the installed plugins
def test_a_plugin_for_an_api_not_served_is_refused_by_version_not_by_a_crash(installed, small_spec):
    from dpspec.api import API_VERSION

    out = dpspec(installed, "plugins")
    assert out.returncode == 0
    (line,) = [x for x in out.stderr.splitlines() if "'future'" in x]
    assert "needs dpspec plugin API 9.0, newer than this dpspec" in line and f"(API {API_VERSION})" in line
    assert "ImportError" not in line and "upgrade dpspec" in line
    text = small_spec.read_text().replace("mechanism randomized_response {", "mechanism from_the_future {")
    small_spec.write_text(text)
    checked = dpspec(installed, "check", str(small_spec))
    assert checked.returncode == 1 and "unknown mechanism 'from_the_future'" in checked.stderr
    assert "plugin 'future' failed to load: it needs dpspec plugin API 9.0" in checked.stderr
    assert "Traceback" not in checked.stderr


@pytest.mark.parametrize(
    "declared, words",
    [
        ("1.0", None),
        ("1.1", None),
        ("1.3", None),
        ("1.4", None),
        ("1.5", None),
        ("1.6", None),
        ("1.7", None),
        ("1.8", "newer than this dpspec"),
        ("2.0", "newer than this dpspec"),
        ("0.9", "no longer serves"),
        ("one", "not a plugin API version"),
        (1.1, "not a plugin API version"),
    ],
)
def test_which_declared_versions_are_served(declared, words):
    from dpspec.contract.versions import served

    refused = served(declared)
    assert (refused is None) if words is None else (words in refused)


def test_the_api_serves_no_cli_helper_but_old_users_still_get_it_with_a_warning():
    import dpspec.api as api

    assert "friendly" not in api.__all__
    homes = {name: (where if isinstance(where, str) else where[0]) for name, where in api._WHERE.items()}
    assert set(homes) | {"API_VERSION", "OLDEST_SERVED"} == set(api.__all__)
    assert not [n for n, home in homes.items() if home.startswith("dpspec.cli")]  # nothing from the CLI layer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert callable(api.friendly)
    assert "drop the decorator" in str(caught[0].message) and caught[0].category is DeprecationWarning


def test_old_module_paths_are_the_new_objects():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from dpspec.hookspecs import hookimpl
        from dpspec.mechanism import Mechanism
    from dpspec.api import Mechanism as NewMechanism, hookimpl as new_hookimpl

    assert Mechanism is NewMechanism and hookimpl is new_hookimpl  # isinstance checks keep working
    assert [str(w.message).split("`")[1] for w in caught] == [
        "from dpspec.hookspecs import hookimpl",
        "from dpspec.mechanism import Mechanism",
    ]
    with pytest.raises(ImportError):
        from dpspec.mechanism import NeverExisted  # noqa: F401
