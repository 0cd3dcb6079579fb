"""dpspec 0.1's import paths (plugin API 1.0), kept working with a DeprecationWarning.

dpspec 0.1 kept its modules at the package root, and plugins imported `dpspec.hookspecs`,
`dpspec.mechanism`, `dpspec.noise`, ... The core was since grouped by pipeline stage and
`dpspec.api` became the plugins' surface. A finder on `sys.meta_path` answers the old module
names with stand-ins whose every name resolves to its new home and warns, naming the import to
use instead; the plugin manager collects the warnings per plugin (`deprecations()`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from dpspec import api

# old module -> its new home (names are looked up there; `dpspec.api` is named when it has them)
MOVED = {
    "dpspec.hookspecs": "dpspec.contract.hookspecs",
    "dpspec.mechanism": "dpspec.contract.mechanism",
    "dpspec.plugins": "dpspec.contract.plugins",
    "dpspec.noise": "dpspec.run.noise",
    "dpspec.compiler": "dpspec.run.compiler",
    "dpspec.parser": "dpspec.language.parser",
    "dpspec.values": "dpspec.language.values",
    "dpspec.diagnostics": "dpspec.language.diagnostics",
    "dpspec.reading": "dpspec.language.reading",
    "dpspec.checker": "dpspec.check.checker",
    "dpspec.data": "dpspec.check.data",
    "dpspec.invariants": "dpspec.check.invariants",
    "dpspec.cli_errors": "dpspec.cli.errors",
}
REMOVED_IN = "dpspec plugin API 2.0"


def new_import(old: str, name: str) -> str:
    """The import a plugin should write instead of `from <old> import <name>`."""

    if name in api.__all__:
        return f"from dpspec.api import {name}"
    if name == "friendly":
        return "nothing: dpspec wraps the commands a plugin adds itself (drop the decorator)"
    return f"from {MOVED[old]} import {name} (internal: ask for it in dpspec.api)"


class _Moved(types.ModuleType):
    """An old module name: each attribute comes from the new module, with a warning."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        target = importlib.import_module(MOVED[self.__name__])
        value = getattr(target, name)  # AttributeError as usual for a name that never existed
        warnings.warn(
            f"`from {self.__name__} import {name}` is deprecated (dpspec 0.1's path, removed in "
            f"{REMOVED_IN}); use {new_import(self.__name__, name)}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    def __dir__(self):
        return dir(importlib.import_module(MOVED[self.__name__]))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return _Moved(spec.name)

    def exec_module(self, module):
        module.__doc__ = f"Deprecated: dpspec 0.1's {module.__name__}; see {MOVED[module.__name__]} and dpspec.api."


def install() -> None:
    """Answer the old names (idempotent; dpspec/__init__ calls it, so any `import dpspec.x` finds them)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
