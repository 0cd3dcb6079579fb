"""The plugin contract's version, and which versions a plugin may declare.

`dpspec.api` carries `API_VERSION` ("MAJOR.MINOR"). A minor version only adds names; a name
that moves keeps working, with a DeprecationWarning naming its new import, until the next major
version. A plugin states the version it was written against as a module attribute,
`DPSPEC_API = "1.1"`, and gets a clear refusal instead of an import crash when this dpspec does
not serve it (docs/guides/compatibility.md).
"""

from __future__ import annotations

import ast
import importlib.util
import re

from dpspec._version import __version__

API_VERSION = "1.7"  # 1.7: typed answers of the optional hooks (Power, BudgetBreakdown, ExpectedError, ComparedCounts, Semantics with AttributeBudget, AttributeQuery, GeographyBudget and SemanticsRow; the dicts and lists of dicts deprecated), StreamedTable.write_parts (a table written where its units live, as part files the core joins) and write_csv_part; 1.6: nested parameters (ParamSpec fields, keys, values, items, table_param; the types map, list and query), Diagnostic.path and located (a path into the mechanism block located by the core), param_label; RunContext and Mechanism.run_context / uses_engine (the old run signature deprecated, through an adapter), BudgetSection and the dpspec_report_budget hook, further semantics rows (each with its own description), ReleaseColumns.declared_rows, ChangeOne (change_one tuples deprecated); 1.5: CountLikelihood.log_max_total (a bound on a block's whole log-likelihood), Mechanism.release_columns and ReleaseColumns, Mechanism.own_random_source, ir.line_column (where a node is written); 1.4: Mechanism.power (dpspec infer --power), sampler_limit_problem, echo, terminal_text, project_with_threshold; 1.3: exact budgets (interval; budget values are Fractions, floats still accepted), ClippingBound, ComposedPart, project_to_total, record_adaptive_rows, record_measurement(sparse=), Mechanism.opendp_script, Mechanism.proof and .sampling; 1.2: declared key sets (OutputKeys, declared_keys); 1.1: dpspec.api is the surface; 1.0: dpspec 0.1's flat paths (dpspec.hookspecs, ...), deprecated
OLDEST_SERVED = "1.0"
DECLARATION = "DPSPEC_API"
_VERSION = re.compile(r"^(\d+)\.(\d+)$")


def _parts(text: str) -> tuple[int, int]:
    m = _VERSION.match(text)
    return int(m.group(1)), int(m.group(2))


def served(declared) -> str | None:
    """Why this dpspec cannot serve a plugin declaring `declared`, or None when it can."""
    if not isinstance(declared, str) or not _VERSION.match(declared):
        return (
            f'it declares {DECLARATION} = {declared!r}, not a plugin API version such as "{API_VERSION}" (MAJOR.MINOR)'
        )
    need, ours, oldest = _parts(declared), _parts(API_VERSION), _parts(OLDEST_SERVED)
    if need[0] > ours[0] or (need[0] == ours[0] and need[1] > ours[1]):
        return (
            f"it needs dpspec plugin API {declared}, newer than this dpspec ({__version__}) serves "
            f"(API {API_VERSION}); upgrade dpspec"
        )
    if need < oldest:
        return (
            f"it was written for dpspec plugin API {declared}, which this dpspec ({__version__}) no longer serves "
            f"(API {OLDEST_SERVED} to {API_VERSION}); upgrade the plugin, or use an older dpspec"
        )
    return None


def declared_in_source(module_name: str):
    """The plugin's `DPSPEC_API` read from its source without running it: a plugin written for a
    newer API may not even import here, and its author should still get the version refusal."""
    try:
        spec = importlib.util.find_spec(module_name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        with open(spec.origin, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == DECLARATION for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None
