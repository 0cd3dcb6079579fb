"""Inputs are sacred: refuse an output folder that could overwrite or displace an input.

An output set is swapped into its folder as a whole (see `dpspec.publish.output_set`), so a target that
is, or contains, a folder holding an input would move that input away; a target that is the
input's own folder, or inside it, would put release files among confidential inputs, one name
away from overwriting them (and a release is published from there). Paths
are compared after resolving symlinks, so a link to the data folder is caught too.
"""

from __future__ import annotations

import os

from dpspec.check.sources import input_paths  # noqa: F401 - the guard's inputs, read where sources are
from dpspec.errors import DpspecError


class UnsafeOutputError(DpspecError):
    """The output folder would write to, over or around a confidential input. `suggestion`, when
    set, is a folder that would be accepted (shown in the message)."""

    suggestion: str | None = None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _protected(inputs) -> list[tuple[str, str]]:
    """(input as the user named it, each folder holding it: as named and with links resolved)."""
    out = []
    for named in inputs:
        if "\x00" in named:  # names no file; reading it fails with a clear error later
            continue
        for path in _forms(named):
            out.append((named, os.path.dirname(path)))
    return out


def _forms(path: str) -> set[str]:
    """The path as named (absolute) and with its links resolved."""
    return {os.path.abspath(path), os.path.realpath(path)}


def check_output_target(outdir: str, inputs, folders=()) -> None:
    """Raise UnsafeOutputError unless writing into `outdir` leaves every input alone; the error
    names a folder that would be accepted, when one is near (see `suggest_output`).

    `folders` are inputs read as a whole (a release folder): the output may be neither inside
    one nor around one."""
    try:
        _check_target(outdir, inputs, folders)
    except UnsafeOutputError as error:
        if "\x00" in outdir:
            raise
        suggestion = suggest_output(outdir, inputs, folders)
        if suggestion is None:
            raise
        refused = UnsafeOutputError(f"{error}, for example -o {suggestion}")
        refused.suggestion = suggestion
        raise refused from None


def suggest_output(outdir: str, inputs, folders=()) -> str | None:
    """A folder of the same name that writing would leave every input alone in: beside (not
    inside) the outermost input folder the target falls in, else an `out` folder inside a target
    that holds inputs. Relative to the working directory when it lies below it; None if none."""
    name = os.path.basename(os.path.abspath(outdir)) or "out"
    guarded = [os.path.dirname(p) for named in inputs if "\x00" not in named for p in _forms(named)]
    guarded += [
        p
        for named in list(folders) + [i for i in inputs if "\x00" not in i and os.path.isdir(i)]
        if "\x00" not in named
        for p in _forms(named)
    ]
    target = os.path.abspath(outdir)
    around = sorted((g for g in guarded if _within(target, g)), key=len)  # outermost first
    beside = ("out", name) if name != "out" else ("out",)
    candidates = [os.path.join(os.path.dirname(g.rstrip(os.sep)) or os.sep, *beside) for g in around]
    candidates.append(os.path.join(target, "out", name) if name != "out" else os.path.join(target, "dpspec-out"))
    for candidate in candidates:
        try:
            _check_target(candidate, inputs, folders)
        except UnsafeOutputError:
            continue
        relative = os.path.relpath(candidate)
        return relative if not relative.startswith(os.pardir + os.sep + os.pardir) else candidate
    return None


def default_output(spec_file: str, inputs) -> tuple[str, str | None]:
    """`out/<spec name>` in the working directory, unless that lies among the inputs (run from
    inside the spec's folder): then the same name beside the spec's folder. Returns the folder
    and, when it moved, why (for the user)."""
    default = os.path.join("out", os.path.splitext(os.path.basename(spec_file))[0])
    try:
        _check_target(default, inputs)
    except UnsafeOutputError:
        moved = suggest_output(default, inputs)
        if moved is not None:
            return moved, (
                f"the default output folder {default} lies among the inputs (inside the spec's or the "
                f"data's folder); writing to {moved} instead"
            )
    return default, None


