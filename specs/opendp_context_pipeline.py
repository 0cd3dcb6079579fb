"""The OpenDP Context query `specs/opendp_context.dps` names: the sum of ages clamped to 0..120, its noise found by OpenDP."""

from __future__ import annotations


def make_query(ages):
    """A Context of pure epsilon 0.5 for one person added or removed, on the ages dpspec hands over
    (at compile only); the query is returned unreleased, and dpspec releases it after its checks."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    context = dp.Context.compositor(
        data=ages,
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(epsilon=0.5),
        split_evenly_over=1,
        domain=dp.vector_domain(dp.atom_domain(T=int)),
    )
    return context.query().clamp((0, 120)).sum().laplace()
