"""`dpspec verify --replay`: run the mechanism on the spec's data and on neighbours of it, and compare what it measured and released.

Why: the budget is only as good as the claim that nothing but the noise carries a record into
the release. Run with one seed on neighbouring datasets, keyed randomness makes two runs take
the same path unless the data steers it, so any difference in which queries are measured or in
the release's structure (outputs, columns, rows, keys) that no declared adaptive step explains
is a leak the noise does not cover; and each query's exact change between the two datasets must
stay within the sensitivity its noise was set for.
"""

from __future__ import annotations

import math
from fractions import Fraction

import attrs
import numpy as np
import pandas as pd

from dpspec import ir
from dpspec.run import measurements as recorder
from dpspec.verify.data_neighbours import DataNeighbour, neighbours as data_neighbours, group_bound
from dpspec.verify.miniature import VerifyError, same_universe, universe_queries
from dpspec.verify.replay_result import Finding, NeighbourReplay, Replay
from dpspec.check.checker import check
from dpspec.check.data import load_data
from dpspec.language.parser import load_text_or_path
from dpspec.engine import LocalEngine, EngineRun, new_run_key, run_mechanism
from dpspec.contract.streamed import StreamedTable
from dpspec.run.key_check import inferred_keys
from dpspec.run.compiler import _require_data, spec_sha256, make_rng, published_outputs

DEFAULT_NEIGHBOURS = 6
SHOW = 5


@attrs.frozen
class Merged:
    """One query of one run: its pieces (calls with one label) put together."""

    kind: str
    values: np.ndarray
    shape: tuple
    keys: tuple | None
    scale: object
    sensitivity: object
    norm: str
    position: int  # where it was first measured in the run
    after_adaptive: bool  # measured after the run's first adaptive measurement
    sparse: bool = False  # keys name the nonzero cells only (every other one is 0)


@attrs.frozen
class Run:
    queries: dict  # label -> Merged, in the order measured
    adaptive_outputs: frozenset
    structure: dict  # output -> {"columns", "rows", "keys": frozenset | None, "key_columns"}
    error: str | None = None
    governed: dict = attrs.Factory(dict)  # output -> {row key: (label prefix, key prefix)} (record_adaptive_rows)


def replay(spec, neighbours: int = DEFAULT_NEIGHBOURS, seed: int = 0, sample: int | None = None) -> Replay:
    """Replay the spec's mechanism on its data and `neighbours` neighbours of it (see the module doc).

    Raises SpecError for a spec that does not check, DataError for data that does not load, and
    VerifyError when there is nothing to replay (no mechanism, a recorded budget, too little data)."""

    if isinstance(spec, str):
        spec = load_text_or_path(spec)
    if spec.program is not None:
        raise VerifyError("replay runs one mechanism: give it the spec of one release, not a program")
    if spec.mechanism is None:
        raise VerifyError(f"{spec.path or 'the spec'}: the spec names no mechanism, so there is nothing to replay")
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    if why := mech.cannot_run(spec, params):
        raise VerifyError(f"nothing to replay: {why}")
    data, _ = load_data(spec)
    _require_data(spec, mech, params, data)
    notes = []
    if sample is not None:
        data, note = _sampled(spec, mech, params, data, sample, seed)
        notes.append(note)
    table, columns, pairs = data_neighbours(spec, mech, params, data, neighbours, seed)
    native = mech.flavor(spec, params)
    if spec.unit is not None and spec.unit.table != native.table:
        k, _ = group_bound(spec, spec.domain.table(table))
        notes.append(
            f"the spec's unit is '{spec.unit.table}'; the replay changes one '{native.table}' record at a time"
            + (
                f", and up to {k} of one '{spec.unit.table}' at once (their sensitivity {k} times one record's)"
                if k
                else " (group privacy over the unit is the budget stage's)"
            )
        )
    queries = universe_queries(spec, checked.induced)

    engine = LocalEngine()
    try:
        base = _run(mech, spec, params, data, seed, engine)
        if base.error is not None:
            raise VerifyError(f"mechanism '{mech.name}' failed on the spec's own data: {base.error}")
        results = [
            _compared(spec, native, base, nb, _run(mech, spec, params, nb.data, seed, engine), queries, data)
            for nb in pairs
        ]
    finally:
        engine.close()
    budget = _native_budget(mech, spec, params, data)
    return Replay(
        mech.name,
        mech.version,
        spec_sha256(spec),
        seed,
        table,
        tuple(columns),
        {"table": native.table, "relation": native.relation, "premetric": native.premetric},
        budget,
        len(base.queries),
        {k: _structure_json(v) for k, v in base.structure.items()},
        tuple(results),
        tuple(notes),
    )


