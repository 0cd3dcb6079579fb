"""The compile pipeline: check, load data, run the mechanism, account the budget, audit.

spec --check--> checked spec --+ data --mechanism--> release
                               +--facts--> budget statement --ledger--> spec-flavor budget
everything --audit--> findings;  --report--> HTML / Markdown / JSON
"""

from __future__ import annotations

import datetime
import hashlib
import secrets
import time

import attrs
import numpy as np
import pandas as pd
from randomgen import ChaCha

from dpspec import ir, progress
from dpspec.budget import ledger as ledger_mod
from dpspec.run.key_check import check_release_keys
from dpspec.check.checker import CheckedSpec, check
from dpspec.check.keys import declared_keys, typed_keys
from dpspec.errors import DataError, MechanismError
from dpspec.ir import spec_sha256
from dpspec.contract.mechanism import Release
from dpspec.contract.streamed import StreamedTable
from dpspec.engine.table import EngineTable
from dpspec.engine.local import count_frame
from dpspec.engine import EngineRun, get_engine, new_run_key, run_mechanism
from dpspec.engine.loading import load_data_on
from dpspec.engine.streams import derive_run_key
from dpspec.audit import audit as run_audit


@attrs.frozen
class Result:
    """What a compile produced, frozen: a later step (the audit, `--allow-critical`, a verification
    finding) makes a new one with `attrs.evolve`, so no reader sees a result change under it."""

    checked: CheckedSpec
    spec_hash: str
    data_hashes: dict
    facts: dict
    statement: object
    ledger: ledger_mod.FlavorLedger
    release: Release
    published: dict  # name -> DataFrame: exactly what the spec releases
    seed: int | None
    runs: int = 1
    utility: dict = attrs.Factory(dict)  # internal only: computed against the confidential data
    findings: list = attrs.Factory(list)
    timings: dict = attrs.Factory(dict)
    audit_outcome: object = None  # the whole audit (findings, rules run, skipped), for the reports
    engine: str = "local"  # the execution engine the units of work ran on
    allowed_critical: tuple = ()  # rules of the critical findings `compile --allow-critical` let through
    started_at: str | None = None  # UTC, ISO 8601, when the compile began and when its run ended:
    finished_at: str | None = None  # for certificate.json only, never in a report (reports are reproducible)

    @property
    def spec(self) -> ir.Spec:
        return self.checked.spec

    @property
    def mechanism(self):
        return self.checked.mechanism

    @property
    def outputs(self) -> dict:
        return self.published


def make_rng(seed: int | None) -> np.random.Generator:
    """ChaCha20 (a cryptographically secure stream cipher) behind numpy's Generator API.

    Without a seed the key is 256 bits of operating-system entropy, so no one can predict or
    replay the noise. An explicit seed makes a run reproducible, which also means anyone who
    knows the seed can remove the noise: the audit says so.
    """
    if seed is None:
        return np.random.Generator(ChaCha(key=secrets.randbits(256), counter=0, rounds=20))
    return np.random.Generator(ChaCha(seed=int(seed) % (1 << 256), rounds=20))


FULL_TABLE_CELLS = 1_000_000


def count_table(frame: pd.DataFrame, query: ir.CountQuery, spec: ir.Spec | None = None) -> pd.DataFrame:
    """The released count table for a query, with a `count` column.

    With the spec, the table has one row per declared cell (`dpspec.check.keys.declared_keys`),
    zeros included, in declared order: its shape says nothing about the data, and a missing row
    cannot be mistaken for a suppressed one (the checker refuses a query by undeclared values).
    Without it (internal figures), every cell of categorical columns, else the observed ones.
    """
    cols = list(query.columns)
    if not cols:
        return pd.DataFrame({"count": [len(frame)]})
    if spec is not None:
        return _declared_count_table(frame, query, spec)
    if isinstance(frame, StreamedTable):
        return _streamed_count_table(frame, cols)
    sizes = [len(frame[c].cat.categories) if isinstance(frame[c].dtype, pd.CategoricalDtype) else None for c in cols]
    full = all(s is not None for s in sizes) and int(np.prod(sizes)) <= FULL_TABLE_CELLS
    return frame.groupby(cols, observed=not full, dropna=False).size().rename("count").reset_index()


def _declared_count_table(frame, query: ir.CountQuery, spec: ir.Spec) -> pd.DataFrame:
    cols = list(query.columns)
    keys = declared_keys(spec, query.table, cols)
    counts = counted(frame, cols).astype({c: str for c in cols}).set_index(cols)["count"]
    index = pd.MultiIndex.from_frame(keys) if len(cols) > 1 else pd.Index(keys[cols[0]], name=cols[0])
    out = typed_keys(spec, query.table, keys)  # typed as the domain declares them, as the microdata is
    out["count"] = counts.reindex(index, fill_value=0).to_numpy(dtype=np.int64)
    return out


