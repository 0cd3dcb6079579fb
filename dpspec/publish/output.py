"""Write a compiled result into an output directory: published tables, manifest, reports.

The whole set is swapped in at once (`dpspec.publish.output_set`); the confidential inputs are only ever read. Internal
(utility) figures go to a separately named report so the public one never carries them.
"""

from __future__ import annotations

import contextlib
import os
import platform

import numpy as np

from dpspec import ir
from dpspec._version import __version__
from dpspec.report.model import seed_policy
from dpspec.publish.input_guard import check_output_target, input_paths
from dpspec.report import render_all
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_certificate = LazyModule("dpspec.publish.certificate", "_certificate", globals())
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_table_csv = LazyModule("dpspec.publish.table_csv", "_table_csv", globals())


def _table_filename(name: str, frame) -> str:
    """One format whatever the row count, so a reader's pipeline never meets a surprise."""
    return f"{name}.csv"


def manifest(result, files: dict) -> dict:

    mech = result.mechanism
    package, package_version = getattr(mech, "_dpspec_package", ("?", "?"))
    return {
        "dpspec_version": __version__,
        "command": "compile",
        "spec": {
            "path": os.path.basename(result.spec.path or "<text>"),
            "title": result.spec.title,
            "sha256": result.spec_hash,
        },
        "data": {
            os.path.basename(k.rstrip("/")): {"sha256": v} for k, v in result.data_hashes.items()
        },  # a directory by its name
        "mechanism": {
            "name": mech.name,
            "version": mech.version,
            "package": package,
            "package_version": package_version,
            "parameters": ir.to_jsonable(result.checked.params),
        },
        "seed_policy": seed_policy(result.seed, result.mechanism),
        "runs": result.runs,
        "outputs": files,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def write_result(result, outdir: str, signers=()) -> dict:
    """Write the whole output set (releases, reports, manifest, certificate) in one swap; returns {kind: path}.

    The manifest lists every other file of the set with its SHA-256, so a reader can check that
    a set is whole (`dpspec.publish.output_set.verify_set`); the certificate, written last,
    covers the manifest too, with what ran, the exact budgets, the times and `signers`
    ((name, role) pairs: `compile --sign`)."""
    inputs = input_paths(result.spec)
    check_output_target(outdir, inputs)
    parted = any(getattr(t, "write_parts", None) is not None for t in result.published.values())
    # the folder actually written is checked too, and must still be where outdir leads at the swap
    with _output_set.output_set(outdir, guard=lambda target: check_output_target(target, inputs)) as staged:
        files = {}
        # a table the mechanism writes in parts: into a scratch folder beside the set, then joined
        with _output_set.scratch_beside(staged) if parted else contextlib.nullcontext() as scratch:
            for name, frame in result.published.items():
                filename = _table_filename(name, frame)
                rows = _table_csv.write_table_csv(
                    frame, os.path.join(staged, filename), scratch
                )  # streamed: chunks or parts
                files[name] = {"file": filename, "rows": rows}
        written = {"outputs": files}
        for kind, (filename, text) in render_all(result, outcome=result.audit_outcome).items():
            _output_set.stage_text(staged, filename, text)
            written[kind] = filename
        man = manifest(result, files)
        man["reports"] = {k: v for k, v in written.items() if k != "outputs"}
        _output_set.write_manifest(staged, man)
        written["manifest"] = _output_set.MANIFEST
        _certificate.write_certificate(result, staged, signers)
        written["certificate"] = _certificate.CERTIFICATE
    return written
