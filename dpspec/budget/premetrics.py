"""Budget values, one immutable class per output premetric.

A budget is only meaningful together with its premetric (its currency), so each value carries
its kind, the seed paper's name for the premetric, and prints its parameters by name. Numbers
are stored exactly, as `Fraction` (they may arrive as int, float, `Decimal` or text; a float is
read exactly, as the binary number it is); `math.inf` is allowed and means "no finite guarantee".
JSON and printed figures show the nearest float, and JSON adds an exact companion
("rho_exact": "293764/114921") where that float is not the exact value.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from fractions import Fraction
from typing import ClassVar

import attrs

from dpspec.errors import ConversionError
from dpspec.language.exact_input import range_problem
from dpspec.ir import format_number as exact_format

KINDS = ("pure", "approx", "zcdp", "renyi", "gdp")


class InvalidBudget(ConversionError, ValueError):
    """A budget parameter out of range (negative epsilon, delta above 1, alpha at most 1...)."""


def to_float(value, name: str = "value") -> float:
    """Turn a user number (int, float, Fraction, Decimal, numeric text, 'inf') into a float.

    float(Fraction) is correctly rounded, so exact inputs lose nothing beyond one rounding."""
    if isinstance(value, bool):
        raise InvalidBudget(f"{name} must be a number, not {value!r}")
    try:
        out = _float(value, name)
    except OverflowError:
        raise InvalidBudget(
            f"{name} = {_short(value)} is too large to account with (at most about 1.8e308; "
            "write inf for an unbounded budget)"
        ) from None
    if math.isnan(out):
        raise InvalidBudget(f"{name} must be a number, got NaN")
    return out


def to_exact(value, name: str = "value"):
    """Turn a user number (int, float, Fraction, Decimal, numeric text, 'inf') into an exact
    Fraction (or math.inf): the budget path never rounds. A float is taken exactly; a finite
    value beyond the largest float is refused, as `to_float` refuses it."""
    if isinstance(value, bool):
        raise InvalidBudget(f"{name} must be a number, not {value!r}")
    if isinstance(value, Fraction):
        out = value
    elif isinstance(value, int):
        out = Fraction(value)
    elif isinstance(value, float):
        if math.isnan(value):
            raise InvalidBudget(f"{name} must be a number, got NaN")
        out = value if math.isinf(value) else Fraction(value)
    elif isinstance(value, Decimal):
        if value.is_nan():
            raise InvalidBudget(f"{name} must be a number, got NaN")
        out = (math.inf if value > 0 else -math.inf) if value.is_infinite() else Fraction(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() in ("inf", "+inf", "infinity", "+infinity", "-inf", "-infinity"):
            out = -math.inf if text.startswith("-") else math.inf
        else:
            to_float(text, name)  # the same refusals (length, exponent, not a number, too large)
            out = Fraction(text)
    else:
        if hasattr(value, "item"):  # numpy scalars
            return to_exact(value.item(), name)
        return to_exact(to_float(value, name), name)
    if not isinstance(out, float) and abs(out) > _FLOAT_MAX:
        raise InvalidBudget(
            f"{name} = {_short(value)} is too large to account with (at most about 1.8e308; "
            "write inf for an unbounded budget)"
        )
    if not isinstance(out, float) and out != 0 and float(out) == 0:  # exact, but every conversion reads it as 0
        raise InvalidBudget(
            f"{name} = {_short(value)} is too small to compute with (it would be read as 0, which "
            "means something else; the smallest is about 5e-324)"
        )
    return out


_FLOAT_MAX = Fraction(sys.float_info.max)


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:20] + "..."


def _float(value, name: str) -> float:
    if isinstance(value, (int, float, Fraction, Decimal)):
        out = float(value)
        if out == 0 and value != 0:  # an exact 1e-400 from a spec: read as 0 it would mean no loss at all
            raise InvalidBudget(
                f"{name} = {_short(value)} is too small to compute with (it would be read as 0, which "
                "means something else; the smallest is about 5e-324)"
            )
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > 400:
            raise InvalidBudget(f"{name} must be a number of at most 400 characters, got {_short(text)}")
        exponent = re.fullmatch(r"[+-]?[\d_.]+[eE]([+-]?\d+)", text)  # a decimal's exponent, never a letter of a word
        if exponent and len(exponent.group(1).lstrip("+-").lstrip("0")) > 4:  # Fraction('1e-99999999') takes hours
            raise InvalidBudget(f"{name} = {_short(text)}: the exponent is out of range")
        try:
            out = float(Fraction(text))
        except (ValueError, ZeroDivisionError):
            try:
                out = float(text)
            except ValueError:
                raise InvalidBudget(f"{name} must be a number, got {value!r}") from None
        problem = range_problem(text, out)  # 1e-9999 would be read as 0: no loss at all
        if problem:
            raise InvalidBudget(f"{name} = {problem}")
    else:
        try:
            out = float(value)  # numpy scalars
        except (TypeError, ValueError):
            raise InvalidBudget(f"{name} must be a number, got {value!r}") from None
    return out


def format_figure(x: float) -> str:
    """Print a budget figure the way the literature quotes it: 52.82, 2.63, 1e-10, inf."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    x = float(x)  # an exact budget prints as its nearest float, as before
    if abs(x) >= 1:
        if float(x).is_integer() and abs(x) < 1e15:
            return str(int(x))
        text = f"{x:.2f}".rstrip("0").rstrip(".")
        return text
    return f"{x:.3g}"


