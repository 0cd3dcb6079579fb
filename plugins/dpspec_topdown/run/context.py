"""What a TopDown run is given besides its design: the data it reads (`Records`: the confidential
records, a joint table's, and the public tables counted from the data) and the run-time things
(`RunContext`: the random source, the engine, progress and the worker count)."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import attrs


@attrs.frozen
class JointTable:
    """A further table solved with the main one in one problem per node (joint.py): its records,
    histogram variables, recodes, strategy {level: [(query, share)]} (shares of the same level
    budget as the main table's), invariants [(level, query)] and the cross constraints tying it
    to the main table: (name, main query, main group or None, its query, its group or None,
    number of groups), and its structural zeros {name: {variable: [categories]}}."""

    name: str
    records: object
    variables: Mapping
    strategy: Mapping
    recodes: Sequence = ()
    invariants: Sequence = ()
    cross: Sequence = ()
    structural_zeros: Mapping = attrs.field(factory=dict)


@attrs.frozen
class Records:
    """The data a run reads: the person records and what is counted from the data beside them.

    ``persons``: the person table (a DataFrame or a table the engine holds).
    ``joint`` (JointTable): a second table on the same geography solved with this one in one
    problem per node, tied by its cross constraints (joint.py); its release is the result's
    ``joint[name]``. Its structural zeros hold in its release as the main table's do in its
    own. With it, the design's ``passes`` may give only outer passes (one estimation and one
    rounding pass each, naming either table's queries, joint_passes.py); no failsafe.
    ``bounds`` are ``(name, query, lower, upper)``: ``lower`` and ``upper`` are DataFrames indexed
    by finest-level code with one column per group of the marginal ``query`` (``upper`` +inf when
    unbounded); every unit's answer is kept within the sums of its finest units' bounds at every
    level (production's hhgq_total_lb/ub from the facilities table). Data outside them are a
    DataError naming the block and group; a run that broke them a MechanismError.
    ``equalities`` are ``(name, query, counts)``: the release's marginal ``query`` must equal an
    already released product at every finest unit (equality.py); ``counts`` is that product
    counted by (finest level, query factors) as `count`.
    ``gq_signature`` (finest code -> bit mask of the group-quarters types present, spine.
    gq_signatures) splits the level above the finest by it, as production's spine block groups.
    ``reference_geography``: every finest unit of the geography, populated or not (rows of the
    geography columns, and the AIAN flag with `aian`): the spine is built on it, as production
    builds its spine from the geography reference file, so a unit whose other children hold no
    one is not taken for a single-child unit.
    ``declared_geography``: the declared units (geography/declared.py), one row per finest unit
    with every level's code (and the AIAN flag with `aian`), as text: the hierarchy is built
    from these rows alone, so a unit nobody lives in is measured like any other, and the
    records are mapped onto it (a record's combination of codes outside them is a DataError);
    the records' own AIAN flags then play no part in the spine.
    """

    persons: object
    joint: JointTable | None = None
    bounds: Sequence[tuple] = ()
    equalities: Sequence[tuple] = ()
    gq_signature: object = None
    reference_geography: object = None
    declared_geography: object = None


@attrs.frozen
class RunContext:
    """The run-time things a run is handed, none of which changes the release for a given key.

    ``rng``: without an engine, the run key is drawn from it (node_noise.run_key_from) and every
    node draws its noise from streams keyed by it. ``engine`` (a `dpspec.engine.EngineRun`): the
    noise of each parent node's children is drawn from a stream keyed by (level, parent code), so
    the release does not depend on where nodes run, and the nodes of a level are solved as units
    of work on it (the local engine keeps this process's pool); each node draws its own noise,
    so no level's noisy answers are ever whole in one process. ``progress(level, done, total)``
    is called as nodes finish. ``workers`` > 1 solves the nodes of large levels in a process
    pool (forkserver), so a script calling `run_topdown` must guard its entry point with
    ``if __name__ == "__main__":`` (default: all cores).
    """

    rng: object = None
    engine: object = None
    progress: Callable[[str, int, int], None] | None = None
    workers: int | None = None
