"""A TopDown run end to end: `run_topdown`, the steps it takes level by level, and a joint table
solved beside the person table."""
