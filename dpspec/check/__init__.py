"""The check stage: names, types and plugin parameters of a spec, invariants, and the data it names."""
