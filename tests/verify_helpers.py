"""Helpers for the verifier's tests: register extra (often deliberately broken) mechanisms in
process, and write specs beside their data."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import types

from dpspec.contract import plugins
from dpspec.contract.hookspecs import hookimpl

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.contextmanager
def registered(*mechanisms, name="verify-test-mechanisms"):
    """The given Mechanism instances are installed for the duration of the block."""
    plugin = types.SimpleNamespace(dpspec_mechanisms=hookimpl(lambda: list(mechanisms)))
    pm = plugins.manager()
    pm.register(plugin, name=name)
    plugins.mechanisms.cache_clear()
    try:
        yield
    finally:
        pm.unregister(plugin)
        plugins.mechanisms.cache_clear()


def third_party_module():
    """The third-party plugin package of tests/thirdparty_plugin, imported from its source."""
    path = os.path.join(HERE, "thirdparty_plugin", "dpspec_geometric", "__init__.py")
    spec = importlib.util.spec_from_file_location("dpspec_geometric_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_spec(tmp_path, text: str, csv: str | None = None, name: str = "v.dps"):
    if csv is not None:
        (tmp_path / "people.csv").write_text(csv)
    path = tmp_path / name
    path.write_text(text)
    return str(path)
