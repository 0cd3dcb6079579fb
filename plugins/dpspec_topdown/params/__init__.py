"""TopDown's settings read by hand from the mechanism block, and where in the spec text each one
sits (so a SpecError or DataError names its line): kept together to be replaced, one setting at a
time, by the core's typed nested parameters."""
