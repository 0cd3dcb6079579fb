"""A solver run in a forked child process, so that a crash in its native code is a failed solve.

Why: PIQP 0.7.0 died of a segmentation fault in its set-up on a fit of 722,829 variables
(qp_choice.RULE's comment). A signal cannot be caught in-process: in a solver worker it kills the
worker, in a compile the whole run, with no error of dpspec's own. A child started by ``fork``
shares the parent's memory copy-on-write, so the fit is not copied or pickled; only the answer
comes back through a pipe. Its arithmetic is the parent's, so the answer has the same bits
(tests/test_topdown_qp_choice.py). A child that dies, or exits without a whole answer, reports a
failed solve naming why, and the caller falls back to Clarabel as for any failure.
"""

from __future__ import annotations

import os
import signal
import struct

import numpy as np

_HEAD = struct.Struct("<?dqI")  # ok, seconds, answer length (-1: none), status length


def run_isolated(solver, *args):
    """``solver(*args)`` -> (ok, x, seconds, status), computed in a forked child; where the
    platform cannot fork, in this process."""
    if not hasattr(os, "fork"):
        return solver(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: solve, write the answer, leave without running the parent's exit code
        code = 1
        try:
            os.close(read_end)
            ok, x, seconds, status = solver(*args)
            body = np.ascontiguousarray(x, dtype=np.float64).tobytes() if x is not None else b""
            text = str(status).encode()
            size = len(body) // 8 if x is not None else -1
            _write_all(write_end, _HEAD.pack(bool(ok), float(seconds), size, len(text)) + text + body)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        data = _read_all(read_end)
    finally:
        os.close(read_end)
    _, wait_status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return False, None, 0.0, f"crashed ({name})"
    if os.WEXITSTATUS(wait_status) != 0 or len(data) < _HEAD.size:
        return False, None, 0.0, f"child exited with status {os.WEXITSTATUS(wait_status)}"
    ok, seconds, size, n_text = _HEAD.unpack_from(data)
    text = data[_HEAD.size : _HEAD.size + n_text].decode()
    body = data[_HEAD.size + n_text :]
    if size >= 0 and len(body) != 8 * size:
        return False, None, seconds, "child's answer was cut short"
    x = np.frombuffer(body, dtype=np.float64).copy() if size >= 0 else None
    return ok, x, seconds, text


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
