"""dpspec's version, in a module of its own so every stage can name it without importing the verbs."""

__version__ = "0.1.0"
