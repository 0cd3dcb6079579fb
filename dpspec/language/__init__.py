"""The language stage: reading spec text, parsing it into the IR, formatting it back, and
describing it in words."""
