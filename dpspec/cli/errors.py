"""How every dpspec command, built-in or added by a plugin, reports failure.

User errors become a message and exit status 1; anything else is reported as a bug with exit
status 3 (never as a traceback), so a pipeline can tell a bad input from a broken tool. dpspec
wraps the commands plugins add in `friendly` itself (`dpspec.cli.main`). A command run with
`--json` also prints the failure as a JSON document on stdout (`error_document`), so a pipeline
reading JSON never gets an empty one; the exit status is the same.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys

import click

from dpspec.cli.terminal import echo
from dpspec.errors import DpspecError
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_sarif = LazyModule("dpspec.report.sarif", "_sarif", globals())
_schemas = LazyModule("dpspec.schemas", "_schemas", globals())


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
_FILE_SYSTEM = {
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.EEXIST,
    errno.ENOSPC,
    errno.EROFS,
    errno.EDQUOT,
    errno.ENAMETOOLONG,
    errno.ELOOP,
    errno.EMFILE,
    errno.ENFILE,
    errno.EBUSY,
    errno.ETXTBSY,
    errno.EXDEV,
    errno.EFBIG,
}
# A full disk, a quota, a read-only file system or an oversized file is the machine's state even
# when the write that met it names no path (a file written through a folder's handle).
_MACHINE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


def fail(message: str, code: int = 1, diagnostics=None, path: str | None = None) -> None:
    echo(message, err=True)
    if json_wanted():
        echo(json.dumps(error_document(message, code, diagnostics, path), indent=2))
    elif _params().get("output_format") == "sarif":  # SARIF readers get a log whose run failed, not nothing
        echo(json.dumps(_sarif.error_log(message, diagnostics, path), indent=2))
    sys.exit(code)


def _params() -> dict:
    ctx = click.get_current_context(silent=True)
    return ctx.params if ctx is not None else {}


def json_wanted() -> bool:
    """True inside a command run with `--json` (its parameter is named `as_json` throughout) or `--format json`."""
    params = _params()
    return bool(params.get("as_json") or params.get("output_format") == "json")


def error_document(message: str, code: int, diagnostics=None, path: str | None = None) -> dict:
    """The `error` JSON document: the message, each located problem, the exit status."""
    diags = [
        {"file": path, "line": d.line, "column": d.column, "severity": d.severity, "message": d.message, "hint": d.hint}
        for d in (diagnostics or [])
    ]
    return _schemas.versioned(
        "error",
        {
            "error": message,
            "diagnostics": diags or [{"file": path, "message": message, "severity": "error"}],
            "exit_code": code,
        },
    )


def friendly(func):
    """Turn user errors into messages and exit 1; anything else is reported as a dpspec bug."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except DpspecError as exc:
            fail(str(exc), 1, getattr(exc, "diagnostics", None), getattr(exc, "path", None))
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
            if (
                exc.filename is None and exc.errno in _MACHINE
            ):  # a write deep in an output set: no name, still the machine's
                fail(
                    f"error: {exc.strerror or os.strerror(exc.errno)} (the machine's state, not a bug: free some space "
                    "or choose another output folder)"
                )
            if exc.filename is None or exc.errno not in _FILE_SYSTEM:
                _internal(exc)
            fail(
                f"error: {exc.filename}: {exc.strerror} (a file-system problem: check that the path exists, is "
                "writable and has free space)"
            )
        except Exception as exc:  # a bug in dpspec or a plugin, not the user's fault
            _internal(exc)

    return wrapper


def _internal(exc: Exception) -> None:
    fail(
        f"internal error ({type(exc).__name__}): {exc}\nThis is a bug in dpspec or one of its plugins, not a "
        "problem with your input; please report it with the spec that caused it.",
        INTERNAL_ERROR,
    )
