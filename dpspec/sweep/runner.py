"""Running a sweep: every point checked first (nothing read), then the data loaded once and each
point accounted (budget, expected error) and, with runs, run and measured against the data.

A point whose run fails is recorded with its parameters and the message; the others go on. An
interrupted sweep raises before anything is written (the caller writes the set at the end).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import attrs

from dpspec import ir, progress
from dpspec.budget import convert, ledger as ledger_mod
from dpspec.budget.budget_text import budget_line
from dpspec.check.checker import CheckedSpec, check
from dpspec.contract.results import expected_error_result
from dpspec.errors import ConversionError, DataError, DpspecError, MechanismError, SpecError
from dpspec.sweep import realized
from dpspec.sweep.override import balanced, override
from dpspec.engine import EngineRun, run_mechanism, LocalEngine, get_engine, new_run_key
from dpspec.engine.streams import derive_run_key
from dpspec.run.compiler import _release_outputs, make_rng, verify_invariants
from dpspec.engine.loading import load_data_on
from dpspec.check.data import resolve_path
from dpspec.check.sources import source_sha256


@attrs.define
class Point:
    index: int
    values: dict  # {path: Fraction} as varied (and balanced)
    checked: CheckedSpec | None = None
    status: str = "pending"  # ok, failed
    error: str | None = None
    budget: dict | None = None  # in the spec's currency (the budget calculus's JSON)
    budget_text: str | None = None
    common: dict | None = None  # {"epsilon", "delta", "method"}
    bounds_hold: bool | None = None
    expected: list | None = None
    realized: list = attrs.Factory(list)  # rows with a "run" key: internal only
    runs_done: int = 0
    run_seconds: float = 0.0  # time inside the mechanism's runs: the floor a sweep cannot beat

    def label(self) -> str:
        return ", ".join(f"{k} = {ir.format_number(v)}" for k, v in self.values.items())


@attrs.define
class Sweep:
    spec: ir.Spec
    axes: list
    points: list
    runs: int
    off_by: float
    delta: float
    method: str
    seed: int | None
    engine: str = "local"
    data_hashes: dict = attrs.Factory(dict)

    @property
    def currency(self) -> str:
        return (
            f"epsilon of (epsilon, delta)-DP at delta = {self.delta:g} under the spec's unit "
            f"({self.spec.unit.table}, {self.spec.unit.relation}); zCDP converted by {self.method}, "
            "pure epsilon taken as it is (it holds at delta = 0)"
        )


def plan(spec: ir.Spec, grid: list[dict], balance=()) -> list[Point]:
    """Every point's spec, checked now; refuses the sweep listing every point that fails."""
    points, problems = [], []
    for i, values in enumerate(grid):
        values = dict(values)
        try:
            pspec = override(spec, values)
            for path in balance:
                values[path] = balanced(pspec, path)
                pspec = override(pspec, {path: values[path]})
            points.append(Point(i, values, check(pspec)))
        except SpecError as exc:
            if any("--vary" in d.message or "--balance" in d.message for d in exc.diagnostics):
                raise  # an unknown name fails every point alike: say it once
            label = ", ".join(f"{k} = {ir.format_number(v)}" for k, v in values.items())
            for d in exc.diagnostics:
                problems.append(attrs.evolve(d, message=f"at the point {label}: {d.message}"))
    if problems:
        raise SpecError(problems, spec.path, spec.text)
    return points


def common_currency(declared, delta: float, method: str) -> dict | None:
    """The budget as (epsilon, delta)-DP at the sweep's delta, the conversion named."""
    if declared is None:
        return None
    if not declared.is_finite:
        return {"epsilon": math.inf, "delta": delta, "method": "infinite"}
    try:
        conv = convert(declared, "approx", delta=delta, method=method)
    except ConversionError:
        return None
    out = conv.result.to_json()
    return {"epsilon": out["epsilon"], "delta": out["delta"], "method": conv.method}


def account(point: Point, data: dict, delta: float, method: str) -> None:
    """Budget (spec currency and the common one) and expected error; no mechanism run."""
    spec, mech, params = point.checked.spec, point.checked.mechanism, point.checked.params
    facts = mech.public_facts(spec, params, data) if data is not None else {}
    statement = mech.budget(spec, params, facts)
    ledger = ledger_mod.build(spec, mech.flavor(spec, params), statement, currencies=False)
    if ledger.declared is not None:
        point.budget = ledger.declared.to_json()
        point.budget_text = budget_line(point.budget)
    else:
        point.budget_text = f"cannot be expressed in the spec's flavor: {ledger.problem}"
    point.common = common_currency(ledger.declared, delta, method)
    point.bounds_hold = ledger.bounds_hold and ledger.problem is None
    point.expected = expected_error_result(mech.expected_error(spec, params, facts), mech)


