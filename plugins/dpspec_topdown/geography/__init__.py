"""The geography TopDown runs on: the hierarchy of units, the declared geography file, and the spine
(the hierarchy split into AIAN parts, by group-quarters types, or with single-child units bypassed)."""
