"""The least-squares fits that turn noisy measurements into a release: one node's weighted
least-squares problem and its solvers, the estimation and rounding passes, the joint fits of two
tables, and the constraints the fits keep (invariants, equalities, post-processing-only bounds)."""
