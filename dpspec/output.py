"""Write a compiled result into an output directory: published tables, manifest, reports.

Every file is written atomically; the confidential inputs are only ever read. Internal
(utility) figures go to a separately named report so the public one never carries them.
"""
from __future__ import annotations

import json
import os
import platform

import numpy as np

from dpspec import __version__, ir
from dpspec.atomic import write_frame, write_text

LARGE_ROWS = 500_000  # larger tables are written as Parquet


def _table_filename(name: str, frame) -> str:
    return f"{name}.parquet" if len(frame) > LARGE_ROWS else f"{name}.csv"


def seed_policy(seed) -> dict:
    if seed is None:
        return {"seeded": False, "source": "ChaCha20 (cryptographically secure) keyed with 256 bits of operating-system entropy"}
    return {"seeded": True, "seed": int(seed),
            "warning": "a known seed lets anyone reproduce the noise and remove it: this release is NOT protected"}


def manifest(result, files: dict) -> dict:
    mech = result.mechanism
    package, package_version = getattr(mech, "_dpspec_package", ("?", "?"))
    return {
        "dpspec_version": __version__,
        "spec": {"path": os.path.basename(result.spec.path or "<text>"), "title": result.spec.title, "sha256": result.spec_hash},
        "data": {os.path.basename(k): {"sha256": v} for k, v in result.data_hashes.items()},
        "mechanism": {"name": mech.name, "version": mech.version, "package": package, "package_version": package_version,
                      "parameters": ir.to_jsonable(result.checked.params)},
        "seed_policy": seed_policy(result.seed),
        "runs": result.runs,
        "outputs": files,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def write_result(result, outdir: str) -> dict:
    """Write everything; returns {kind: path}."""
    from dpspec.input_guard import check_output_target, input_paths
    from dpspec.report import render_all

    check_output_target(outdir, input_paths(result.spec))
    os.makedirs(outdir, exist_ok=True)
    files = {}
    for name, frame in result.published.items():
        filename = _table_filename(name, frame)
        write_frame(os.path.join(outdir, filename), frame)
        files[name] = {"file": filename, "rows": int(len(frame))}
    written = {"outputs": files}
    for kind, (filename, text) in render_all(result, outcome=result.audit_outcome).items():
        write_text(os.path.join(outdir, filename), text)
        written[kind] = filename
    man = manifest(result, files)
    man["reports"] = {k: v for k, v in written.items() if k != "outputs"}
    write_text(os.path.join(outdir, "manifest.json"), json.dumps(man, indent=2, sort_keys=True) + "\n")
    written["manifest"] = "manifest.json"
    return written
