"""Read a release directory written by `dpspec compile`: its manifest and published tables.

Why the manifest: it names every published table and the spec's hash, so inference can refuse
a release that another spec produced instead of silently pairing the wrong likelihood with it.
"""

from __future__ import annotations

import os

import attrs
import numpy as np
import pandas as pd

from dpspec.errors import DpspecError, MechanismError
from dpspec.language.exact_input import strict_json
from dpspec.language.reading import require_regular
from dpspec.schemas import refuse_newer
from dpspec.run.key_check import check_read_keys

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
            raise InferError(
                f"{path}: holds the reports of `dpspec {manifest['command']}`, not a release; "
                "give the output directory of `dpspec compile`"
            )
        listed = manifest["outputs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InferError(f"{man_path}: unreadable manifest ({exc})") from None

    refuse_newer("manifest", manifest, man_path, InferError)
    if spec_sha256 is not None and manifest.get("spec", {}).get("sha256") not in (None, spec_sha256):
        raise InferError(
            f"{path}: this release was produced by a different version of the spec "
            f"(its manifest records spec sha256 {manifest['spec']['sha256'][:12]}…); "
            "infer with the spec that produced it"
        )
    outputs = {}
    for name, entry in listed.items():
        file = os.path.join(path, os.path.basename(str(entry.get("file", ""))))
        try:
            require_regular(file)  # a table linked to /dev/zero would be read until memory runs out
            outputs[name] = (
                pd.read_parquet(file) if file.endswith(".parquet") else pd.read_csv(file, keep_default_na=False)
            )
        except (OSError, ValueError) as exc:
            raise InferError(f"{file}: cannot read the published table '{name}' ({exc})") from None
        _refuse_non_finite(file, outputs[name])
    return LoadedRelease(path, manifest, outputs)


# Integers beyond 2^53 are not exact as floats, and no count or cell index comes near it.
_LARGEST = 2**53
_NUMBER = r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|nan|inf|infinity)"


def _refuse_non_finite(file: str, frame: pd.DataFrame) -> None:
    """A published number that is NaN, infinite or beyond any count is refused, naming its row:
    a measurement of inf would make a posterior of 10^17 persons, a NaN would propagate silently."""
    for column in frame.columns:
        values = frame[column]
        if values.dtype.kind == "O":  # numbers pandas could not hold (10^20) and 'nan' / 'inf' stay text
            text = values.astype(str).str.strip()
            if not text.str.fullmatch(_NUMBER, case=False).all():
                continue  # a text column (categories, geocodes)
            values = pd.Series([float(t) for t in text], index=values.index)
        if values.dtype.kind not in "iuf":
            continue
        as_float = values.to_numpy(dtype=float)
        bad = ~np.isfinite(as_float) | (np.abs(np.nan_to_num(as_float)) > _LARGEST)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InferError(
                f"{file}: column '{column}', row {row + 2}: {frame[column].iloc[row]!r} is not a finite "
                f"number within the range a release holds (at most 2^53 in magnitude); this is not a "
                "release dpspec compile wrote"
            )


def validate_release(release: LoadedRelease, mechanism, spec, params: dict) -> None:
    """The release holds what the spec says it must, before any likelihood reads it: every column
    its mechanism's `release_columns` names for a table, each measured cell once, the published
    numbers finite and within 2^53, and the values the spec implies (the noise variance). The one
    check of a release read back; an InferError names the file, the row and the column."""
    for name, schema in mechanism.release_columns(spec, params).items():
        frame = release.outputs.get(name)
        if frame is None:
            continue  # not published: the likelihood says it cannot condition on this release
        file = _file_of(release, name)
        missing = [c for c in schema.columns if c not in frame.columns]
        if missing:
            raise InferError(
                f"{file}: the published table '{name}' has no column '{missing[0]}', which mechanism "
                f"'{mechanism.name}' writes and reads back (it holds {', '.join(map(str, frame.columns))}); "
                "this is not a release dpspec compile wrote for this spec"
            )
        _refuse_non_finite(file, frame[[c for c in schema.numbers if c in frame.columns]])
        if schema.key:
            repeated = frame.duplicated(subset=list(schema.key), keep=False).to_numpy()
            if repeated.any():
                rows = np.flatnonzero(repeated)
                first = frame.iloc[rows[0]][list(schema.key)].astype(str).to_dict()
                again = next(r for r in rows[1:] if frame.iloc[r][list(schema.key)].astype(str).to_dict() == first)
                raise InferError(
                    f"{file}: rows {rows[0] + 2} and {again + 2} both hold the cell {first} (columns "
                    f"{', '.join(schema.key)}); each measured cell appears once in a release (a repeated "
                    "measurement would count as independent evidence)"
                )
        if schema.implied is not None:
            for column, agrees in schema.implied(frame).items():
                bad = ~np.asarray(agrees, dtype=bool)
                if bad.any():
                    row = int(np.flatnonzero(bad)[0])
                    raise InferError(
                        f"{file}: column '{column}', row {row + 2}: {str(frame[column].iloc[row])!r} is not the "
                        f"value the spec implies for that row (mechanism '{mechanism.name}'); the release "
                        "was changed, or another spec produced it"
                    )
    try:  # one row per declared cell, as compile held the release to (the declared key sets)
        check_read_keys(
            spec, mechanism, params, release.outputs, lambda name: f"{_file_of(release, name)}: the table '{name}'"
        )
    except MechanismError as exc:
        raise InferError(str(exc)) from None


def _file_of(release: LoadedRelease, name: str) -> str:
    entry = release.manifest["outputs"].get(name) or {}
    return os.path.join(release.path, os.path.basename(str(entry.get("file", name))))


def checked_likelihoods(likelihoods, what: str) -> None:
    """Each released answer once, with a finite value and a positive finite variance, before any
    draw: a release whose measurements are each repeated 50 times would make the posterior 50
    times too sure."""
    for lik in likelihoods:
        value = np.asarray(lik.value, dtype=float)
        variance = np.asarray(lik.variance, dtype=float)
        label = lik.description or "a released table"
        if not np.isfinite(value).all():
            raise InferError(f"{what}: {label}: a released value is not a finite number")
        if len(variance) != len(value) or not (np.isfinite(variance).all() and (variance >= 0).all()):
            raise InferError(f"{what}: {label}: every released value needs a finite noise variance, at least 0")
        cells = lik.cells
        if cells is not None and len(cells.columns) and len(cells) == len(value):
            repeated = cells.duplicated(keep=False)
            if repeated.any():
                first = cells[repeated].iloc[0].to_dict()
                raise InferError(
                    f"{what}: {label}: the cell {first} is released {int(cells.duplicated(keep=False).sum())} "
                    "times; each measured cell appears once in a release (a repeated measurement would "
                    "count as independent evidence)"
                )
