"""Read a release directory written by `dpspec compile`: its manifest and published tables.

Why the manifest: it names every published table and the spec's hash, so inference can refuse
a release that another spec produced instead of silently pairing the wrong likelihood with it.
"""
from __future__ import annotations

import json
import os

import attrs
import pandas as pd

from dpspec.errors import DpspecError
from dpspec.language.exact_input import strict_json
from dpspec.language.reading import require_regular

MAX_MANIFEST_BYTES = 50_000_000  # a manifest lists a release's files; hundreds of MB is not one


class InferError(DpspecError):
    """Inference cannot proceed: a target the release does not inform, no likelihood, a bad prior."""


@attrs.frozen
class LoadedRelease:
    path: str
    manifest: dict
    outputs: dict  # name -> DataFrame, as published


def load_release(path: str, spec_sha256: str | None = None) -> LoadedRelease:
    """The published tables of a release directory; InferError if it is not one."""
    man_path = os.path.join(path, "manifest.json")
    if not os.path.isdir(path):
        raise InferError(f"{path}: not a directory (give the output directory of `dpspec compile`)")
    if not os.path.isfile(man_path):
        raise InferError(f"{path}: no manifest.json here; is this the output directory of `dpspec compile`?")
    try:
        with open(man_path, encoding="utf-8") as fh:
            text = fh.read(MAX_MANIFEST_BYTES + 1)
        if len(text) > MAX_MANIFEST_BYTES:
            raise ValueError(f"larger than {MAX_MANIFEST_BYTES:,} characters")
        manifest = strict_json(text)
        if isinstance(manifest, dict) and manifest.get("command", "compile") != "compile":  # an audit's or infer's set
            raise InferError(f"{path}: holds the reports of `dpspec {manifest['command']}`, not a release; "
                             "give the output directory of `dpspec compile`")
        listed = manifest["outputs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InferError(f"{man_path}: unreadable manifest ({exc})") from None
    from dpspec.schemas import refuse_newer

    refuse_newer("manifest", manifest, man_path, InferError)
    if spec_sha256 is not None and manifest.get("spec", {}).get("sha256") not in (None, spec_sha256):
        raise InferError(f"{path}: this release was produced by a different version of the spec "
                         f"(its manifest records spec sha256 {manifest['spec']['sha256'][:12]}…); "
                         "infer with the spec that produced it")
    outputs = {}
    for name, entry in listed.items():
        file = os.path.join(path, os.path.basename(str(entry.get("file", ""))))
        try:
            require_regular(file)  # a table linked to /dev/zero would be read until memory runs out
            outputs[name] = pd.read_parquet(file) if file.endswith(".parquet") else pd.read_csv(file, keep_default_na=False)
        except (OSError, ValueError) as exc:
            raise InferError(f"{file}: cannot read the published table '{name}' ({exc})") from None
    return LoadedRelease(path, manifest, outputs)
