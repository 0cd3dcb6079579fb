"""What a verification found: per pair and overall, as text and as stable JSON.

The JSON form is what `dpspec verify --json` prints and what `audit`/`compile --verify FILE`
read back; it names the spec it was made for (its SHA-256) so it cannot be attached to another.
"""

from __future__ import annotations

import math

import attrs

from dpspec.verify.bounds import CITATIONS, event_bound, largest_detectable
from dpspec.language.exact_input import strict_json
from dpspec.language.reading import NotRegularFile, open_regular
from dpspec.schemas import refuse_newer
from dpspec.verify.miniature import VerifyError

VERDICTS = ("consistent", "refuted", "inconclusive")
EXIT_CODES = {"consistent": 0, "refuted": 1, "inconclusive": 4}
QUANTITY = {"pure": "epsilon", "approx": "epsilon", "zcdp": "rho", "renyi": "epsilon", "gdp": "mu"}


def _num(x):
    if x is None:
        return None
    x = float(x)
    return "inf" if math.isinf(x) else round(x, 6)


@attrs.frozen
class PairResult:
    label: str
    distance: int
    claimed: float  # the claim for this miniature universe and distance, in the spec's currency
    lower_bound: float
    largest_detectable: float
    runs_needed: int | None  # runs per side for the largest detectable bound to pass the claim
    test: object  # events.EventTest

    @property
    def refuted(self) -> bool:
        return self.lower_bound > self.claimed * (1 + 1e-9)

    @property
    def testable(self) -> bool:
        return self.largest_detectable > self.claimed

    def to_json(self) -> dict:
        return {
            "pair": self.label,
            "distance": self.distance,
            "claimed": _num(self.claimed),
            "lower_bound": _num(self.lower_bound),
            "largest_detectable": _num(self.largest_detectable),
            "runs_needed": self.runs_needed,
            **self.test.to_json(),
        }


@attrs.frozen
class Verification:
    """The outcome of `dpspec verify`: a verdict, a lower bound and the claim in one currency."""

    verdict: str
    claimed: float
    lower_bound: float
    confidence: float
    runs: int  # runs per dataset of each pair
    flavor: dict  # premetric (and delta or alpha), relation, table
    pairs: tuple[PairResult, ...]
    mechanism: dict
    path: str  # "mechanism" (its own neighbours) or "generic"
    spec_sha256: str
    runs_needed: int | None = None
    seed: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def quantity(self) -> str:
        return QUANTITY.get(self.flavor.get("premetric"), "budget")

    def _quantity_words(self) -> str:
        """The quantity with the parameter it is quoted at (epsilon at delta, epsilon at alpha)."""
        at = next((f" at {k} = {self.flavor[k]:g}" for k in ("delta", "alpha") if k in self.flavor), "")
        return self.quantity + at

    def methods(self) -> list[str]:
        return [CITATIONS["test"], CITATIONS["intervals"], CITATIONS[self.flavor["premetric"]]]

    def summary(self) -> str:
        """One sentence that never claims more than the lower bound shows."""
        q, conf = self._quantity_words(), f"{self.confidence:.0%}"
        lb, claim = f"{self.lower_bound:.4g}", f"{self.claimed:.4g}"
        if self.verdict == "refuted":
            return (
                f"refuted: with {conf} confidence the mechanism's {q} is at least {lb}, above the claimed {claim} "
                f"({self.runs:,} runs per dataset)"
            )
        if self.verdict == "inconclusive":
            need = f"about {self.runs_needed:,} runs per dataset" if self.runs_needed else "more runs than can be made"
            return (
                f"inconclusive: {self.runs:,} runs per dataset cannot show {q} above the claimed {claim}; "
                f"{need} would be needed (lower bound so far {lb} at {conf} confidence)"
            )
        return (
            f"consistent: with {conf} confidence the {q} is at least {lb}, not above the claimed {claim} "
            f"({self.runs:,} runs per dataset); this finds no violation, it does not prove the claim"
        )

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "claimed": _num(self.claimed),
            "lower_bound": _num(self.lower_bound),
            "confidence": self.confidence,
            "runs": self.runs,
            "flavor": dict(self.flavor),
            "quantity": self.quantity,
            "runs_needed": self.runs_needed,
            "summary": self.summary(),
            "mechanism": dict(self.mechanism),
            "neighbours": self.path,
            "pairs": [p.to_json() for p in self.pairs],
            "methods": self.methods(),
            "seed": self.seed,
            "spec_sha256": self.spec_sha256,
        }

    def text(self) -> str:
        lines = [
            self.summary(),
            f"mechanism: {self.mechanism.get('name')} {self.mechanism.get('version')}; neighbours: "
            + ("supplied by the mechanism" if self.path == "mechanism" else "built from the domain (generic)"),
        ]
        flavor = ", ".join(f"{k} {v}" for k, v in self.flavor.items())
        lines.append(f"flavor: {flavor}")
        for p in self.pairs:
            lines.append(
                f"  {p.label} (distance {p.distance}): lower bound {p.lower_bound:.4g} vs claimed "
                f"{p.claimed:.4g}; event: {p.test.description} "
                f"({p.test.k_left} vs {p.test.k_right} of {p.test.n} held-out runs)"
            )
        lines.append("method: " + "; ".join(self.methods()))
        if self.seed is not None:
            lines.append(f"seed {self.seed} (reproducible)")
        return "\n".join(lines)


MAX_RESULT_BYTES = 5_000_000  # a verification result is a few kB; more is not one


