"""Publishing an output set: all-or-nothing folders, atomic files, and the guard that keeps inputs sacred."""
