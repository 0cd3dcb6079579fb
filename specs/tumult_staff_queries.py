"""The Tumult Analytics queries `specs/tumult_counts.dps` names: staff numbers and total pay by region."""

from __future__ import annotations


def make_queries(source, keys):
    """Run by the Tumult interpreter: `keys` is the KeySet of the spec's declared regions (never the data's)."""
    from tmlt.analytics import QueryBuilder

    return {
        "headcount": QueryBuilder(source).groupby(keys).count(),
        "total_pay": QueryBuilder(source).groupby(keys).sum("salary", low=0, high=200),
    }