def _one_run(
    point: Point, data: dict, r: int, engine, run_key: int, off_by: float, truth: realized.TruthCache
) -> tuple[list[dict], float]:
    """Run r of a point, measured against the data: (its realized rows, seconds in the mechanism).
    Its streams are keyed by (run key, point, run) alone, so wherever it runs (this process, a
    pool worker, a Spark task retried after a lost executor) it draws the same noise."""

    spec, mech, params = point.checked.spec, point.checked.mechanism, point.checked.params
    key = derive_run_key(run_key, ("sweep", point.index, r))
    started = time.perf_counter()
    with progress.reporting(None):  # the sweep's bar counts points and runs, not a run's own stages
        release = run_mechanism(mech, spec, params, data, make_rng(key), EngineRun(engine, key), keep_truths=True)
    seconds = time.perf_counter() - started
    try:
        verify_invariants(point.checked.induced, data, release.outputs)
        rows = realized.measure(realized.comparisons(spec, mech, params, data, release, truth), off_by)
    finally:
        _release_outputs([release])
    return [{"run": r, **row} for row in rows], seconds


def _sample_point(
    point: Point, data: dict, runs: int, engine, run_key: int, off_by: float, truth: realized.TruthCache, tick
) -> None:
    for r in range(runs):
        rows, seconds = _one_run(point, data, r, engine, run_key, off_by, truth)
        point.run_seconds += seconds
        point.realized.extend(rows)
        point.runs_done = r + 1
        tick()


def _message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, DpspecError) else f"{type(exc).__name__}: {exc}"


def _fail(point: Point, message: str) -> None:
    point.status = "failed"
    point.realized = []  # a failed point has no figures: part of its runs would mislead
    point.error = message


def _do_point(
    point: Point,
    data,
    runs: int,
    engine,
    run_key: int,
    off_by: float,
    delta: float,
    method: str,
    truth: realized.TruthCache,
    tick,
) -> None:
    """One point, whole: its account and its runs; a failure is recorded on the point."""
    try:
        with progress.reporting(None):
            account(point, data, delta, method)
        if runs:
            _sample_point(point, data, runs, engine, run_key, off_by, truth, tick)
        point.status = "ok"
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # one point's failure is reported with its parameters; the others run
        _fail(point, _message(exc))


# ---- points as units of work in a local process pool (--workers) ------------------------------

_WORKER: dict = {}
RESULT_FIELDS = (
    "status",
    "error",
    "budget",
    "budget_text",
    "common",
    "bounds_hold",
    "expected",
    "realized",
    "runs_done",
    "run_seconds",
)


def _worker_start(spec: ir.Spec, mechanism=None) -> dict:
    """A worker (a pool process, a Spark executor's Python worker) reads the data once, on its own
    local engine, for every point it is given. mechanism: the checked one, shipped with the task
    (a plugin registered only in the driver is not found by name on an executor)."""

    engine = LocalEngine()
    mechanism = mechanism or check(spec).mechanism
    data, hashes = load_data_on(spec, engine, mechanism) if spec.data else ({}, {})
    _WORKER.clear()
    _WORKER.update(spec=spec, engine=engine, data=data, hashes=hashes, truth=realized.TruthCache(data))
    return _WORKER


def _worker_point(index: int, values: dict, runs: int, run_key: int, off_by: float, delta: float, method: str) -> dict:
    w = _WORKER
    point = Point(index, values, check(override(w["spec"], values)))
    _do_point(point, w["data"], runs, w["engine"], run_key, off_by, delta, method, w["truth"], lambda: None)
    return {k: getattr(point, k) for k in RESULT_FIELDS}


def _pooled(spec, points, workers: int, runs: int, run_key: int, off_by, delta, method, tick) -> None:
    """Each point a unit of work on a pool of `workers` processes; streams are keyed by (run key,
    point, run), so the figures do not depend on the number of workers."""
    # forkserver: a worker never inherits this process's threads mid-state (as the local engine)
    with ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("forkserver"), initializer=_worker_start, initargs=(spec,)
    ) as pool:
        futures = {
            pool.submit(_worker_point, p.index, p.values, runs, run_key, off_by, delta, method): p for p in points
        }
        try:
            for future in as_completed(futures):
                point = futures[future]
                try:
                    for k, v in future.result().items():
                        setattr(point, k, v)
                except Exception as exc:  # the worker itself died (memory, a signal)
                    point.status, point.error = "failed", f"{type(exc).__name__}: {exc}"
                for _ in range(max(runs, 1)):
                    tick()
        except BaseException:
            for f in futures:
                f.cancel()
            raise


# ---- (point, run) pairs as units of work on the engine (Spark: one task each) ------------------

TASK_STAGE = "sweep (points x runs)"


def _task(key, payload, rng) -> dict:
    """One (point, run) on an executor: the data read once per worker (and checked to be the
    bytes the driver read), the point's run on the worker's local engine. A failure is returned,
    not raised, so one point's failure does not fail the job of the others."""
    spec, hashes, checked, index, values, r, run_key, off_by = payload
    try:
        w = _WORKER if _WORKER.get("spec") == spec else _worker_start(spec, checked.mechanism)
        changed = sorted(k for k in hashes if w["hashes"].get(k) != hashes[k])  # {}: the caller gave the data
        if changed:
            raise DataError(
                f"{', '.join(changed)}: the data an executor read differ from the data the driver read "
                "(changed during the sweep, or another file at that path on the executor)"
            )
        point = Point(index, values, checked)
        rows, seconds = _one_run(point, w["data"], r, w["engine"], run_key, off_by, w["truth"])
        return {"rows": rows, "seconds": seconds}
    except Exception as exc:  # noqa: BLE001 - reported with the point's parameters
        return {"error": _message(exc)}


