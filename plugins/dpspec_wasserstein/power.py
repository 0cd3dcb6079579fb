"""Seed 2's Theorem 15 and Lemma 14 on a small exact example: a Wasserstein release against its post-processing.

The power of a one-sided test, and the Bayes risk of the posterior mean, from a Wasserstein
exponential mechanism's release and from the same release post-processed with Z.

X_i iid Bernoulli(theta), i = 1..n, T = sum X_i (an exponential family with natural statistic T).
The release Y has density proportional to exp(-r l(|y - T|)) on the integers (a base measure that
ignores Z), l(u) = u (abs) or u^2 (square); Z is the public n, and the post-processing that makes Y
congenial with it is f(Y) = min(max(Y, 0), n). Y has a monotone likelihood ratio in theta (Theorem
15's first claim: a log-concave kernel in y - T mixed over an MLR family), so the randomized
threshold test on Y is uniformly most powerful at its level; any test on f(Y) is a test on Y, so
the best of them is at most as powerful, and strictly less at some theta when f merges values
whose likelihood ratios differ. With l = abs the ratio is constant beyond 0 and n (the kernel's
tails are exponential), so the clamp loses nothing; with l = square it does. Laws are computed by
enumerating T, on a window of y whose cut tails are below `tail` per T.
"""

from __future__ import annotations

import math

import numpy as np


def _window(n: int, r: float, loss: str, tail: float) -> int:
    u = -math.log(tail) / r
    return int(math.ceil(u if loss == "abs" else math.sqrt(u))) + 1


def release_law(n: int, theta: float, r: float, loss: str = "abs", tail: float = 1e-15) -> tuple[np.ndarray, int]:
    """(P(Y = y) for y = -w..n + w, w): a mixture over T ~ Bin(n, theta) of exp(-r l(|y - T|)), each
    normalized over the window (what lies beyond it is below `tail`)."""
    w = _window(n, r, loss, tail)
    d = np.abs(np.arange(-w, n + w + 1)[None, :] - np.arange(n + 1)[:, None]).astype(float)
    kernel = np.exp(-r * (d if loss == "abs" else d**2))
    kernel /= kernel.sum(axis=1, keepdims=True)
    prior = np.array([math.comb(n, t) * theta**t * (1 - theta) ** (n - t) for t in range(n + 1)])
    return prior @ kernel, w


def post_processed_law(law: np.ndarray, n: int, w: int) -> np.ndarray:
    """The law of min(max(Y, 0), n) on 0..n: the values below 0 merged into 0, those above n into n."""
    inner = law[w : w + n + 1].copy()
    inner[0] += law[:w].sum()
    inner[-1] += law[w + n + 1 :].sum()
    return inner


def ump_test(null_law: np.ndarray, alpha: float) -> np.ndarray:
    """The level-alpha randomized threshold test (reject large values): phi(y) in [0, 1] with
    E_null[phi] = alpha, the Neyman-Pearson test for a family with a monotone likelihood ratio."""
    phi = np.zeros(len(null_law))
    left = alpha
    for y in range(len(null_law) - 1, -1, -1):
        if null_law[y] <= left:
            phi[y], left = 1.0, left - null_law[y]
        else:
            phi[y] = left / null_law[y] if null_law[y] > 0 else 0.0
            break
    return phi


def powers(n: int, theta0: float, thetas, r: float, alpha: float = 0.05, loss: str = "abs") -> dict:
    """Power at each theta of the UMP level-alpha test of theta <= theta0 on Y and on f(Y)."""
    null, w = release_law(n, theta0, r, loss)
    with_y = ump_test(null, alpha)
    with_f = ump_test(post_processed_law(null, n, w), alpha)
    rows = []
    for theta in thetas:
        law, _ = release_law(n, theta, r, loss)
        rows.append(
            {
                "theta": theta,
                "release": float(law @ with_y),
                "post_processed": float(post_processed_law(law, n, w) @ with_f),
            }
        )
    return {"n": n, "theta0": theta0, "rate": r, "alpha": alpha, "loss": loss, "rows": rows}


