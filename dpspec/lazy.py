"""Heavy modules on first use: numpy, so that `dpspec check`, which builds schemas, budgets and
plans but no array, does not pay its import time; and the libraries of optional extras (pyspark,
pygls), which a light install does not have, with an error that names the extra to install."""

from __future__ import annotations

import importlib

from dpspec.errors import DpspecError


class MissingExtra(DpspecError):
    """A command needs a library that only one of dpspec's optional extras installs."""


def require(name: str, extra: str, purpose: str):
    """The module `name`, imported; if it is not installed, a MissingExtra saying what to install,
    so a light install (`pip install dpspec`) meets a sentence, not a traceback."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtra(
            f"error: {purpose} needs {name.split('.')[0]}, which is not installed here: run "
            f"pip install 'dpspec[{extra}]' ({exc})"
        ) from None


class LazyModule:
    """Stands for a module until an attribute is read, then imports it and takes its place in
    the caller's globals, so later reads cost nothing extra. Assigned at module level
    (`np = LazyModule("numpy", "np", globals())`), it is an import the layer test sees.

    extra, purpose: the module belongs to an optional extra; if it is not installed, the first
    read raises MissingExtra naming the extra to install (as `require`)."""

    def __init__(self, name: str, alias: str, namespace: dict, extra: str | None = None, purpose: str | None = None):
        self._name, self._alias, self._namespace = name, alias, namespace
        self._extra, self._purpose = extra, purpose

    def __getattr__(self, attr):
        if self._extra is None:
            module = importlib.import_module(self._name)
        else:
            module = require(self._name, self._extra, self._purpose or self._name)
        self._namespace[self._alias] = module
        return getattr(module, attr)