def _streamed_count_table(table: StreamedTable, cols: list) -> pd.DataFrame:
    """`count_table` of a streamed table: its counts (where its rows live), then, as for a frame,
    every cell with zeros when every column declares its value set (a CategoricalDtype)."""
    counts = table.count(cols)
    dtypes = [table.dtypes.get(c) for c in cols]
    if not all(isinstance(d, pd.CategoricalDtype) for d in dtypes):
        return counts
    if int(np.prod([len(d.categories) for d in dtypes])) > FULL_TABLE_CELLS:
        return counts.astype({c: d for c, d in zip(cols, dtypes)})
    grid = pd.MultiIndex.from_product([d.categories for d in dtypes], names=cols)
    keyed = counts.astype({c: str for c in cols}).set_index(cols)["count"]
    text = pd.MultiIndex.from_product([d.categories.astype(str) for d in dtypes], names=cols)
    full = keyed.reindex(text, fill_value=0).to_numpy(dtype=np.int64)
    out = grid.to_frame(index=False).astype({c: d for c, d in zip(cols, dtypes)})
    out["count"] = full
    return out


def _counts(frame: pd.DataFrame, cols) -> pd.Series:
    if not cols:
        return pd.Series([len(frame)])
    return frame.groupby(list(cols), observed=True, sort=True).size()


def _text_counts(frame: pd.DataFrame, cols) -> pd.Series:
    """Counts with text keys: the slow path, for outputs whose dtypes differ from the input's."""
    return frame[list(cols)].astype(str).value_counts().sort_index()


def verify_invariants(induced, before: dict, outputs: dict) -> None:
    """Every induced invariant recomputed on the released microdata must equal the input's.

    An input the engine holds (`EngineTable`) is counted by that engine (`_engine_counts_equal`)."""

    for q in induced:
        if q.table not in outputs or q.table not in before:
            continue
        a, b = before[q.table], outputs[q.table]
        cols = list(q.columns)
        if isinstance(a, EngineTable) or isinstance(b, StreamedTable):
            equal = _engine_counts_equal(a, b, cols)
            if not equal:
                raise MechanismError(f"invariant '{q.describe()}' changed during the run; the release was not written")
            continue
        same_types = all(a[c].dtype == b[c].dtype for c in cols)
        if same_types:
            equal = _counts(a, cols).equals(_counts(b, cols))
        else:
            equal = _text_counts(a, cols).equals(_text_counts(b, cols)) if cols else len(a) == len(b)
        if not equal:
            raise MechanismError(f"invariant '{q.describe()}' changed during the run; the release was not written")


def _engine_counts_equal(table, output, cols) -> bool:
    """A table's counts by `cols` against a released table's, compared as text; either may be
    held elsewhere (an `EngineTable` input, a `StreamedTable` output) and is then counted there."""

    if (
        isinstance(table, EngineTable)
        and table.engine is not None
        and isinstance(output, StreamedTable)
        and output.held is not None
        and cols
    ):  # both on the engine that holds the input: one number back
        return table.engine.counts_differ(table.handle, output.held, cols) == 0

    def as_text(counts: pd.DataFrame) -> pd.DataFrame:
        return counts.astype({c: str for c in cols}).sort_values(cols, kind="mergesort").reset_index(drop=True)

    before, after = counted(table, cols), counted(output, cols)
    return as_text(before).equals(as_text(after)) if cols else int(before["count"].sum()) == int(after["count"].sum())


def counted(table, cols) -> pd.DataFrame:
    """Counts of a table by `cols` (a `count` column), wherever its rows live: a frame here, an
    `EngineTable` input or a `StreamedTable` output on its engine."""

    cols = list(cols)
    return table.count(cols) if isinstance(table, (EngineTable, StreamedTable)) else count_frame(table, cols)


def _detach(published: dict) -> dict:
    """Outputs that an engine streams, read whole before that engine stops: a caller that gave
    compile an engine's name rather than the engine cannot keep it running for the write (the
    command line passes the engine itself, and writes while it runs). A table's `write_parts`
    may run on that engine too, so such a table is written from its chunks (the same bytes)."""

    def detached(table):
        if not isinstance(table, StreamedTable):
            return table
        if table.engine_bound:
            return table.to_pandas()
        return attrs.evolve(table, write_parts=None) if table.write_parts is not None else table

    return {name: detached(t) for name, t in published.items()}


def _release_outputs(releases) -> None:
    """Free the engine-held outputs of runs that are measured but never written (`--runs R`)."""
    for r in releases:
        for table in r.outputs.values():
            if isinstance(table, StreamedTable) and table.release is not None:
                table.release()


