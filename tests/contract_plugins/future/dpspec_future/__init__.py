"""A plugin for dpspec plugin API 9.0: it imports a name today's `dpspec.api` lacks, so loading it
here would crash; dpspec must refuse it by its declared version instead, naming both versions."""

DPSPEC_API = "9.0"

from dpspec.api import hookimpl, MechanismFromTheFuture  # noqa: E402,F401  (absent today)


@hookimpl
def dpspec_mechanisms():
    return []
