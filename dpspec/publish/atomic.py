"""Atomic output: write to a temporary file in the same directory, then rename over the target.

A reader never sees a half-written release, and an interrupted run leaves the previous files.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager

from dpspec.errors import DpspecError


class NotAFileTarget(DpspecError):
    """The output path names a device, pipe, socket or folder: replacing it is never what was meant."""


def _file_target(target: str) -> str:
    """Where to write: links followed (a link keeps pointing at the new file), and only ever a
    regular file or a new name. Renaming over `/dev/null` as root would replace the device for
    every process on the machine; `-o /dev/stdout` would replace the link."""
    if not os.path.lexists(target):
        return target
    real = os.path.realpath(target)
    try:
        mode = os.stat(real).st_mode
    except OSError:  # a dangling link: write the file it names
        return real
    if not stat.S_ISREG(mode):
        raise NotAFileTarget(
            f"error: {target} is not a regular file (a device, pipe or folder); dpspec writes its "
            "output as a new file and will not replace it (leave out -o to print to standard output)"
        )
    return real


def _replaced(target: str) -> os.stat_result | None:
    """The file `target` replaces (None for a new name). A hard-linked file is refused: a rename
    gives this name a new file and leaves the other names on the old one, silently apart."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    if info.st_nlink > 1:
        raise NotAFileTarget(
            f"error: {target} has {info.st_nlink} hard links; replacing it would leave the other "
            "names holding the old contents. Write to a new name (or remove the other links) instead"
        )
    return info


def _keep_owner_and_mode(tmp: str, before: os.stat_result | None) -> None:
    """The new file gets the replaced file's mode and owner (a 0600 spec stays 0600), or the
    usual mode for a new file; an owner this process cannot give it is refused, not changed."""
    if before is None:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; new outputs get the usual mode
        return
    os.chmod(tmp, stat.S_IMODE(before.st_mode))
    now = os.stat(tmp)
    if (now.st_uid, now.st_gid) != (before.st_uid, before.st_gid):
        try:
            os.chown(tmp, before.st_uid, before.st_gid)
        except PermissionError:
            raise NotAFileTarget(
                "error: the file to replace belongs to another user or group, which this process "
                "cannot give the new file; write to a new name instead"
            ) from None


@contextmanager
def atomic_path(target: str):
    """Yield a temporary path next to `target`; on success it replaces `target` atomically,
    keeping the mode and owner of the file it replaces."""
    target = _file_target(target)
    directory = os.path.dirname(os.path.abspath(target)) or "."
    os.makedirs(directory, exist_ok=True)
    _replaced(target)  # refused before any work
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(target), dir=directory)
    os.close(fd)
    try:
        yield tmp
        _keep_owner_and_mode(tmp, _replaced(target))  # as the file is now, just before the swap
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(target: str, text: str) -> None:
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
