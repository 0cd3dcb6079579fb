"""Randomized response (Warner 1965): the classroom example of pure DP, and the worked example
for plugin authors.

Each unit reports its binary attribute truthfully with probability p and the other value
otherwise. Under Hamming distance on that unit (change one unit's answer) the likelihood ratio
of any output is at most max(p/(1-p), (1-p)/p), so the mechanism is pure |ln(p/(1-p))|-DP. The
number of units is published exactly: `count TABLE` is an invariant.

The entry point names this package, so the hook implementations are re-exported here; the
modules beside it are the layout the plugin guide describes (docs/plugins.md).
"""

from __future__ import annotations

from .algorithm import epsilon, estimate
from .design import MAX_DENOMINATOR, Design
from .plugin import RandomizedResponse, __version__, dpspec_mechanisms, dpspec_report_sections

__all__ = [
    "Design",
    "MAX_DENOMINATOR",
    "RandomizedResponse",
    "__version__",
    "dpspec_mechanisms",
    "dpspec_report_sections",
    "epsilon",
    "estimate",
]
