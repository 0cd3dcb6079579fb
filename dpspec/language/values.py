"""Values in messages, shown as the user wrote them: `25`, not `np.int64(25)`.

Data read through numpy or pandas arrives as numpy scalars, whose repr names the numpy type;
a message quoting a data value or a parameter turns it back into the plain Python value first.
"""

from __future__ import annotations


def plain(value):
    """The Python value behind a numpy scalar (anything else unchanged)."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value


def shown(value) -> str:
    """repr of the plain value: text in quotes, numbers as written."""
    return repr(plain(value))