def _on_engine(spec: ir.Spec, points: list, runs: int, engine, run_key: int, off_by: float, hashes: dict) -> None:
    """Every (point, run) of the points not failed yet as one unit of work on the engine (`map_items`,
    one task per pair); results come back in order and are put on their points."""
    spec = attrs.evolve(spec, path=os.path.abspath(spec.path)) if spec.path else spec  # executors' cwd may differ
    todo = [p for p in points if p.status != "failed"]
    items = [
        (
            (p.index, r),
            (
                spec,
                hashes,
                attrs.evolve(p.checked, spec=attrs.evolve(p.checked.spec, path=spec.path)),
                p.index,
                p.values,
                r,
                run_key,
                off_by,
            ),
        )
        for p in todo
        for r in range(runs)
    ]
    results = EngineRun(engine, run_key).map_items(items, _task, stage=TASK_STAGE, per_item=True)
    by_index = {p.index: p for p in points}
    for ((index, r), _), result in zip(items, results):
        point = by_index[index]
        if point.status == "failed":
            continue
        if "error" in result:
            _fail(point, f"run {r}: {result['error']}")
            continue
        point.realized.extend(result["rows"])
        point.run_seconds += result["seconds"]
        point.runs_done += 1
    for p in todo:
        if p.status != "failed":
            p.status = "ok"


def run_sweep(
    spec: ir.Spec,
    axes,
    grid: list[dict],
    *,
    runs: int = 0,
    engine=None,
    seed: int | None = None,
    off_by: float = 5,
    delta: float = 1e-10,
    method: str = "cks20",
    balance=(),
    data=None,
    workers: int = 1,
    units: str = "points",
) -> Sweep:
    """The whole sweep in memory (nothing written). runs = 0: budgets and expected errors only.

    workers > 1 (local engine only): the points run as units of work on a process pool. On
    another engine (Spark), units = "points" makes every (point, run) a task, each run on its
    executor's local engine; units = "mechanism" runs the points one by one, each run's
    mechanism spreading its own units on the engine (for data no executor can hold)."""

    points = plan(spec, grid, balance)
    mech = points[0].checked.mechanism
    if runs and (why := mech.cannot_run(points[0].checked.spec, points[0].checked.params)):
        raise MechanismError(why)
    if units not in ("points", "mechanism"):
        raise ValueError(f"units must be 'points' or 'mechanism', not {units!r}")
    chosen = get_engine(engine)
    if workers > 1 and chosen.name != "local":
        raise MechanismError("--workers runs points in local processes; on Spark the units of work are spread by Spark")
    sweep = Sweep(spec, list(axes), points, runs, off_by, delta, method, seed, chosen.name)
    total = len(points) * max(runs, 1)
    done = [0]

    def tick():
        done[0] += 1
        progress.report("sweep (points x runs)", done[0], total)

    try:
        run_key = new_run_key(seed)
        if workers > 1 and len(points) > 1:
            _pooled(spec, points, min(workers, len(points)), runs, run_key, off_by, delta, method, tick)

            sweep.data_hashes = {s.path: source_sha256(resolve_path(spec, s)) for s in spec.data}
            return sweep
        if data is None and spec.data:  # once for every point: facts (b, n) and the runs read it
            data, sweep.data_hashes = load_data_on(spec, chosen, mech)
        if runs and chosen.name != "local" and units == "points":
            for point in points:  # budgets here, the runs as tasks
                try:
                    with progress.reporting(None):
                        account(point, data, delta, method)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as exc:
                    _fail(point, _message(exc))
            _on_engine(spec, points, runs, chosen, run_key, off_by, sweep.data_hashes)  # the engine shows its tasks
            done[0] = total - 1
            tick()
            return sweep
        truth = realized.TruthCache(data or {})
        for point in points:
            before = done[0]
            _do_point(point, data, runs, chosen, run_key, off_by, delta, method, truth, tick)
            if runs == 0 or point.status != "ok":
                done[0] = before + max(runs, 1) - 1
                tick()
    finally:
        if chosen is not engine:
            chosen.close()
    return sweep


def pareto(items: list[tuple[int, float, float]]) -> set[int]:
    """Indices of the points no other point beats on both budget and error (smaller is better in
    both; ties on both keep every tied point)."""
    best = set()
    for i, b, e in items:
        if b is None or e is None or not (math.isfinite(b) and math.isfinite(e)):
            continue
        beaten = any(
            (b2 <= b and e2 <= e) and (b2 < b or e2 < e)
            for j, b2, e2 in items
            if j != i and b2 is not None and e2 is not None and math.isfinite(b2) and math.isfinite(e2)
        )
        if not beaten:
            best.add(i)
    return best
