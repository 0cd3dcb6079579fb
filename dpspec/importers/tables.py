"""The tables of production strategies, query orderings and schemas, shipped as package data."""

from __future__ import annotations

import json
import os
from dpspec.importers.settings import problem

_HERE = os.path.join(os.path.dirname(__file__), "strategies")


def load(name: str) -> dict:
    with open(os.path.join(_HERE, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)


def lookup(table: dict, kind: str, setting) -> dict:
    """The entry `setting.value` names in `table[kind]`, or an error listing the known names."""

    entries = table[kind]
    name = str(setting.value).strip()
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise problem(
            setting,
            f"unknown {kind[:-1] if kind.endswith('s') else kind} {name!r}: dpspec's table of "
            f"production {kind} (dpspec/importers/strategies/) knows {known}",
        )
    return entries[name]
