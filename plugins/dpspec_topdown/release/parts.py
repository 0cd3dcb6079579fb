"""A release table's file written in parts where the run's units of work run (`StreamedTable.write_parts`).

Why: the release was formatted by one process, chunk by chunk (and the measurements' noise
re-drawn there), which was most of a national run's projected time. A part is a run of the
table's pieces (whole nodes of one query, ranges of whole finest units) with the rows they are
made from, and nothing else: a task formats it with `write_csv_part`, the formatter the driver
uses (same number formatting, same column order, the formula refusal on every chunk), so the
parts joined in order hold the bytes of the chunks written one after another.

Where: on an engine whose units run elsewhere (Spark), one job of one task per part
(`map_items`), in batches of at most `_BATCH_BYTES` of rows shipped so the driver never holds
more; on the local engine a pool of the run's `workers` processes (forkserver, as the nodes'),
given the table's small common part once per process; with one worker, this process. A task
writes through the scratch folder's path only after seeing the driver's probe file there: a
task that cannot (an executor on another machine) writes nothing, and the driver writes that
part itself, so the file is the same either way.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import math
import multiprocessing as mp
import os
import secrets
from typing import Callable, Sequence

import attrs
import numpy as np

from dpspec.api import DataError, MechanismError, report_progress, write_csv_part

PART_ROWS = 1 << 21  # rows per part by default (about 100 MB of measurements' CSV, a second or two of one core)
_BATCH_BYTES = 256 << 20  # rows' bytes shipped in one engine job, or built ahead of a pool's workers


@attrs.frozen
class _Refused:
    """A part's rows hold a value a spreadsheet would run (write_csv_part's DataError), as text:
    an engine would report the error as a failed unit of work instead."""

    message: str


_UNREACHED = "unreached"  # a task's answer when it cannot see the scratch folder


@attrs.frozen
class PartWriter:
    """Where a run's release tables write their parts: on `engine` (an `EngineRun` whose units
    run elsewhere: Spark's executors), else in a pool of `workers` processes (one: this process).
    `parts`: how many (tests); by default one per `PART_ROWS` rows."""

    engine: object = None
    workers: int = 1
    parts: int | None = None

    def write(
        self,
        maker,
        pieces: Sequence,
        sizes: Sequence[int],
        source: Callable,
        folder: str,
        label: str,
        rows: int,
    ) -> list[str]:
        """Write `pieces` (each `sizes` rows at most) as part files in `folder`; their names, in order.

        maker: the table's common part, `maker.frames(pieces, source(pieces))` giving a part's
        frames; label: the file the parts become (a refusal names it); rows: what the table
        announced, which the parts must hold."""
        total = int(np.sum(sizes)) if len(sizes) else 0
        wanted = self.parts or max(1, math.ceil(total / PART_ROWS))
        groups = split(sizes, wanted)
        names = [f"part-{i:05d}.csv" for i in range(len(groups))]
        probe = ".probe-" + secrets.token_hex(16)  # a part's name never starts with a dot
        os.close(os.open(os.path.join(folder, probe), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        task = functools.partial(_write_part, folder=folder, probe=probe, label=label)
        parts = [(names[i], tuple(pieces[a:b])) for i, (a, b) in enumerate(groups)]
        try:
            if self.engine is not None:
                answers = self._on_engine(parts, maker, source, task, label)
            elif self.workers > 1 and len(parts) > 1:
                answers = self._in_pool(parts, maker, source, task, label)
            else:
                answers = self._here(parts, maker, source, task, label)
            unreached = [i for i, answer in enumerate(answers) if isinstance(answer, str) and answer == _UNREACHED]
            if unreached:  # tasks that could not see the folder (another machine's): written here
                again = self._here([parts[i] for i in unreached], maker, source, task, label)
                for i, answer in zip(unreached, again):
                    answers[i] = answer
            written = 0
            for answer in answers:
                if isinstance(answer, _Refused):
                    raise DataError(answer.message)
                written += answer
        finally:
            os.unlink(os.path.join(folder, probe))
        if written != rows:
            raise MechanismError(f"TopDown announced {rows} rows for {label} but its parts hold {written}")
        return names

    def _here(self, parts, maker, source, task, label) -> list:
        """Each part in this process, one after another."""
        out = []
        for done, (name, part) in enumerate(parts, start=1):
            try:
                out.append(task(maker, name, part, source(part)))
            except Exception as exc:
                raise _failed(label, name, exc) from exc
            report_progress(f"writing {label}", done, len(parts))
        return out

    def _in_pool(self, parts, maker, source, task, label) -> list:
        """Each part a task of a pool whose processes got `maker` once; at most about
        `_BATCH_BYTES` of rows built ahead of them (a part's rows are made as it is submitted)."""
        methods = mp.get_all_start_methods()
        context = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        pool = cf.ProcessPoolExecutor(
            min(self.workers, len(parts)), mp_context=context, initializer=_keep, initargs=(maker,)
        )
        out: list = [None] * len(parts)
        pending: dict = {}
        try:
            done = ahead = 0
            for i, (name, part) in enumerate(parts):
                rows_of = source(part)
                size = rows_of.nbytes
                while pending and (ahead + size > _BATCH_BYTES or len(pending) >= 2 * self.workers):
                    ahead -= _collect(pending, out, label)
                    done += 1
                    report_progress(f"writing {label}", done, len(parts))
                pending[pool.submit(_kept_part, task, name, part, rows_of)] = (i, name, size)
                ahead += size
            while pending:
                _collect(pending, out, label)
                done += 1
                report_progress(f"writing {label}", done, len(parts))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # no task still writes once this returns
        return out

    def _on_engine(self, parts, maker, source, task, label) -> list:
        """One task per part on the engine, a job per batch of at most `_BATCH_BYTES` of rows."""
        out, batch, size = [], [], 0
        func = functools.partial(_engine_part, task=task, maker=maker)
        for i, (name, part) in enumerate(parts):
            rows_of = source(part)
            batch.append(((label, i), (name, part, rows_of)))
            size += rows_of.nbytes
            if size >= _BATCH_BYTES or i == len(parts) - 1:
                out += self.engine.map_items(batch, func, stage=f"writing {label}", per_item=True)
                batch, size = [], 0
        return out


def split(sizes: Sequence[int], wanted: int) -> list[tuple[int, int]]:
    """`wanted` consecutive runs [a, b) of the pieces (fewer when there are fewer pieces),
    none empty, each about the same number of rows."""
    n = len(sizes)
    wanted = max(1, min(int(wanted), n))
    if n == 0:
        return []
    cum = np.cumsum(np.asarray(sizes, dtype=np.float64))
    bounds = [0]
    for k in range(1, wanted):
        cut = int(np.searchsorted(cum, cum[-1] * k / wanted, side="left")) + 1
        bounds.append(min(max(cut, bounds[-1] + 1), n - (wanted - k)))
    bounds.append(n)
    return list(zip(bounds[:-1], bounds[1:]))


def _write_part(maker, name: str, pieces, rows_of, *, folder: str, probe: str, label: str):
    """One part: its rows formatted into `folder`/`name` (the number of rows), `_UNREACHED` when
    the folder is not the driver's (no probe), or the refusal of a formula."""
    if not os.path.exists(os.path.join(folder, probe)):
        return _UNREACHED
    try:
        return write_csv_part(maker.frames(pieces, rows_of), os.path.join(folder, name), label)
    except DataError as exc:
        return _Refused(str(exc))


def _engine_part(key, item, rng, task, maker):
    """`_write_part` as an engine's unit of work (its stream unused: the rows carry their noise's positions)."""
    name, pieces, rows_of = item
    return task(maker, name, pieces, rows_of)


_KEPT: dict = {}  # in a pool's process: the table's common part, given once


def _keep(maker) -> None:
    _KEPT["maker"] = maker


def _kept_part(task, name, pieces, rows_of):
    return task(_KEPT["maker"], name, pieces, rows_of)


def _collect(pending: dict, out: list, label: str) -> int:
    """Wait for one of `pending` (a failed part is raised, named); its rows' size."""
    future = next(cf.as_completed(pending))
    i, name, size = pending.pop(future)
    try:
        out[i] = future.result()
    except Exception as exc:
        raise _failed(label, name, exc) from exc
    return size


def _failed(label: str, name: str, exc: Exception) -> MechanismError:
    """A part that raised, as an engine reports a failed unit of work: the stage, the part, the error."""
    return MechanismError(f"writing {label}: the part {name} failed: {type(exc).__name__}: {exc}")