def load_json(path: str) -> dict:
    """A verification result file written by `dpspec verify --json` (raises VerifyError)."""

    try:
        with open_regular(path) as fh:  # a device such as /dev/zero would be read without end
            raw = fh.read(MAX_RESULT_BYTES + 1)
        if len(raw) > MAX_RESULT_BYTES:  # cut short, it would read as a JSON syntax error
            raise VerifyError(
                f"{path}: larger than {MAX_RESULT_BYTES:,} bytes, the limit for a verification result "
                "(one is a few kB); give the file `dpspec verify --json` wrote"
            )
        data = strict_json(raw)
    except NotRegularFile:
        raise VerifyError(
            f"{path}: not a regular file (a device, pipe or folder); give the file `dpspec verify --json` wrote"
        ) from None
    except OSError as exc:
        raise VerifyError(f"{path}: cannot read the verification result: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # invalid JSON or UTF-8, a 5,000-digit number, deep nesting
        raise VerifyError(f"{path}: not a verification result (invalid JSON: {str(exc)[:200]})") from None

    refuse_newer("verification", data, path, VerifyError)
    missing = [
        k
        for k in ("verdict", "claimed", "lower_bound", "confidence", "runs", "flavor", "spec_sha256")
        if not isinstance(data, dict) or k not in data
    ]
    if missing or data.get("verdict") not in VERDICTS:
        raise VerifyError(
            f"{path}: not a verification result from `dpspec verify --json` "
            f"(missing or invalid: {', '.join(missing) or 'verdict'})"
        )
    return revalidated(data, path)


def _float(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a number")
    out = float(value)
    if math.isnan(out) or (isinstance(value, str) and value != "inf"):
        raise ValueError(f"{value!r} is not a number")
    return out


def _close(a: float, b: float) -> bool:
    """Equal as `_num` writes them (6 decimals), or both infinite."""
    return a == b or abs(a - b) <= 1e-6 + 1e-9 * max(abs(a), abs(b))


def revalidated(data: dict, path: str) -> dict:
    """The file's verdict, bounds and summary recomputed from its own numbers (the hits of each
    pair's event, the runs, the confidence and the claim), as `verify` computes them; a file whose
    stated figures disagree with its numbers is refused rather than quoted (a finding must never
    repeat a forged "passed"). Returns the data with the recomputed summary."""

    def refuse(why: str):
        raise VerifyError(
            f"{path}: an inconsistent verification result ({why}); it is not used. Run `dpspec verify --json` again"
        )

    try:
        flavor = data["flavor"]
        kind = flavor.get("premetric") if isinstance(flavor, dict) else None
        if kind not in QUANTITY:
            refuse(f"unknown premetric {kind!r}")
        options = {k: _float(flavor[k]) for k in ("delta", "alpha") if k in flavor}
        confidence, runs = _float(data["confidence"]), data["runs"]
        pairs = data.get("pairs")
        if not 0 < confidence < 1 or not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
            refuse("the confidence or the number of runs is out of range")
        if not isinstance(pairs, list) or not pairs or not all(isinstance(p, dict) for p in pairs):
            refuse("it lists no pairs, so its bound cannot be recomputed")
        a = (1 - confidence) / len(pairs)
        rows = []
        for p in pairs:
            n, k1, k2 = (p.get(key) for key in ("test_runs_per_side", "hits_first", "hits_second"))
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, k1, k2)) or not (
                0 <= k1 <= n and 0 <= k2 <= n
            ):
                refuse(f"pair {p.get('pair')!r} has no valid hit counts")
            claimed, stated = _float(p.get("claimed")), _float(p.get("lower_bound"))
            bound = float(event_bound(kind, k1, k2, n, a, **options)) if n else 0.0
            if not _close(bound, stated):
                refuse(
                    f"pair {p.get('pair')!r} states the lower bound {stated:g}, but its hits "
                    f"({k1} and {k2} of {n}) give {bound:.6g}"
                )
            detectable = float(largest_detectable(kind, n, a, **options)) if n else 0.0
            rows.append((claimed, bound, detectable, p.get("runs_needed")))
        refuted = [r for r in rows if r[1] > r[0] * (1 + 1e-9)]
        untestable = [r for r in rows if not r[2] > r[0]]
        ratio = lambda r: r[1] / max(r[0], 1e-300)  # noqa: E731
        verdict, head = (
            ("refuted", max(refuted, key=ratio))
            if refuted
            else ("inconclusive", max(untestable, key=lambda r: r[0]))
            if untestable
            else ("consistent", max(rows, key=ratio))
        )
        if verdict != data["verdict"]:
            refuse(f"it says '{data['verdict']}', but its own numbers make it '{verdict}'")
        if not (_close(head[0], _float(data["claimed"])) and _close(head[1], _float(data["lower_bound"]))):
            refuse(
                f"its overall claim and lower bound ({data['claimed']}, {data['lower_bound']}) are not those of its "
                f"pairs ({head[0]:.6g}, {head[1]:.6g})"
            )
        needed = data.get("runs_needed")
        if needed is not None and (not isinstance(needed, int) or isinstance(needed, bool)):
            refuse("runs_needed is not a whole number")
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as exc:
        refuse(f"a figure is not usable: {str(exc)[:120]}")
    recomputed = Verification(
        verdict,
        head[0],
        head[1],
        confidence,
        runs,
        dict(flavor),
        (),
        {},
        "",
        "",
        needed if verdict == "inconclusive" else None,
    )
    return {**data, "summary": recomputed.summary()}