def bayes_risks(n: int, thetas, prior, r: float, loss: str = "abs") -> dict:
    """Lemma 14 on the same example: the Bayes risk (squared error, posterior mean) of estimating
    theta from Y and from f(Y), theta on a finite grid with the given prior weights. f(Y) is a
    function of Y, so Blackwell's comparison gives risk(Y) <= risk(f(Y))."""
    laws = [release_law(n, t, r, loss) for t in thetas]
    w = laws[0][1]
    joint_y = np.array([p * law for p, (law, _) in zip(prior, laws)])  # theta x y
    joint_f = np.array([p * post_processed_law(law, n, w) for p, (law, _) in zip(prior, laws)])
    theta = np.asarray(thetas, dtype=float)[:, None]

    def risk(joint):
        mass = joint.sum(axis=0)
        keep = mass > 0
        mean = (theta * joint).sum(axis=0)[keep] / mass[keep]
        second = (theta**2 * joint).sum(axis=0)[keep] / mass[keep]
        return float(((second - mean**2) * mass[keep]).sum())

    return {"release": risk(joint_y), "post_processed": risk(joint_f)}


def _naive_log_law(c: int, r: float, upper: int) -> tuple[np.ndarray, float]:
    """(log P(Y = y | c) for y = 0..upper - 1, log P(Y >= upper | c)) under the naive base:
    P(y | c) = exp(-r |y - c|) / Z_r(c) on the nonnegative integers, upper > c."""
    q = math.exp(-r)
    log_z = math.log((1 - math.exp(-r * (c + 1))) / (1 - q) + q / (1 - q))
    y = np.arange(upper)
    head = -r * np.abs(y - c) - log_z
    tail = -r * (upper - c) - math.log(1 - q) - log_z  # sum_{y >= upper} e^{-r (y - c)}
    return head, tail


def cell_count_powers(null: int, alternative: int, total: int, r: float, level: float = 0.05) -> dict:
    """Theorem 15 on one released cell of the naive-base Wasserstein release: the count c as the
    parameter (the release's law has a monotone likelihood ratio in c: the kernel exp(-r |y - c|)
    is log-concave), the level-`level` threshold test of c <= null (c >= null when alternative is
    smaller) on Y, against the same test on the post-processed f(Y) = min(Y, total), which makes the
    cell congenial with Z (no county exceeds the public total). Exact: the law beyond the window
    is a geometric tail, summed in closed form into its last value."""
    if not 0 <= null <= total or not 0 <= alternative <= total or null == alternative:
        raise ValueError("the null and alternative counts must differ and lie in 0..the public total")
    w = int(math.ceil(-math.log(1e-17) / r)) + 1  # Y's values beyond total + w hold below 1e-17 of mass
    upper = total + w
    laws = {}
    for c in (null, alternative):
        head, tail = _naive_log_law(c, r, upper)
        law = np.append(np.exp(head), math.exp(tail))  # last value: Y >= upper (all rejected with the largest)
        clamped = np.append(np.exp(head[:total]), np.exp(head[total:]).sum() + math.exp(tail))
        laws[c] = (law, clamped)
    up = alternative > null
    order = (lambda a: a) if up else (lambda a: a[::-1])  # the test rejects large values, or small ones
    phi_y = order(ump_test(order(laws[null][0]), level))
    phi_f = order(ump_test(order(laws[null][1]), level))
    return {
        "null": null,
        "alternative": alternative,
        "level": level,
        "rate": r,
        "total": total,
        "direction": "greater" if up else "less",
        "power_release": float(laws[alternative][0] @ phi_y),
        "power_post_processed": float(laws[alternative][1] @ phi_f),
        "size_release": float(laws[null][0] @ phi_y),
        "size_post_processed": float(laws[null][1] @ phi_f),
        "reject_release": phi_y,
        "reject_post_processed": phi_f,
    }