def published_outputs(spec: ir.Spec, release: Release) -> dict:
    """Select and compute what the spec's release section publishes."""
    if not spec.releases:
        return dict(release.outputs)
    out = {}
    for item in spec.releases:
        if item.kind == "microdata":
            if item.name not in release.outputs:
                raise MechanismError(f"the spec releases microdata '{item.name}', but the mechanism produced none")
            out[item.name] = release.outputs[item.name]
        elif item.kind == "output":
            out[item.name] = release.outputs[item.name]
        else:
            q = item.query
            if q.table not in release.outputs:
                raise MechanismError(
                    f"the spec releases '{q.describe()}', but the mechanism produced no {q.table} microdata to tabulate"
                )
            name = "count_" + "_".join([q.table, *q.columns])
            out[name] = count_table(release.outputs[q.table], q, spec)
    return out


def _require_data(spec: ir.Spec, mech, params: dict, data: dict) -> None:
    """Every table the mechanism takes as a parameter, and the one it protects, needs data."""
    wanted = {params[p.name] for p in mech.parameters.params if p.type == "table" and params.get(p.name)}
    wanted.add(mech.flavor(spec, params).table)
    missing = sorted(t for t in wanted if t not in data)
    if missing:
        raise DataError(
            f"{spec.path or 'the spec'}: no data for table(s) {', '.join(missing)}, which mechanism "
            f"'{mech.name}' reads; add a line such as: data {missing[0]} from \"{missing[0]}.csv\""
        )


def utc_now() -> str:
    """The time now, UTC, to the second (ISO 8601)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def compile_spec(
    spec: ir.Spec, data: dict | None = None, seed: int | None = None, runs: int = 1, audit: bool = True, engine=None
) -> Result:
    """Run a spec end to end in memory (nothing is written; see `write_result`).

    engine: where the mechanism's units of work run: "local" (default), "spark", or a
    `dpspec.engine.Engine`; mechanisms that do not take an engine run as before.
    """
    timings = {}
    started_at = utc_now()
    t0 = time.perf_counter()
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    if why := mech.cannot_run(spec, params):
        raise MechanismError(why)
    # -- execution engine: units of work get streams keyed by the run key --

    chosen = get_engine(engine)
    try:
        if data is None:  # Parquet sources of a mechanism that takes engine tables stay on the engine
            data, hashes = load_data_on(spec, chosen, mech)
        else:
            hashes = {
                name: hashlib.sha256(pd.util.hash_pandas_object(df, index=False).values.tobytes()).hexdigest()
                for name, df in data.items()
            }
        timings["load"] = time.perf_counter() - t0
        _require_data(spec, mech, params, data)
        facts = mech.public_facts(spec, params, data)
        statement = mech.budget(spec, params, facts)
        flavor = mech.flavor(spec, params)
        account = ledger_mod.build(spec, flavor, statement)
        rng = make_rng(seed)
        run_key = new_run_key(seed)
        t0 = time.perf_counter()
        release = run_mechanism(mech, spec, params, data, rng, EngineRun(chosen, run_key))
        timings["run"] = time.perf_counter() - t0
        verify_invariants(checked.induced, data, release.outputs)
        check_release_keys(spec, mech, params, release.outputs)
        published = published_outputs(spec, release)
        releases = [release]
        for i in range(runs - 1):
            progress.report("repeated runs", i + 1, runs - 1)
            r = run_mechanism(
                mech, spec, params, data, rng, EngineRun(chosen, derive_run_key(run_key, ("repeat", i + 1)))
            )
            verify_invariants(checked.induced, data, r.outputs)
            check_release_keys(spec, mech, params, r.outputs)
            releases.append(r)
        if chosen is not engine:  # outputs read from an engine this call stops are read now
            published = _detach(published)
    finally:
        if chosen is not engine:  # an engine this call started (from a name) is this call's to stop
            chosen.close()
    # Utility is measured against the confidential data: it feeds the internal report only.
    utility = mech.utility(spec, params, data, releases) if (runs > 1 or release.internal) else {}
    if chosen is engine:  # a caller's engine keeps running: free what the measured-only runs hold
        _release_outputs(releases[1:])
    result = Result(
        checked,
        spec_sha256(spec),
        hashes,
        facts,
        statement,
        account,
        release,
        published,
        seed,
        runs,
        utility,
        timings=timings,
        engine=chosen.name,
        started_at=started_at,
        finished_at=utc_now(),
    )
    if audit:
        outcome = run_audit(spec, result)
        result = attrs.evolve(result, audit_outcome=outcome, findings=list(outcome.findings))
    return result
