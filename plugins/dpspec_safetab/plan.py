"""What every unit of a SafeTab run needs to know, in one picklable object.

A run has two kinds of units (see `tabulate.run`): partitions of the records, which count what
they hold per (geography unit, group, stage-2 cell), and (block, bucket) batches of geography
units, which measure the summed counts. Both run wherever the engine puts them (a Spark
executor), so they get the design, the iteration table and the public parameters from here,
never from the driver's memory.
"""

from __future__ import annotations

import zlib

import attrs
import numpy as np
import pandas as pd

from .design import ROOT, Design, sigma2
from .iterations import IterationTable

ROWS_PER_PARTITION = 20_000  # records a tabulating unit should hold at least, on average
ROWS_PER_BUCKET = 200_000  # records per bucket of geography units a measuring unit handles


@attrs.frozen
class Plan:
    design: Design
    table: IterationTable
    race_columns: tuple
    eth_column: str
    variables: dict  # stage-2 variable -> its values as text, in the domain's order
    source: str
    columns: tuple  # the columns the run reads
    blocks: tuple  # (geography level, iteration level) of every measured block, in run order
    fanouts: dict  # (iteration level, granularity) -> the fan-out k used
    buckets: int  # geography units of a block are batched into this many buckets
    run_key: int
    units: dict = attrs.field(factory=dict, eq=False)  # geography level -> (declared codes, sorted; their buckets)
    marker_owner: tuple | None = ()  # the key of the tabulating unit that emits every (block, bucket)'s marker
    public_totals: object = None  # SafeTab-H: the published totals choosing the detail
    noise: object = sigma2  # (fanout, rho) -> sigma², the mechanism's calibration
    keep_truths: bool = False  # `dpspec sweep --runs`: emit each released cell's truth beside it (kind 2)

    @property
    def sizes(self) -> list[int]:
        return [len(v) for v in self.variables.values()]

    @property
    def n_cells(self) -> int:
        """Cells of the full cross of every stage-2 variable (a detail's cells are margins of it)."""
        return int(np.prod(self.sizes)) if self.variables else 1

    def selection(self, level: int, geo: str) -> pd.DataFrame:
        return self.table.selection(level, self.design.granularity(geo))

    def fanout(self, level: int, geo: str) -> int:
        return self.fanouts[(level, self.design.granularity(geo))]

    def bucket_units(self, geo: str, bucket: int) -> np.ndarray:
        """The declared units of `geo` in `bucket`, sorted as text: what that measuring unit
        measures, whether or not any record lives in them."""
        codes, buckets = self.units[geo]
        return codes[buckets == bucket]


def declared_units(units: dict, buckets: int) -> dict:
    """{geography level: (its declared codes as an object array, each one's bucket)}."""
    out = {}
    for geo, codes in units.items():
        array = np.asarray(codes, dtype=object)
        out[geo] = (array, buckets_of(array, buckets))
    return out


def empty_frame(schema: dict) -> pd.DataFrame:
    """A unit's output with no rows, in its declared columns (text as object, else int64)."""
    return pd.DataFrame({c: pd.Series([], dtype=object if k == "str" else "int64") for c, k in schema.items()})


def measured_blocks(design: Design) -> tuple:
    """Every (geography level, iteration level) some table measures (rho > 0), in the order the
    tables' cells are run: geography levels in the design's order, then iteration levels."""
    used = {(c.geo, c.level) for td in design.tables for c in td.cells if c.rho != 0}
    return tuple((geo, level) for geo in design.geo_levels for level in sorted({lv for g, lv in used if g == geo}))


def bucket_count(rows: int) -> int:
    """How many buckets a block's geography units go into: enough that a measuring unit handles
    about `ROWS_PER_BUCKET` records' worth of cells, whatever the run's size. Any number gives
    the same release (noise is keyed per cell); it only sets the units' size."""
    return int(min(4096, max(1, rows // ROWS_PER_BUCKET)))


def buckets_of(geocodes: np.ndarray, buckets: int) -> np.ndarray:
    """A geography unit's bucket: CRC-32 of its code, so every unit of work agrees on it."""
    if buckets == 1:
        return np.zeros(len(geocodes), dtype=np.int64)
    return np.array([zlib.crc32(str(g).encode()) % buckets for g in geocodes], dtype=np.int64)


def partition_column(design: Design, distinct: dict, rows: int) -> list[str]:
    """The geography column the records are split by for tabulating: the finest hierarchy level
    with at most one unit per `ROWS_PER_PARTITION` records (a county in a national run), so
    units are many but each holds enough records to be worth a task. [] (one unit): no level
    has that few units, or the run is small."""
    best = []
    limit = max(1, rows // ROWS_PER_PARTITION)
    for geo in design.geo_levels:
        if geo == ROOT or geo in design.components or geo not in distinct:
            continue
        if distinct[geo] <= limit:
            best = [geo]
    return best
