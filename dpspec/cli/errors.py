"""How every dpspec command, built-in or added by a plugin, reports failure.

User errors become a message and exit status 1; anything else is reported as a bug with exit
status 3 (never as a traceback), so a pipeline can tell a bad input from a broken tool. Plugins decorate their click commands with `friendly` too.
"""
from __future__ import annotations

import errno
import functools
import os
import sys

import click

from dpspec.errors import DpspecError


INTERNAL_ERROR = 3
# Every exit status a dpspec command may return, and what it means (the documentation's exit-code
# page is generated from this table).
EXIT_CODES = {
    0: "success",
    1: "a spec, data, budget or audit failure for the user to fix (a located error, a bound the budget exceeds, "
       "a critical audit finding, a refuted verification), including a path the file system refuses: a missing "
       "or read-only folder, no permission, a full disk",
    2: "a usage error: an unknown option or a missing argument (click's own), or an engine that cannot start "
       "(pyspark or Java missing, a Spark master that does not answer)",
    INTERNAL_ERROR: "an internal error: a bug in dpspec or a plugin, whatever the input; please report it with the "
                    "spec that caused it",
    4: "an inconclusive verification (`dpspec verify`: this many runs cannot decide the claim)",
}
# A file-system refusal naming a path (a missing or read-only folder, a full disk, no permission)
# is the user's to fix, not a bug: exit 1 with the path, never "internal error".
_FILE_SYSTEM = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOSPC,
                errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG, errno.ELOOP, errno.EMFILE, errno.ENFILE, errno.EBUSY,
                errno.ETXTBSY, errno.EXDEV, errno.EFBIG}


def fail(message: str, code: int = 1) -> None:
    click.echo(message, err=True)
    sys.exit(code)


def friendly(func):
    """Turn user errors into messages and exit 1; anything else is reported as a dpspec bug."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except DpspecError as exc:
            fail(str(exc))
        except RecursionError:
            fail("error: the input is nested too deeply to process")
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            fail("interrupted; no output was written")
        except BrokenPipeError:  # the reader (e.g. `| head`) went away: not an error of ours
            sys.stderr.close()
            os._exit(0)
        except OSError as exc:
            if exc.filename is None or exc.errno not in _FILE_SYSTEM:
                _internal(exc)
            fail(f"error: {exc.filename}: {exc.strerror} (a file-system problem: check that the path exists, is "
                 "writable and has free space)")
        except Exception as exc:  # a bug in dpspec or a plugin, not the user's fault
            _internal(exc)

    return wrapper


def _internal(exc: Exception) -> None:
    fail(f"internal error ({type(exc).__name__}): {exc}\nThis is a bug in dpspec or one of its plugins, not a "
         "problem with your input; please report it with the spec that caused it.", INTERNAL_ERROR)
