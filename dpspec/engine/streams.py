"""Randomness keyed per unit of work, so a release does not depend on who ran which unit.

Every unit of work (a stratum, a geography node, a (geography, group) cell) gets its own ChaCha20
generator whose 256-bit key is SHA-256 of the run key and a canonical encoding of the unit's key.
The same run key therefore gives the same draws on any engine, in any order, under any
partitioning; distinct keys get unrelated streams (SHA-256 is collision resistant, and ChaCha20
with distinct keys is a family of independent pseudorandom streams). The run key is the seed when
one is given, else 256 bits of operating-system entropy, exactly as `dpspec.run.compiler.make_rng`.
"""

from __future__ import annotations

import hashlib
import numbers
import secrets
import struct

import numpy as np
from randomgen import ChaCha

DOMAIN = b"dpspec unit stream v1\x00"
KEY_BITS = 256


def new_run_key(seed: int | None) -> int:
    """The run key: the seed itself (reduced to 256 bits) or fresh OS entropy."""
    if seed is None:
        return secrets.randbits(KEY_BITS)
    return int(seed) % (1 << KEY_BITS)


def encode_key(key) -> bytes:
    """A canonical, injective byte encoding of a unit key.

    Each value carries a type tag and a length, so ("ab", "c") and ("a", "bc"), 1 and "1",
    1 and (1,) all differ. numpy scalars encode as the Python value they equal, so a key read
    through pandas, Arrow or Spark encodes the same way whatever the column's storage width.
    """
    if isinstance(key, (tuple, list)):
        parts = [encode_key(k) for k in key]
        return b"T" + struct.pack(">Q", len(parts)) + b"".join(parts)
    if key is None:
        return b"N"
    if isinstance(key, (bool, np.bool_)):
        return b"B1" if key else b"B0"
    if isinstance(key, numbers.Integral):
        value = int(key)
        raw = value.to_bytes((value.bit_length() + 8) // 8 or 1, "big", signed=True)
        return b"I" + struct.pack(">Q", len(raw)) + raw
    if isinstance(key, str):
        raw = key.encode("utf-8")
        return b"S" + struct.pack(">Q", len(raw)) + raw
    if isinstance(key, bytes):
        return b"Y" + struct.pack(">Q", len(key)) + key
    if isinstance(key, numbers.Real):
        value = float(key)
        if value.is_integer():  # 3.0 read as a float column is the same unit as 3
            return encode_key(int(value))
        return b"F" + struct.pack(">d", value)
    raise TypeError(f"a unit key must be built of ints, strings, bools, floats and tuples, not {type(key).__name__}")


def stream_key(run_key: int, key) -> int:
    """The 256-bit ChaCha20 key of one unit's stream."""
    digest = hashlib.sha256(DOMAIN + int(run_key).to_bytes(KEY_BITS // 8, "big") + encode_key(key)).digest()
    return int.from_bytes(digest, "big")


def unit_rng(run_key: int, key, position: int = 0) -> np.random.Generator:
    """The generator of one unit of work: ChaCha20 (20 rounds) keyed by `stream_key`.

    position: start this many 32-bit words into the stream (`stream_position` of an earlier
    generator of the same unit), so a later draw can be repeated without repeating the earlier
    ones: TopDown re-draws one query's noise when it writes the measurements."""
    return np.random.Generator(ChaCha(key=stream_key(run_key, key), counter=int(position), rounds=20))


def stream_position(rng: np.random.Generator) -> int:
    """How many 32-bit words a `unit_rng` generator has used: where `unit_rng(..., position=)`
    resumes it, draw for draw (ChaCha keeps no other state between draws)."""
    low, high = (int(w) for w in rng.bit_generator.state["state"]["ctr"])
    return low | (high << 64)


def derive_run_key(run_key: int, label) -> int:
    """A run key for a sub-run (e.g. the i-th repeated run), unrelated to the parent's streams."""
    return stream_key(run_key, ("derived run key", label))
