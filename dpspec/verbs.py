"""Top-level verbs that share their name with a subpackage (`dpspec.audit`, `dpspec.budget`).

Importing `dpspec.audit` rebinds the attribute `dpspec.audit` from the verb to the subpackage;
making the subpackage callable keeps `dpspec.audit(spec)` working either way. The call goes to
the verb in `dpspec` itself, which sits above every stage and registers its verbs here
(`VERBS`), so this module, imported by the stages, never imports the package above them.
"""

from __future__ import annotations

import sys
import types

VERBS: dict = {}  # verb -> the top-level function; dpspec/__init__ fills it


def make_callable(module_name: str, verb: str) -> None:
    """Calling the module `module_name` calls the top-level verb `VERBS[verb]`."""

    class _Callable(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return VERBS[verb](*args, **kwargs)

    sys.modules[module_name].__class__ = _Callable
