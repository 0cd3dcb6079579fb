"""Heavy modules (numpy) on first use, so that `dpspec check`, which builds schemas, budgets and
plans but no array, does not pay their import time (issue 12: the everyday path is fast)."""
from __future__ import annotations

import importlib


class LazyModule:
    """Stands for a module until an attribute is read, then imports it and takes its place in
    the caller's globals, so later reads cost nothing extra."""

    def __init__(self, name: str, alias: str, namespace: dict):
        self._name, self._alias, self._namespace = name, alias, namespace

    def __getattr__(self, attr):
        module = importlib.import_module(self._name)
        self._namespace[self._alias] = module
        return getattr(module, attr)