def format_against(x: float, limit: float | None, holds: bool) -> str:
    """``x`` as format_figure prints it, with more digits when that rounding would put it on
    the wrong side of the bound it is checked against: an achieved 4.9622 against 'rho <= 4.96'
    prints 4.962, not 4.96 (which would read as meeting the bound it exceeds)."""
    text = format_figure(x)
    if limit is None or not (math.isfinite(x) and math.isfinite(limit)):
        return text
    # a float limit is read as the decimal a person wrote (4.96), an exact one as it is
    exact_x = to_exact(x)
    exact_limit = limit if isinstance(limit, Fraction) else Fraction(repr(float(limit)))
    for digits in range(3, 18):
        if (Fraction(text) <= exact_limit) == holds:
            return text
        text = f"{float(x):.{digits}g}"
    if (Fraction(repr(float(x))) <= exact_limit) == holds:
        return repr(float(x))

    return exact_format(exact_x)  # the float is on the wrong side: print it exactly


def json_number(x: float):
    """A float for JSON; infinities become the string 'inf' (JSON has no infinity); an exact
    Fraction becomes its nearest float (`exact_companions` adds its exact text where that float
    is not the value)."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, Fraction):
        return float(x)
    return x


def exact_text(x) -> str:
    """An exact budget number as text: '293764/114921', '0.05', 'inf'."""
    if isinstance(x, float):
        return "inf" if x > 0 else "-inf" if math.isinf(x) else repr(x)

    x = Fraction(x)
    text, ratio = exact_format(x), f"{x.numerator}/{x.denominator}"
    return ratio if len(ratio) < len(text) else text  # a double's square: 7792775467722867/140737488355328


def needs_exact(x) -> bool:
    """Whether a figure's JSON number does not state it exactly, read either way: as the double
    it is (a certified bound is one) or as the decimal it prints (0.3 for 3/10, 1e-10 for
    10^-10). Only then is an exact companion written, so JSON that was exact stays as it was."""
    if not isinstance(x, Fraction):
        return False
    try:
        f = float(x)
    except OverflowError:  # pragma: no cover - budgets are bounded by the largest float
        return True
    return Fraction(f) != x and Fraction(repr(f)) != x


def exact_companions(params: dict) -> dict:
    """{'rho_exact': '293764/114921'} for every parameter whose JSON number is not exact
    (additive: a figure its JSON number states exactly gets no companion: such JSON is unchanged)."""
    out = {}
    for k, v in params.items():
        if isinstance(v, list):
            if any(needs_exact(x) for x in v):
                out[f"{k}_exact"] = [exact_text(x) for x in v]
        elif needs_exact(v):
            out[f"{k}_exact"] = exact_text(v)
    return out


def _nonneg(name):
    def convert(value):
        out = to_exact(value, name)
        if out < 0:
            raise InvalidBudget(f"{name} must be at least 0, got {format_figure(out)}")
        return out

    return convert


def _probability(value):
    out = to_exact(value, "delta")
    if not 0 <= out <= 1:
        raise InvalidBudget(f"delta must be in [0, 1], got {format_figure(out) if math.isfinite(out) else out!r}")
    return out


def _order(value):
    out = to_exact(value, "alpha")
    if not out > 1:
        raise InvalidBudget(f"the Rényi order alpha must exceed 1, got {format_figure(out)}")
    return out


class Budget:
    """Common behaviour of all premetric values (subclasses are frozen attrs classes)."""

    kind: ClassVar[str] = ""
    paper_name: ClassVar[str] = ""

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}

    @property
    def is_finite(self) -> bool:
        """True when the value is a real guarantee (no infinite parameter)."""
        return all(math.isfinite(v) for v in self.params().values())

    def to_json(self) -> dict:
        out = {"premetric": self.kind}
        out.update({k: json_number(v) for k, v in self.params().items()})
        out.update(exact_companions(self.params()))
        return out

    def __str__(self) -> str:
        items = [f"{k} = {format_figure(v)}" for k, v in self.params().items()]
        return items[0] if len(items) == 1 else "(" + ", ".join(items) + ")"


@attrs.frozen(str=False)
class PureDP(Budget):
    """Pure epsilon: the max log-ratio of output probabilities."""

    kind: ClassVar[str] = "pure"
    paper_name: ClassVar[str] = "multiplicative distance (MULT)"
    epsilon: Fraction = attrs.field(converter=_nonneg("epsilon"))


@attrs.frozen(str=False)
class ApproxDP(Budget):
    """(epsilon, delta): the max log-ratio after discounting probability delta."""

    kind: ClassVar[str] = "approx"
    paper_name: ClassVar[str] = "delta-approximate multiplicative divergence"
    epsilon: Fraction = attrs.field(converter=_nonneg("epsilon"))
    delta: Fraction = attrs.field(converter=_probability)

    @property
    def is_finite(self) -> bool:
        """delta = 1 promises nothing even with a finite epsilon."""
        return math.isfinite(self.epsilon) and self.delta < 1


@attrs.frozen(str=False)
class ZCDP(Budget):
    """rho-zCDP: Rényi divergence of every order alpha at most alpha * rho."""

    kind: ClassVar[str] = "zcdp"
    paper_name: ClassVar[str] = "normalized Rényi metric (zCDP)"
    rho: Fraction = attrs.field(converter=_nonneg("rho"))


@attrs.frozen(str=False)
class RenyiDP(Budget):
    """(alpha, epsilon)-RDP: Rényi divergence of one order alpha at most epsilon."""

    kind: ClassVar[str] = "renyi"
    paper_name: ClassVar[str] = "Rényi divergence of order alpha"
    alpha: Fraction = attrs.field(converter=_order)
    epsilon: Fraction = attrs.field(converter=_nonneg("epsilon"))

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        return ((self.alpha, self.epsilon),)

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.epsilon)


def _curve(points) -> tuple[tuple[float, float], ...]:
    pairs = {}
    for pair in points:
        try:
            a, e = pair
        except (TypeError, ValueError):
            raise InvalidBudget(f"a Rényi curve point must be (alpha, epsilon), got {pair!r}") from None
        a, e = _order(a), _nonneg("epsilon")(e)
        # The same order stated twice: the smaller bound holds (both are claims about one divergence).
        pairs[a] = min(e, pairs.get(a, math.inf))
    if not pairs:
        raise InvalidBudget("a Rényi curve needs at least one (alpha, epsilon) point")
    return tuple(sorted(pairs.items()))


@attrs.frozen(str=False)
class RenyiCurve(Budget):
    """Rényi bounds at several orders (an RDP accountant's output); each point holds."""

    kind: ClassVar[str] = "renyi"
    paper_name: ClassVar[str] = "Rényi divergence of order alpha"
    points: tuple[tuple[Fraction, Fraction], ...] = attrs.field(converter=_curve)

    def params(self) -> dict:
        return {"alpha": [a for a, _ in self.points], "epsilon": [e for _, e in self.points]}

    @property
    def is_finite(self) -> bool:
        return any(math.isfinite(e) for _, e in self.points)

    def to_json(self) -> dict:
        return {
            "premetric": self.kind,
            "alpha": [json_number(a) for a, _ in self.points],
            "epsilon": [json_number(e) for _, e in self.points],
            **exact_companions(self.params()),
        }

    def __str__(self) -> str:
        return "{" + ", ".join(f"alpha {format_figure(a)}: epsilon = {format_figure(e)}" for a, e in self.points) + "}"


@attrs.frozen(str=False)
class GaussianDP(Budget):
    """mu-GDP: distinguishing neighbors is no easier than telling N(0,1) from N(mu,1)."""

    kind: ClassVar[str] = "gdp"
    paper_name: ClassVar[str] = "Gaussian differential privacy"
    mu: Fraction = attrs.field(converter=_nonneg("mu"))


PREMETRIC_CLASSES = {"pure": PureDP, "approx": ApproxDP, "zcdp": ZCDP, "renyi": RenyiDP, "gdp": GaussianDP}

_KIND_ALIASES = {
    "pure": "pure",
    "puredp": "pure",
    "mult": "pure",
    "eps": "pure",
    "epsilon": "pure",
    "approx": "approx",
    "approximate": "approx",
    "approxdp": "approx",
    "eps-delta": "approx",
    "zcdp": "zcdp",
    "rho": "zcdp",
    "zero-concentrated": "zcdp",
    "concentrated": "zcdp",
    "renyi": "renyi",
    "rényi": "renyi",
    "rdp": "renyi",
    "gdp": "gdp",
    "gaussian": "gdp",
    "gaussiandp": "gdp",
    "mu": "gdp",
}


def normalize_kind(name: str) -> str:
    """Map a premetric name a user may type ('zCDP', 'rdp', 'approximate') to its kind."""
    key = str(name).strip().lower().replace("_", "-")
    if key not in _KIND_ALIASES:
        raise ConversionError(f"unknown premetric {name!r}; expected one of {', '.join(KINDS)}")
    return _KIND_ALIASES[key]


def budget_from_params(params: dict) -> Budget:
    """Build a budget from named parameters: {'rho': ..}, {'epsilon': .., 'delta': ..}, ...

    A 'premetric' key may disambiguate ({'premetric': 'approx', 'epsilon': 1} is (1, 0)).
    Lists for alpha and epsilon make a Rényi curve."""
    if isinstance(params, Budget):
        return params
    given = {str(k).strip().lower(): v for k, v in dict(params).items() if v is not None}
    for key in [k for k in given if k.endswith("_exact")]:  # a JSON budget read back: its exact figures win
        exact_value, base = given.pop(key), key[: -len("_exact")]
        if base in given:
            given[base] = exact_value
    if "eps" in given and "epsilon" not in given:
        given["epsilon"] = given.pop("eps")
    kind = normalize_kind(given.pop("premetric")) if "premetric" in given else None
    keys = frozenset(given)
    if kind is None:
        by_keys = {
            frozenset({"epsilon"}): "pure",
            frozenset({"epsilon", "delta"}): "approx",
            frozenset({"rho"}): "zcdp",
            frozenset({"alpha", "epsilon"}): "renyi",
            frozenset({"mu"}): "gdp",
        }
        if keys not in by_keys:
            raise InvalidBudget(
                f"cannot tell the premetric from parameters {sorted(keys)}; give one of "
                "{epsilon}, {epsilon, delta}, {rho}, {alpha, epsilon}, {mu}"
            )
        kind = by_keys[keys]
    allowed = {
        "pure": {"epsilon"},
        "approx": {"epsilon", "delta"},
        "zcdp": {"rho"},
        "renyi": {"alpha", "epsilon"},
        "gdp": {"mu"},
    }[kind]
    extra = keys - allowed
    if extra:
        raise InvalidBudget(f"parameters {sorted(extra)} do not belong to premetric {kind}")
    missing = allowed - keys - ({"delta"} if kind == "approx" else set())
    if missing:
        raise InvalidBudget(f"premetric {kind} needs {sorted(missing)}")
    if kind == "approx":
        return ApproxDP(given["epsilon"], given.get("delta", 0))
    if kind == "renyi":
        alpha, eps = given["alpha"], given["epsilon"]
        if isinstance(alpha, (list, tuple)) or isinstance(eps, (list, tuple)):
            if not (isinstance(alpha, (list, tuple)) and isinstance(eps, (list, tuple)) and len(alpha) == len(eps)):
                raise InvalidBudget("a Rényi curve needs equally long lists of alpha and epsilon")
            return RenyiCurve(tuple(zip(alpha, eps)))
        return RenyiDP(alpha, eps)
    (name,) = allowed
    return PREMETRIC_CLASSES[kind](given[name])