def _sampled(spec, mech, params, data, sample: int, seed: int):
    table = mech.flavor(spec, params).table
    if len(data) > 1:
        raise VerifyError(
            f"--sample needs a spec with one data table (this one has {len(data)}: a sample of one would cut its links)"
        )
    frame = data[table]
    if sample >= len(frame):
        return data, f"--sample {sample:,}: the data has {len(frame):,} records, all replayed"
    rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=sample, replace=False))
    return (
        {table: frame.iloc[rows].reset_index(drop=True)},
        f"replayed on a seeded sample of {sample:,} of the {len(frame):,} records (seed {seed}): a neighbouring pair "
        "of the sample is a neighbouring pair all the same",
    )


def _run(mech, spec, params, data, seed: int, engine) -> Run:
    """One run under the recorder, with the seed every run uses."""

    with recorder.recording() as rec:
        try:
            release = run_mechanism(mech, spec, params, data, make_rng(seed), EngineRun(engine, new_run_key(seed)))
            published = published_outputs(spec, release)
            structure = {name: _structure(spec, mech, params, name, out) for name, out in published.items()}
            governed = {
                name: _governed_rows(published[name], *rec.adaptive_rows[name], structure[name])
                for name in rec.adaptive_rows
                if name in published
            }
            return Run(_merge(rec.measurements), frozenset(rec.adaptive_outputs), structure, None, governed)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's failure (a crash, an exit, a refusal in
            # words, measurements that cannot be put together) is what the replay reports, as a failed verification
            return Run({}, frozenset(), {}, f"{type(exc).__name__}: {exc}")


def _merge(measured: list) -> dict:
    out: dict = {}
    pieces: dict = {}
    first_adaptive = next((i for i, m in enumerate(measured) if m.adaptive), None)
    for i, m in enumerate(measured):
        pieces.setdefault(m.label, []).append((i, m))
    for label, parts in pieces.items():
        i, m = parts[0]
        values = np.concatenate([p.exact for _, p in parts]) if len(parts) > 1 else m.exact
        keys = None
        if all(p.keys is not None for _, p in parts):
            keys = tuple(k for _, p in parts for k in p.keys)
        shape = m.shape if len(parts) == 1 else (values.size,)
        out[label] = Merged(
            m.kind,
            values,
            shape,
            keys,
            m.scale,
            m.sensitivity,
            m.norm,
            i,
            first_adaptive is not None and i > first_adaptive,
            keys is not None and m.sparse,
        )
    return out


def _structure(spec, mech, params, name: str, output) -> dict:
    """What an output's shape says: its columns, rows and key values."""

    if isinstance(output, StreamedTable):
        output = output.to_pandas()
    if not isinstance(output, pd.DataFrame):
        return {"columns": (), "rows": None, "keys": None, "key_columns": ()}
    table = mech.flavor(spec, params).table
    declared = mech.output_keys(spec, params).get(name) or inferred_keys(spec, table, name, output)
    if declared is not None and declared.records:
        key_columns = ()
    elif declared is not None:
        key_columns = tuple(c for c in (*declared.columns, *declared.fixed) if c in output.columns)
    else:
        key_columns = _key_like(spec, table, output)
    keys = frozenset(output[list(key_columns)].astype(str).itertuples(index=False, name=None)) if key_columns else None
    return {"columns": tuple(map(str, output.columns)), "rows": len(output), "keys": keys, "key_columns": key_columns}


def _governed_rows(output, columns: tuple, governed_by, structure: dict) -> dict:
    """{row key: (label prefix, key prefix)} of an output declared row by row; its structure's keys
    become those rows' keys."""

    if isinstance(output, StreamedTable):
        output = output.to_pandas()
    frame = output[list(columns)].astype(str).reset_index(drop=True)
    labels, prefixes = governed_by(frame)
    keys = list(frame.itertuples(index=False, name=None))
    structure.update(keys=frozenset(keys), key_columns=tuple(columns))
    return dict(zip(keys, zip(map(str, labels), map(str, prefixes))))


