"""A verification result as an audit finding: a refuted claim is critical.

`audit` and `compile` take `--verify FILE`, the JSON that `dpspec verify --json` wrote, rather
than running the verifier themselves: verification is slow and randomized, so it is run once,
kept as evidence, and attached to as many audits as needed. The file must have been made for
this very spec (same SHA-256), or it says nothing about it.
"""

from __future__ import annotations

import attrs

from dpspec.audit.base import Finding, by_severity
from dpspec.lazy import LazyModule
from dpspec.verify.miniature import VerifyError
from dpspec.verify.result import load_json

# imported on first use: at import they would load randomgen with this module
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())

RULE = "empirical-verification"


def finding(data: dict) -> Finding:
    """The finding for a verification result (its JSON form): critical when refuted, else info."""
    summary = (
        data.get("summary") or f"{data['verdict']}: lower bound {data['lower_bound']} vs claimed {data['claimed']}"
    )
    if data["verdict"] == "refuted":
        message = (
            "the claimed budget is refuted by an empirical test: "
            + summary
            + "; the mechanism's code leaks more than its budget says"
        )
        severity = "critical"
    elif data["verdict"] == "inconclusive":
        message = "the empirical test of the claimed budget is " + summary
        severity = "info"
    else:
        message = "the claimed budget passed an empirical test: " + summary
        severity = "info"
    evidence = {
        k: data.get(k)
        for k in (
            "verdict",
            "claimed",
            "lower_bound",
            "confidence",
            "runs",
            "flavor",
            "runs_needed",
            "neighbours",
            "methods",
            "seed",
        )
    }
    return Finding(RULE, severity, message, evidence)


def load_for(path: str, spec) -> dict:
    """Read a verification result file and check it was made for `spec`."""
    data = load_json(path)
    if data["spec_sha256"] != _compiler.spec_sha256(spec):
        raise VerifyError(
            f"{path}: this verification result was made for another spec (or an earlier version of "
            f"{spec.path or 'it'}); run `dpspec verify --json` on the spec again"
        )
    # The hash is the file's own word: its flavor must also be the spec's, or its bound is in another currency.
    stated = data["flavor"]
    own = {
        "premetric": spec.premetric.kind if spec.premetric else stated.get("premetric"),
        "relation": spec.unit.relation if spec.unit else None,
        "unit": spec.unit.table if spec.unit else None,
    }
    for key, value in own.items():
        if stated.get(key) != value:
            raise VerifyError(
                f"{path}: this verification result tests {key} {stated.get(key)!r}, but the spec declares "
                f"{value!r}; it was not made for this spec. Run `dpspec verify --json` on the spec again"
            )
    return data


def with_finding(outcome, data: dict):
    """An audit outcome with the verification's finding added (most severe first)."""
    found = finding(data)
    return attrs.evolve(
        outcome,
        findings=tuple(by_severity([*outcome.findings, found])),
        rules_run=tuple(dict.fromkeys([*outcome.rules_run, RULE])),
    )
