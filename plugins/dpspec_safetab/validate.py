"""SafeTab's record checks, made on the driver from counts, before any unit of work runs.

Why: a bad record (an unknown code, no race code, too many codes, a value outside a variable's
range, more groups than the declared fan-out) must be a data error in the user's words, naming
the row or the value and how many rows hold it, however the records are spread over executors.
Every check depends only on a record's codes or on one variable, so it is made on the counts of
the distinct code combinations (a few thousand nationally: codes, not persons) and of each
variable's values. A frame the driver holds is reduced in order of first appearance, so a
message still names the first bad row; an engine's table is counted by the engine.
"""

from __future__ import annotations

from dpspec.api import EngineTable

from .combinations import combinations
from .iterations import IterationTable, encode_records, flatten
from .records import Inputs, variable_codes


def check_records(inputs, table: IterationTable, max_race_codes: int, fanouts: dict, engine=None) -> None:
    """Raise the DataError of the first bad record, in the order the checks always ran: codes,
    then the stage-2 variables, then the fan-out of every measured selection.

    fanouts: (iteration level, granularity) -> the declared fan-out k of each selection measured."""
    code_columns = [*inputs.race_columns, inputs.eth_column]
    frame, origin = _counted(inputs.frame, code_columns, engine)
    codes = encode_records(frame, inputs.race_columns, inputs.eth_column, table, max_race_codes, inputs.source, origin)
    for var, values in inputs.variables.items():
        var_frame, var_origin = _counted(inputs.frame, [var], engine)
        variable_codes(var_frame, Inputs(var_frame, (), "", {var: values}, inputs.source), var_origin)
    for (level, granularity), k in fanouts.items():
        flatten(codes, table, table.selection(level, granularity), k, inputs.source)


def _counted(data, columns: list[str], engine):
    """(the distinct combinations of `columns`, what each stands for): counted by the engine
    for its table, reduced here (rows numbered) for a frame."""
    return combinations(data, columns, engine if isinstance(data, EngineTable) else None)