def _governing_changed(base: Run, other: Run, label_prefix: str, key_prefix: str) -> bool:
    """Whether a measurement of these (label prefix, key prefix) cells differs between the runs
    (measured on one side only, other cells, other exact values)."""
    labels = {lb for lb in (*base.queries, *other.queries) if lb.startswith(label_prefix)}
    for label in labels:
        a, b = base.queries.get(label), other.queries.get(label)
        if a is None or b is None:
            return True
        if a.keys is None or b.keys is None:
            if a.values.shape != b.values.shape or not np.array_equal(a.values, b.values):
                return True
            continue

        def cells(m):
            return {k: v for k, v in zip(m.keys, m.values) if k == key_prefix or k.startswith(key_prefix + "|")}

        if cells(a) != cells(b):
            return True
    return False


def _key_like(spec, table: str, output: pd.DataFrame) -> tuple:
    """Columns that key an undescribed output: text ones, and integer ones named as domain columns."""
    t = spec.domain.table(table) if spec.domain else None
    named = {c.name for tb in spec.domain.tables for c in tb.columns} if spec.domain else set()
    out = []
    for c in output.columns:
        dtype = output[c].dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            out.append(c)
        elif pd.api.types.is_integer_dtype(dtype) and (c in named or (t is not None and t.column(c) is not None)):
            out.append(c)
    return tuple(out)


def _structure_json(s: dict) -> dict:
    return {
        "columns": list(s["columns"]),
        "rows": s["rows"],
        "key_columns": list(s["key_columns"]),
        "keys": None if s["keys"] is None else len(s["keys"]),
    }


# ---- comparing one neighbour's run with the data's ------------------------------------------------


def _native_steps(spec: ir.Spec, native, nb: DataNeighbour) -> int | None:
    """The neighbour's distance under the mechanism's native relation (None: not one of its neighbours)."""
    if nb.change == "changed":  # each record changed is one step of hamming, two of add/remove
        return nb.records * (
            nb.steps if native.relation == "symdiff" and nb.steps == 2 else (2 if native.relation == "symdiff" else 1)
        )
    return nb.records if native.relation == "symdiff" else None


def _compared(spec, native, base: Run, nb: DataNeighbour, other: Run, queries, data) -> NeighbourReplay:
    """The neighbour's comparison; what the mechanism measured or released that cannot be compared
    (values of another type, pieces of a query that do not fit together) fails this neighbour,
    named, as a crash on it does: a failed verification, never a traceback."""
    try:
        return _compare(spec, native, base, nb, other, same_universe(spec, queries, data, nb.data))
    except Exception as exc:  # noqa: BLE001 - reported as this neighbour's failure
        return NeighbourReplay(
            nb.to_json(),
            None,
            None,
            (
                Finding(
                    "failed",
                    f"the replay could not compare this neighbour's run ({nb.describe()}): {type(exc).__name__}: {exc}",
                ),
            ),
            (),
            {},
        )


def _compare(spec, native, base: Run, nb: DataNeighbour, other: Run, moved: str | None) -> NeighbourReplay:
    where = nb.describe()
    if other.error is not None:
        return NeighbourReplay(
            nb.to_json(),
            moved,
            None,
            (Finding("failed", f"the mechanism failed on this neighbour ({where}): {other.error}"),),
            (),
            {},
        )
    findings, explained = [], []
    steps = _native_steps(spec, native, nb)
    _control_flow(base, other, findings, explained)
    _invariants(base, other, moved, findings, explained)
    _outputs(base, other, findings, explained)
    loss = {}
    if steps is None:
        explained.append(
            Finding(
                "not-a-native-neighbour",
                f"the mechanism's native relation is {native.relation}: an "
                f"{nb.change} record is not one of its neighbours, so sensitivities are not compared",
            )
        )
    else:
        loss = _sensitivities(base, other, steps, findings)
    return NeighbourReplay(nb.to_json(), moved, steps, tuple(findings), tuple(explained), loss)


