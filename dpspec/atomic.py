"""Atomic output: write to a temporary file in the same directory, then rename over the target.

A reader never sees a half-written release, and an interrupted run leaves the previous files.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager


@contextmanager
def atomic_path(target: str):
    """Yield a temporary path next to `target`; on success it replaces `target` atomically."""
    directory = os.path.dirname(os.path.abspath(target)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(target), dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
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


def write_frame(target: str, frame) -> None:
    """CSV or Parquet by the target's extension."""
    with atomic_path(target) as tmp:
        if target.endswith(".parquet"):
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
