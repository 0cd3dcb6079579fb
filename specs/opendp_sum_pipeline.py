"""The OpenDP pipeline `specs/opendp_sum.dps` names: the sum of ages clamped to 0..120, with Laplace noise."""

from __future__ import annotations


def make_measurement():
    """epsilon = 120 / 240 = 0.5 for one person added or removed (the sum's sensitivity is the clamp bound)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()
    return space >> dp.t.then_clamp((0, 120)) >> dp.t.then_sum() >> dp.m.then_laplace(scale=240.0)