def _control_flow(base: Run, other: Run, findings: list, explained: list) -> None:
    for label in [*base.queries, *(k for k in other.queries if k not in base.queries)]:
        a, b = base.queries.get(label), other.queries.get(label)
        if (a or b).kind == "none":
            continue
        if a is None or b is None:
            side = "the neighbour's run only" if a is None else "the data's run only"
            m = a or b
            _add(
                findings,
                explained,
                m.after_adaptive,
                Finding("control-flow", f"query '{label}' was measured on {side}", label=label),
            )
        elif a.sparse or b.sparse:  # which of a full query's cells are nonzero is its values, not control flow
            continue
        elif a.keys is not None and b.keys is not None and set(a.keys) != set(b.keys):
            extra, missing = sorted(set(b.keys) - set(a.keys)), sorted(set(a.keys) - set(b.keys))
            _add(
                findings,
                explained,
                a.after_adaptive or b.after_adaptive,
                Finding(
                    "control-flow",
                    f"query '{label}' measured other cells on the neighbour: "
                    + _listed("added", extra)
                    + _listed("; left out", missing),
                    label=label,
                ),
            )
        elif a.keys is None and a.shape != b.shape:
            _add(
                findings,
                explained,
                a.after_adaptive or b.after_adaptive,
                Finding(
                    "control-flow",
                    f"query '{label}' has shape {a.shape} on the data and {b.shape} on the neighbour",
                    label=label,
                ),
            )


def _invariants(base: Run, other: Run, moved: str | None, findings: list, explained: list) -> None:
    """A quantity released exactly (kind "none") may change only with the universe."""
    for label, a in base.queries.items():
        b = other.queries.get(label)
        if a.kind != "none" or b is None:
            continue
        left, right = _aligned(a, b, fill=True)
        if left is not None and np.array_equal(left, right):
            continue
        if moved is not None:
            explained.append(
                Finding(
                    "invariant",
                    f"'{label}' (released exactly) changed, as the neighbour leaves the universe ('{moved}' differs)",
                    label=label,
                )
            )
        else:
            findings.append(
                Finding(
                    "invariant",
                    f"'{label}' is released exactly and changed, though the neighbour keeps "
                    "every declared invariant and public statistic: a data-dependent quantity outside "
                    "the noise (declare it as an invariant, or measure it with noise)",
                    label=label,
                )
            )


def _outputs(base: Run, other: Run, findings: list, explained: list) -> None:
    adaptive = base.adaptive_outputs | other.adaptive_outputs
    for name in sorted(set(base.structure) | set(other.structure)):
        a, b = base.structure.get(name), other.structure.get(name)
        problems = []
        if a is None or b is None:
            problems.append("released on " + ("the neighbour only" if a is None else "the data only"))
        else:
            if a["columns"] != b["columns"]:
                problems.append(f"columns {list(a['columns'])} become {list(b['columns'])}")
            rows = {**base.governed.get(name, {}), **other.governed.get(name, {})}
            if rows and name not in adaptive and a["keys"] != b["keys"]:  # declared row by row
                cols = a["key_columns"]
                for what, keys in (
                    ("appears", sorted(b["keys"] - a["keys"])),
                    ("disappears", sorted(a["keys"] - b["keys"])),
                ):
                    why = [k for k in keys if not (k in rows and _governing_changed(base, other, *rows[k]))]
                    told = [k for k in keys if k not in why]
                    if why:
                        findings.append(
                            Finding(
                                "structure",
                                f"output '{name}': key {_keys(what, cols, why)}, though no "
                                "measurement deciding that row changed",
                                output=name,
                            )
                        )
                    if told:
                        explained.append(
                            Finding(
                                "structure",
                                f"output '{name}': key {_keys(what, cols, told)}, as the "
                                "adaptive measurements deciding it changed",
                                output=name,
                            )
                        )
            elif rows and name not in adaptive:
                pass  # the same rows
            elif a["keys"] is not None and b["keys"] is not None and a["keys"] != b["keys"]:
                cols = a["key_columns"]
                extra, missing = sorted(b["keys"] - a["keys"]), sorted(a["keys"] - b["keys"])
                problems.append(
                    "key "
                    + "; ".join(filter(None, [_keys("appears", cols, extra), _keys("disappears", cols, missing)]))
                )
            elif a["rows"] != b["rows"]:
                problems.append(f"{a['rows']:,} rows become {b['rows']:,}")
        for p in problems:
            finding = Finding("structure", f"output '{name}': {p}", output=name)
            (explained if name in adaptive else findings).append(finding)


