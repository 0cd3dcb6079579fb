"""One entry point for the configuration importers: read, convert, check, then write the spec and its tables as a set."""

from __future__ import annotations

import os
import tempfile
from dpspec.importers.das import import_das
from dpspec.importers.safetab import import_safetab
from dpspec.importers.phsafe import import_phsafe
from dpspec.check.checker import check
from dpspec.language.parser import parse
from dpspec.publish.atomic import write_text
from dpspec.publish.input_guard import check_output_file


def import_config(kind: str, path: str, output: str) -> tuple[str, list[str], dict[str, bytes]]:
    """(spec text, stderr lines, {file beside the spec: bytes}). The spec is parsed and checked
    as if written at `output` (its tables staged in a scratch folder), so a spec the checker refuses
    is never written: that would be a bug of the importer's mapping."""
    stem = os.path.splitext(os.path.basename(output))[0] or "imported"
    if kind == "das":
        text, notes, figures = import_das(path)
    elif kind in ("safetab-p", "safetab-h"):
        text, notes, figures = import_safetab(kind, path, stem)
    elif kind == "phsafe":
        text, notes, figures = import_phsafe(path)
    else:
        raise ValueError(kind)
    files = figures.get("files", {})
    _check(text, files)
    return text, notes, files


def _check(text: str, files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory(prefix="dpspec-import-") as scratch:
        for name, data in files.items():
            with open(os.path.join(scratch, name), "wb") as f:
                f.write(data)
        check(parse(text, os.path.join(scratch, "imported.dps")))


def write_set(output: str, text: str, files: dict[str, bytes], inputs) -> list[str]:
    """Write the tables beside `output`, then the spec; on any failure nothing new is left. The
    spec is written last, so it never names a table that is not there."""

    folder = os.path.dirname(os.path.abspath(output))
    targets = {os.path.join(folder, name): data for name, data in files.items()}
    for target in targets:
        check_output_file(target, list(inputs))
    staged = []
    try:
        for target, data in targets.items():
            tmp = f"{target}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            staged.append((tmp, target))
        written = []
        for tmp, target in staged:
            os.replace(tmp, target)
            written.append(target)
        try:
            write_text(output, text)
        except BaseException:
            for target in written:
                os.unlink(target)
            raise
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return [*targets, output]
