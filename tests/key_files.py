"""A bundled spec's key files, for a test that writes the spec elsewhere: their paths made absolute."""

from __future__ import annotations

import os
import re

_KEY_PATH = re.compile(r'((?:\bvalues from|^\s*keys) ")([^"]+)(")', re.M)


def keys_from(text: str, base_dir) -> str:
    """`text` with every `values from "P"` and public `keys "P"` made absolute from `base_dir`, the
    folder of the spec it was read from (a copied spec reads the same public key files)."""

    def absolute(m):
        path = m.group(2) if os.path.isabs(m.group(2)) else os.path.normpath(os.path.join(str(base_dir), m.group(2)))
        return m.group(1) + path + m.group(3)

    return _KEY_PATH.sub(absolute, text)