def _check_target(outdir: str, inputs, folders=()) -> None:
    if "\x00" in outdir:
        raise UnsafeOutputError(f"error: the output folder {outdir!r} holds a NUL byte")
    targets = _forms(outdir)
    # a data source that is a directory (partitioned Parquet) is read as a whole, like a folder
    folders = list(folders) + [p for p in inputs if "\x00" not in p and os.path.isdir(p)]
    for named in folders:
        if "\x00" in named:
            continue
        for folder in _forms(named):
            for target in targets:
                if _within(target, folder) or _within(folder, target):
                    raise UnsafeOutputError(
                        f"error: the output folder {outdir} {'is or is inside' if _within(target, folder) else 'contains'} "
                        f"the input folder {named}; refusing to write there. Choose a folder outside {named}"
                    )
    for named in inputs:
        if "\x00" in named:
            continue
        files = _forms(named)
        if targets & files:
            raise UnsafeOutputError(
                f"error: the output folder {outdir} is the input {named}; refusing to write over an input"
            )
    for named, folder in _protected(inputs):
        for target in targets:
            if _within(folder, target) or _within(target, folder):
                where = (
                    "is the folder holding"
                    if folder == target
                    else "contains"
                    if _within(folder, target)
                    else "is inside the folder holding"
                )
                raise UnsafeOutputError(
                    f"error: the output folder {outdir} {where} the input {named}; refusing to write there, "
                    f"since the output would overwrite, move or sit among the inputs. Choose a folder outside {folder}"
                )
    _check_identity(outdir, inputs, folders)


def _identity(path: str):
    """(device, inode) of what `path` names, links followed; None if it does not exist."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _chain(path: str) -> set:
    """The identities of `path` and of every existing folder above it, each as the kernel sees it:
    a second mount of a folder (a bind mount) has the folder's own device and inode."""
    out, here = set(), os.path.abspath(path)
    while True:
        ident = _identity(here)
        if ident is not None:
            out.add(ident)
        parent = os.path.dirname(here)
        if parent == here:
            return out
        here = parent


def _check_identity(outdir: str, inputs, folders) -> None:
    """The paths compared as strings cannot see a bind mount (`-o /mnt/again/out`, where /mnt/again
    is the spec's folder mounted twice): compare the folders themselves, by device and inode."""
    protected = [(named, named) for named in folders if "\x00" not in named]
    protected += [(named, os.path.dirname(os.path.abspath(named))) for named in inputs if "\x00" not in named]
    above = _chain(outdir)
    mine = _identity(outdir)
    for named, folder in protected:
        ident = _identity(folder)
        if ident is not None and ident in above:
            raise UnsafeOutputError(
                f"error: the output folder {outdir} is, or is inside, the folder holding the input {named} (the same "
                "folder reached by another path: a link or a second mount of it); refusing to write there. Choose a "
                f"folder outside {folder}"
            )
        if mine is not None and mine in _chain(folder):
            raise UnsafeOutputError(
                f"error: the output folder {outdir} contains the input {named} (reached by another path: a link or a "
                "second mount); refusing to write there"
            )


def check_output_file(output: str, inputs) -> None:
    """Raise UnsafeOutputError if writing the file `output` would replace one of `inputs`.

    Compared as named and with links resolved, so `-o link-to-the-spec.dps` is caught too; a
    link as output is replaced by the new file, but a hard-to-see link to an input is refused."""
    if "\x00" in output:
        raise UnsafeOutputError(f"error: the output path {output!r} holds a NUL byte")
    for named in inputs:
        same = _identity(output) is not None and _identity(output) == _identity(named)  # a hard link, a second mount
        if "\x00" not in named and (same or _forms(output) & _forms(named)):
            root, ext = os.path.splitext(output)
            other = f"{root}-new{ext}"  # beside it, unless that is an input too
            free = not any("\x00" not in i and _forms(other) & _forms(i) for i in inputs)
            refused = UnsafeOutputError(
                f"error: the output {output} is the input {named}; refusing to write over an "
                "input" + (f", for example -o {other}" if free else "")
            )
            refused.suggestion = other if free else None
            raise refused
