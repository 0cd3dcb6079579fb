"""What a run measures (each noisy query's exact value, noise and sensitivity), recorded for `dpspec verify --replay`.

Why a context variable: a mechanism states where it adds noise with one call at that point
(`record_measurement`), and only a replay, which runs the mechanism on neighbouring datasets in
this process, collects the calls. Outside a replay the call returns at once: no copy, no cost a
release could notice, and nothing confidential is kept anywhere.
"""

from __future__ import annotations

import contextlib
import contextvars
from fractions import Fraction
from typing import Any

import attrs

from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())

KINDS = ("discrete_gaussian", "discrete_laplace", "exponential", "randomized_response", "none")
NORMS = ("l1", "l2")

_RECORDER: contextvars.ContextVar["Recording | None"] = contextvars.ContextVar("dpspec_measurements", default=None)


@attrs.frozen
class Measurement:
    """One noisy query (or one exactly released quantity, kind "none") of one run.

    exact: the confidential values the noise was added to (a flat float64 array; the shape it had
    is `shape`). scale: sigma² (discrete Gaussian), b (discrete Laplace), epsilon per unit of
    score sensitivity (exponential), the keep probability (randomized response). sensitivity:
    the L1 or L2 sensitivity (by `norm`) the noise was set for, under the mechanism's native
    relation, when it has one (exact; a float only for a square root, such as sqrt(k) for a record
    counted in k cells). adaptive: later control flow or structure depends on this measurement's
    noisy value (SafeTab's detail choice), so differences after it are explained. keys: one text
    key per value (a query measured in pieces, unit of work by unit of work, is one measurement
    keyed by cell), or None (values by position). sparse: the query has a value for every cell
    and `keys` name only the nonzero ones (a query too large to record densely, such as TopDown's
    detailed query on the DHC schema): a cell absent on one side is 0 there, and which cells are
    listed is no control flow.
    """

    label: str
    kind: str
    exact: Any
    shape: tuple
    scale: Any = None
    sensitivity: Any = None
    norm: str = "l2"
    adaptive: bool = False
    keys: tuple | None = None
    sparse: bool = False


@attrs.define
class Recording:
    """What one run recorded, in the order the mechanism measured."""

    measurements: list = attrs.Factory(list)
    adaptive_outputs: set = attrs.Factory(set)
    adaptive_rows: dict = attrs.Factory(dict)  # output -> (key columns, governed_by)


def recording_now() -> bool:
    """Whether a replay is recording this run (a mechanism may skip work only a replay reads)."""
    return _RECORDER.get() is not None


def record_measurement(
    label: str,
    exact,
    kind: str,
    scale=None,
    sensitivity=None,
    norm: str = "l2",
    adaptive: bool = False,
    keys=None,
    sparse: bool = False,
) -> None:
    """State a noisy query where its noise is drawn: a no-op unless a replay is recording.

    label names the query within a run (the same query on a neighbouring dataset has the same
    label), e.g. "county/042/total"; calls with one label and `keys` are pieces of one query.
    keys: a sequence of equally long columns naming each value's cell, or a function returning
    one (a lambda costs nothing when no replay records). sparse (with keys): only the nonzero
    cells are given, every other one is 0. See `Measurement` for the rest."""
    recording = _RECORDER.get()
    if recording is None:
        return

    if kind not in KINDS:
        raise ValueError(f"record_measurement: kind {kind!r} is not one of {', '.join(KINDS)}")
    if norm not in NORMS:
        raise ValueError(f"record_measurement: norm {norm!r} is not one of {', '.join(NORMS)}")
    values = exact.toarray() if hasattr(exact, "toarray") else exact  # a sparse matrix
    values = np.array(values, dtype=np.float64, copy=True)
    recording.measurements.append(
        Measurement(
            str(label),
            kind,
            values.ravel(),
            tuple(values.shape),
            _exact(scale),
            _exact(sensitivity),
            norm,
            bool(adaptive),
            _keys(keys, values.size),
            bool(sparse) and keys is not None,
        )
    )


def _keys(keys, size: int) -> tuple | None:
    """One text key per value ("a|b" over several columns), from columns or a function giving them."""
    if keys is None:
        return None
    columns = keys() if callable(keys) else keys
    columns = [list(map(str, c)) for c in columns]
    if any(len(c) != size for c in columns):
        raise ValueError(f"record_measurement: {size} values but keys of lengths {[len(c) for c in columns]}")
    return tuple("|".join(parts) for parts in zip(*columns)) if columns else None


def record_adaptive_outputs(*names: str) -> None:
    """State that these outputs' structure (rows, keys) follows an adaptive measurement's noisy
    value, as declared (SafeTab's detail per table): a replay does not count their differences."""
    recording = _RECORDER.get()
    if recording is not None:
        recording.adaptive_outputs.update(map(str, names))


def record_adaptive_rows(output: str, columns, governed_by) -> None:
    """State, row by row, that which rows `output` has follows adaptive measurements: its rows are
    keyed by `columns`, and governed_by(frame of those columns, as text) gives, per row, the
    (label prefix, key prefix) of the measurements whose noisy values decide whether the row is
    there (SafeTab: the table/geography/level's measurements of that unit and group). A replay
    then explains a row that appears or disappears only when one of those measurements changed;
    any other change of the output's rows is a finding (finer than `record_adaptive_outputs`)."""
    recording = _RECORDER.get()
    if recording is not None:
        recording.adaptive_rows[str(output)] = (tuple(map(str, columns)), governed_by)


def _exact(value):
    """A scale or sensitivity as an exact number where it is one (Fraction, int), else as given."""
    if value is None or isinstance(value, (int, Fraction)):
        return value
    try:
        if isinstance(value, np.integer):
            return int(value)
    except ImportError:  # pragma: no cover - numpy is a dependency of every run
        pass
    return value


@contextlib.contextmanager
def recording():
    """Collect every measurement made in this block (this thread and context); yields the Recording."""
    rec = Recording()
    token = _RECORDER.set(rec)
    try:
        yield rec
    finally:
        _RECORDER.reset(token)
