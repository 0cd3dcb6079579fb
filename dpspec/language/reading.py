"""Bounded reading: inputs are regular files, never devices, pipes or folders.

`/dev/zero` named as a spec, an include or a data source would otherwise be read until memory
runs out, and a FIFO would block forever on open; both are refused before a byte is read.
"""

from __future__ import annotations

import errno
import os
import stat


class NotRegularFile(OSError):
    """The path names a device, pipe, socket or folder."""


def require_regular(path: str) -> None:
    """Raise NotRegularFile unless `path` (symlinks followed) is a regular file; OSError if absent."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:  # a NUL byte in the path: no file can have that name
        raise OSError(errno.EINVAL, "the path holds a NUL byte", path) from None
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{path} is not a regular file")


def open_regular(path: str):
    """Open a regular file for binary reading, checking both before and after opening (no FIFO wait)."""
    require_regular(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a device between the checks
            raise NotRegularFile(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
