"""The OpenDP Deployments Registry: export a spec as a registry entry, import an entry as a spec.

The registry (registry.opendp.org) records real DP deployments in blocks that map onto the
five building blocks of a spec: `dp_variant` (premetric, data domain, unprotected quantities =
invariants and public information), `privacy_loss` (the privacy unit and the parameters). Real
entries are mostly prose; the formal parts travel as dpspec notation in fenced code blocks, the
prose as the spec's `notes`, so that export and import are inverse on what an entry carries.
"""
