"""Seed 2 (Seeman, Slavkovic & Reimherr, Formal privacy for partially private data) as dpspec
mechanisms: the Wasserstein exponential mechanism over count vectors with base measures built
from public information, and the post-processing alternative it is compared with."""

from .plugin import NoisyPostprocessed, WassersteinExponential, dpspec_mechanisms  # noqa: F401

__version__ = "1.0.0"
