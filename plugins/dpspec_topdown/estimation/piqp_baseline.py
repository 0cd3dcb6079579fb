"""PIQP's build for the x86-64 baseline instruction set, whatever the CPU it runs on.

Why: the piqp package ships one build per instruction set (AVX-512, AVX2, the baseline) and at
import loads the widest the CPU has. The builds add and multiply in other orders, so the same fit
comes out with other last bits: on 11 captured fits of 3,000-110,000 variables the baseline and
AVX2 builds differed in every one, by up to 6e-4 in a cell the fit does not pin down, and where
such a cell's rounding falls on a tie a release can move. (The bundled pl94_units_topdown
release at seed 7, pinned on an earlier machine, came out as other bytes with the same code on
an AVX2 machine, which loads the AVX2 build; PIQP solves its fits. There the baseline and AVX2
builds happened to round to the same bytes.) Loaded here before anything imports piqp, the
package takes its baseline build on every machine, so a PIQP fit is a function of the problem
alone. It costs nothing measurable: on those 11 fits the baseline build took 20.2 and 21.8
CPU-s in all in two runs, the AVX2 build 20.0 and 23.5 (2026-12-07).

How: piqp chooses its build from its own ``piqp.instruction_set`` module's ``avx2`` and
``avx512f``; a stand-in that says neither is put in its place for the import.
tests/test_topdown_qp_choice.py checks that the build solving the fits is the baseline one.
"""

from __future__ import annotations

import sys
import types

BASELINE = "piqp.piqp_python"  # the module the baseline build's classes come from

if "piqp" not in sys.modules:
    _none = types.ModuleType("piqp.instruction_set")
    _none.avx2 = False
    _none.avx512f = False
    sys.modules["piqp.instruction_set"] = _none

from piqp import PIQP_SOLVED, SparseSolver  # noqa: E402


def build() -> str:
    """The module PIQP's solver classes came from (BASELINE unless piqp was imported first)."""
    return SparseSolver.__module__


__all__ = ["BASELINE", "PIQP_SOLVED", "SparseSolver", "build"]
