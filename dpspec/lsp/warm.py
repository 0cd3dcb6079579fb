"""The modules a first hover needs, imported in a background thread once the editor connects.

A hover on a `budget` line reads the bound through the budget calculus and the audit's plain
words, and a section's answer names the mechanism through the installed plugins: imported by
the hover itself, they cost the person their first hover. The editor opens the document and the
person reads it before hovering; the thread uses that time. It imports no array library (the
reading is plain Python), so the server stays as light as `dpspec check`. A failure here is
only logged: the hover imports what it needs anyway.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dpspec.contract import plugins

log = logging.getLogger("dpspec.lsp")

MODULES = (
    "dpspec.language.describe",
    "dpspec.language.formatter",
    "dpspec.audit.currency",
    "dpspec.audit.plain_words",
    "dpspec.budget.interpret",
    "dpspec.lsp.navigate",
)


def _warm() -> None:

    try:
        plugins.mechanisms()
        for name in MODULES:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the request that needs the module reports its own failure
        log.warning("dpspec lsp: warming the hover's imports failed", exc_info=True)


def start() -> threading.Thread:
    """Start warming (once per server); the thread is a daemon, so exit never waits for it."""
    thread = threading.Thread(target=_warm, name="dpspec-lsp-warm", daemon=True)
    thread.start()
    return thread
