"""The run stage: compiling a spec (check, data, mechanism, budget, audit) and the exact noise samplers."""
