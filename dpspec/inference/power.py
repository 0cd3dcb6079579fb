"""`dpspec infer --power CELL:H0:H1`: seed 2's Theorem 15 on one cell of a compiled release."""

from __future__ import annotations

from .release import InferError, load_release
from dpspec import ir
from dpspec.errors import MechanismError
from dpspec.check.checker import check
from dpspec.contract.results import power_result
from dpspec.lazy import LazyModule

# imported on first use: at import they would load randomgen with this module
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())

DEFAULT_LEVEL = 0.05


def parse_power(text: str) -> tuple[str, int, int]:
    """CELL:H0:H1 -> (cell, null count, alternative count); the cell may itself hold colons."""
    parts = str(text).rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise InferError(
            f"--power {text!r}: expected CELL:H0:H1, e.g. Allegheny:900:1000 (the cell's count under "
            "the null and under the alternative)"
        )
    try:
        null, alternative = int(parts[1]), int(parts[2])
    except ValueError:
        raise InferError(f"--power {text!r}: H0 and H1 must be whole counts") from None
    if null == alternative or min(null, alternative) < 0:
        raise InferError(f"--power {text!r}: H0 and H1 must be different nonnegative counts")
    return parts[0], null, alternative


def power(spec, release_dir: str, text: str, level: float = DEFAULT_LEVEL) -> dict:
    """The mechanism's `power` on the release in `release_dir` (the spec's, by its hash), as the
    inference JSON's `power`: the theorem, then the `Power`'s fields."""
    if not 0 < level < 1:
        raise InferError(f"--level {level}: expected a level strictly between 0 and 1")
    cell, null, alternative = parse_power(text)
    checked = check(spec)
    release = load_release(release_dir, _compiler.spec_sha256(spec))
    mech = checked.mechanism
    try:
        out = power_result(mech.power(spec, checked.params, release.outputs, cell, null, alternative, level), mech)
    except (MechanismError, ValueError) as exc:
        raise InferError(f"mechanism '{mech.name}': {exc}") from None
    if out is None:
        raise InferError(
            f"mechanism '{mech.name}' does not state the power of a test on its release with and without Z "
            "(seed 2's Theorem 15), so --power cannot report it"
        )
    return {"theorem": "seed 2, Theorem 15", **ir.to_jsonable(out)}
