"""A command's report files as one output set: what `dpspec audit -o` and `dpspec infer -o` write.

The same machinery as a compile's release (`dpspec.publish.output_set`): staged beside the
target, swapped in whole, locked, leftovers cleaned, and a `manifest.json` naming the command,
what it read (by SHA-256) and every file with its SHA-256, so a reader can check the reports
are whole and belong together (an audit against one baseline, draws of one posterior).
"""

from __future__ import annotations

import os

from dpspec._version import __version__
from dpspec.ir import spec_sha256
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_data = LazyModule("dpspec.check.data", "_data", globals())
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_table_csv = LazyModule("dpspec.publish.table_csv", "_table_csv", globals())


def spec_entry(spec) -> dict:
    """A spec read by the command, as the manifest names it (the same identity compile records)."""

    return {"path": os.path.basename(spec.path or "<text>"), "title": spec.title, "sha256": spec_sha256(spec)}


def file_entry(path: str) -> dict:
    """Any other input file (a verification result), by name and SHA-256."""
    return {"path": os.path.basename(path), "sha256": _data.file_sha256(path)}


def write_report_set(outdir: str, command: str, files: dict, fields: dict) -> dict:
    """Write `files` ({kind: (filename, text or DataFrame)}) and the manifest as one set; returns
    {kind: filename} including "manifest". `fields` go into the manifest beside `files`."""
    with _output_set.output_set(outdir, command) as staged:
        for filename, content in files.values():
            if isinstance(content, str):
                _output_set.stage_text(staged, filename, content)
            else:  # a table: CSV, as every table dpspec writes (and through its one writer)
                _table_csv.write_table_csv(content, os.path.join(staged, filename))
        reports = {kind: filename for kind, (filename, _) in files.items()}
        _output_set.write_manifest(
            staged, {"dpspec_version": __version__, "command": command, **fields, "reports": reports}
        )
    return {**reports, "manifest": _output_set.MANIFEST}
