"""A DataError that names the constructs of the spec the data break, raised where the spec is not
at hand (geography, estimation, the run); params/broken_places.py then cites where the spec
writes each."""

from __future__ import annotations

from dpspec.api import DataError


class Broken(DataError):
    """Data that break constructs of the spec, named by `constructs` as (kind, *key) tuples:
    ("structural_zeros", table or None, name), ("equal_to", name), ("invariant", level, query),
    ("recode_column", table, column), ("constraints", name), ("cross_constraints", name),
    ("setting", name), ("level", name) (the level's budget share, else the geography),
    ("spine", key) (the spine's setting `key`: aian, geography) and ("geography",) (the domain's
    hierarchy). Raised where the spec is not at hand (the engine); the plugin turns it into
    a DataError that cites where the spec writes each (params/broken_places.located)."""

    def __init__(self, message: str, *constructs: tuple):
        self.constructs = constructs
        super().__init__(message)

    def __reduce__(self):  # a worker's error crosses processes with its constructs
        return type(self), (self.message, *self.constructs)