def _sensitivities(base: Run, other: Run, steps: int, findings: list) -> dict:
    """Each query's exact change against its sensitivity; the pair's realised loss per premetric."""
    loss = {"rho": Fraction(0), "epsilon": 0.0}
    for label, a in base.queries.items():
        b = other.queries.get(label)
        if b is None or a.kind == "none":
            continue
        left, right = _aligned(a, b, fill=a.sparse or b.sparse)
        if left is None:
            continue
        d = left - right
        l1, l2sq = float(np.abs(d).sum()), float((d * d).sum())
        if a.sensitivity is not None:
            bound = Fraction(a.sensitivity) * steps if not isinstance(a.sensitivity, float) else a.sensitivity * steps
            if a.norm == "l1":
                over, measured = l1 > bound * (1 + 1e-12), f"L1 change {_n(l1)}"
            else:
                over, measured = l2sq > bound * bound * (1 + 1e-12), f"L2 change {_n(math.sqrt(l2sq))}"
            if over:
                findings.append(
                    Finding(
                        "sensitivity",
                        f"query '{label}': {measured} between the neighbours, above the "
                        f"sensitivity {_n(a.sensitivity)} its noise was set for"
                        + (f" (x {steps} steps)" if steps > 1 else ""),
                        label=label,
                    )
                )
        if a.kind == "discrete_gaussian" and a.scale:
            loss["rho"] += (
                Fraction(int(round(l2sq))) / (2 * Fraction(a.scale))
                if l2sq == int(l2sq)
                else l2sq / (2 * float(a.scale))
            )
        elif a.kind == "discrete_laplace" and a.scale:
            loss["epsilon"] += l1 / float(a.scale)
        elif a.kind == "exponential" and a.scale:
            loss["epsilon"] += 2 * float(a.scale) * l1
        elif a.kind == "randomized_response" and a.scale is not None and 0 < a.scale < 1:
            p = float(a.scale)
            loss["epsilon"] += abs(math.log(p / (1 - p))) * l1
    return {k: v for k, v in loss.items() if v}


def _aligned(a: Merged, b: Merged, fill: bool = False):
    """The two runs' values cell by cell (by key, or by position), or None when they do not align;
    with `fill`, a key on one side only counts 0 on the other."""
    if a.keys is not None and b.keys is not None:
        av, bv = dict(zip(a.keys, a.values)), dict(zip(b.keys, b.values))
        if not fill and set(av) != set(bv):
            return None, None
        keys = sorted(set(av) | set(bv))
        return np.array([av.get(k, 0.0) for k in keys]), np.array([bv.get(k, 0.0) for k in keys])
    if a.values.shape != b.values.shape:
        return None, None
    return a.values, b.values


def _native_budget(mech, spec, params, data) -> dict | None:
    try:
        statement = mech.budget(spec, params, mech.public_facts(spec, params, data))
        values = statement.actual.params()
    except Exception:  # noqa: BLE001 - the budget is shown for information only
        return None
    return {
        "premetric": statement.kind,
        **{
            k: ("inf" if math.isinf(float(v)) else _n(v))
            for k, v in values.items()
            if isinstance(v, (int, float, Fraction))
        },
    }


def _add(findings: list, explained: list, after_adaptive: bool, finding: Finding) -> None:
    (explained if after_adaptive else findings).append(finding)


def _listed(what: str, keys: list) -> str:
    if not keys:
        return ""
    return f"{what} {', '.join(keys[:SHOW])}" + (f" (and {len(keys) - SHOW:,} more)" if len(keys) > SHOW else "")


def _keys(what: str, columns: tuple, rows: list) -> str:
    if not rows:
        return ""
    shown = "; ".join(", ".join(f"{c}={v}" for c, v in zip(columns, row)) for row in rows[:SHOW])
    return f"{shown} {what}" + (f" (and {len(rows) - SHOW:,} more)" if len(rows) > SHOW else "")


def _n(x):
    if isinstance(x, Fraction):
        return int(x) if x.denominator == 1 else float(x)
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x
