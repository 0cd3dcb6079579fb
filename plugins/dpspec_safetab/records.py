"""The records as SafeTab reads them: their columns, counted per distinct combination of the
columns a run reads, checked and encoded (shared by the record checks, `validate`, and the
counting units, `truths`)."""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError

from .combinations import Origin, combinations, rows_text, text_codes, through
from .design import NATION_CODE, ROOT
from .iterations import IterationTable, RecordCodes, encode_records


@attrs.frozen
class Inputs:
    frame: object  # the records: a pandas frame, or an EngineTable (dpspec.api) the engine holds
    race_columns: tuple[str, ...]
    eth_column: str
    variables: dict  # detail variable -> list of its values (as text)
    source: str = "data"


def region_codes(frame: pd.DataFrame, geo: str) -> tuple[np.ndarray, np.ndarray]:
    if geo == ROOT:
        return np.zeros(len(frame), dtype=np.int64), np.array([NATION_CODE], dtype=object)
    return sorted_codes(frame[geo])


def sorted_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(each value's position among the distinct values sorted as text, -1 where missing; those
    values): hashing the rows and sorting only the distinct values (geocodes: a few thousand)."""
    codes, labels = text_codes(values)
    order = np.argsort(labels, kind="stable")
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    return through(rank, codes), labels[order]


def variable_codes(frame: pd.DataFrame, inputs: Inputs, origin: Origin) -> dict:
    out = {}
    for var, values in inputs.variables.items():
        found, labels = text_codes(frame[var])
        codes = through(pd.Index(values).get_indexer(labels), found)
        if (codes < 0).any():
            row = int(np.flatnonzero(codes < 0)[0])
            value = frame[var].iloc[row]
            if origin.numbered:
                raise DataError(
                    f"{inputs.source}: row {origin.row(row)}: column '{var}' holds '{value}', "
                    f"not one of {', '.join(values)}"
                )
            same = found == found[row]  # the rows holding that value (or missing, as it is)
            raise DataError(
                f"{inputs.source}: column '{var}' holds '{value}' in {rows_text(origin.count(same))}, "
                f"not one of {', '.join(values)}"
            )
        out[var] = codes.astype(np.min_scalar_type(max(len(values) - 1, 0)))  # small: gathered per flattened pair
    return out


@attrs.frozen
class Records:
    """The records as SafeTab counts them: their distinct combinations of the columns it reads
    (`frame`), what each stands for (`origin`), their codes and their stage-2 variables' codes."""

    frame: pd.DataFrame
    origin: Origin
    codes: RecordCodes
    variables: dict  # variable -> each row's position among the variable's values


def read_records(
    inputs: Inputs, columns: list[str], table: IterationTable, max_race_codes: int, engine=None
) -> Records:
    """The records of `inputs` counted per distinct combination of `columns` (by the engine when
    it holds them), checked and encoded; a bad record is a DataError naming its row, or on an
    engine table the value and how many rows hold it."""
    frame, origin = combinations(inputs.frame, columns, engine)
    codes = encode_records(frame, inputs.race_columns, inputs.eth_column, table, max_race_codes, inputs.source, origin)
    return Records(frame, origin, codes, variable_codes(frame, inputs, origin))
