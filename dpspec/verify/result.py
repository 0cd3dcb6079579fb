"""What a verification found: per pair and overall, as text and as stable JSON.

The JSON form is what `dpspec verify --json` prints and what `audit`/`compile --verify FILE`
read back; it names the spec it was made for (its SHA-256) so it cannot be attached to another.
"""
from __future__ import annotations

import json
import math

import attrs

from dpspec.verify.bounds import CITATIONS

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
        return {"pair": self.label, "distance": self.distance, "claimed": _num(self.claimed),
                "lower_bound": _num(self.lower_bound), "largest_detectable": _num(self.largest_detectable),
                "runs_needed": self.runs_needed, **self.test.to_json()}


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
            return (f"refuted: with {conf} confidence the mechanism's {q} is at least {lb}, above the claimed {claim} "
                    f"({self.runs:,} runs per dataset)")
        if self.verdict == "inconclusive":
            need = f"about {self.runs_needed:,} runs per dataset" if self.runs_needed else "more runs than can be made"
            return (f"inconclusive: {self.runs:,} runs per dataset cannot show {q} above the claimed {claim}; "
                    f"{need} would be needed (lower bound so far {lb} at {conf} confidence)")
        return (f"consistent: with {conf} confidence the {q} is at least {lb}, not above the claimed {claim} "
                f"({self.runs:,} runs per dataset); this finds no violation, it does not prove the claim")

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
        lines = [self.summary(),
                 f"mechanism: {self.mechanism.get('name')} {self.mechanism.get('version')}; neighbours: "
                 + ("supplied by the mechanism" if self.path == "mechanism" else "built from the domain (generic)")]
        flavor = ", ".join(f"{k} {v}" for k, v in self.flavor.items())
        lines.append(f"flavor: {flavor}")
        for p in self.pairs:
            lines.append(f"  {p.label} (distance {p.distance}): lower bound {p.lower_bound:.4g} vs claimed "
                         f"{p.claimed:.4g}; event: {p.test.description} "
                         f"({p.test.k_left} vs {p.test.k_right} of {p.test.n} held-out runs)")
        lines.append("method: " + "; ".join(self.methods()))
        if self.seed is not None:
            lines.append(f"seed {self.seed} (reproducible)")
        return "\n".join(lines)


MAX_RESULT_BYTES = 5_000_000  # a verification result is a few kB; more is not one


def load_json(path: str) -> dict:
    """A verification result file written by `dpspec verify --json` (raises VerifyError)."""
    from dpspec.language.reading import NotRegularFile, open_regular
    from dpspec.verify.miniature import VerifyError

    try:
        with open_regular(path) as fh:  # a device such as /dev/zero would be read without end
            data = json.loads(fh.read(MAX_RESULT_BYTES + 1))
    except NotRegularFile:
        raise VerifyError(f"{path}: not a regular file (a device, pipe or folder); give the file `dpspec verify --json` wrote") from None
    except OSError as exc:
        raise VerifyError(f"{path}: cannot read the verification result: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # invalid JSON or UTF-8, a 5,000-digit number, deep nesting
        raise VerifyError(f"{path}: not a verification result (invalid JSON: {str(exc)[:200]})") from None
    from dpspec.schemas import refuse_newer

    refuse_newer("verification", data, path, VerifyError)
    missing = [k for k in ("verdict", "claimed", "lower_bound", "confidence", "runs", "flavor", "spec_sha256")
               if not isinstance(data, dict) or k not in data]
    if missing or data.get("verdict") not in VERDICTS:
        raise VerifyError(f"{path}: not a verification result from `dpspec verify --json` "
                          f"(missing or invalid: {', '.join(missing) or 'verdict'})")
    return data
