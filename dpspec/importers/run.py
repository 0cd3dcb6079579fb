"""One entry point for the configuration importers: read, convert, and check the spec before it is written."""
from __future__ import annotations

import os


def import_config(kind: str, path: str, output: str | None = None) -> tuple[str, list[str]]:
    """(spec text, stderr lines). The text is parsed and checked as if written at `output`, so a
    spec the checker refuses is never written (the refusal is a bug of the importer's mapping)."""
    if kind == "das":
        from dpspec.importers.das import import_das as convert
    elif kind in ("safetab-p", "safetab-h"):
        from dpspec.importers.safetab import importer

        convert = importer(kind)
    elif kind == "phsafe":
        from dpspec.importers.phsafe import import_phsafe as convert
    else:
        raise ValueError(kind)
    text, notes, _ = convert(path)
    _check(text, output or os.path.join(os.getcwd(), "imported.dps"))
    return text, notes


def _check(text: str, where: str) -> None:
    from dpspec.check.checker import check
    from dpspec.language.parser import parse

    check(parse(text, os.path.abspath(where)))
