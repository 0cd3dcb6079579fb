"""One report model, built once, from which the HTML, Markdown and JSON forms are rendered.

The model is plain JSON data, so the three forms cannot disagree. It is built for one audience:
the public model holds the spec, the budget and its accounting, public facts (functions of the
invariants, which the budget depends on), what the spec releases and the audit; the internal
model adds what was computed against the confidential data or depends on a run (utility, the
run's own facts and notes, timings).
"""

from __future__ import annotations

import math
import os

import attrs

from dpspec import ir
from dpspec._version import __version__
from dpspec.language import describe
from dpspec.contract import plugins
from dpspec.audit import audit as run_audit_outcome, all_rules
from dpspec.audit.base import jsonable
from dpspec.audit.currency import flavor_spec
from dpspec.audit.multiverse import granularity, undetermined
from dpspec.budget import format_figure
from dpspec.budget.conversions import method_words
from dpspec.budget.ledger import achieved_text, DEFAULT_DELTA
from dpspec.report.bidi import neutral
from dpspec.budget.semantics import semantics_json, stated_semantics
from dpspec.ir import spec_sha256
from dpspec.report.exact import exact_budgets
from dpspec.audit.verdict import verdict
from dpspec.report.nist import glossary, nist_sections


def seed_policy(seed, mechanism=None) -> dict:
    """Where a release's randomness came from (manifest and reports): here, below `output`."""
    own = getattr(mechanism, "own_random_source", "")
    if own:  # the library draws its own noise: neither dpspec's stream nor a seed reaches it
        reach = (
            "dpspec's ChaCha20 stream and the given seed do" if seed is not None else "dpspec's ChaCha20 stream does"
        )
        return {"seeded": False, "source": f"{own} ({reach} not reach it, so the release is not reproducible)"}
    if seed is None:
        return {
            "seeded": False,
            "source": "ChaCha20 (cryptographically secure) keyed with 256 bits of operating-system entropy",
        }
    return {
        "seeded": True,  # the seed itself is withheld: whoever reads it can remove the noise
        "warning": "a known seed lets anyone reproduce the noise and remove it: this release is NOT protected",
    }


AUDIENCES = ("public", "internal")
RENDER_ONLY = "_templates"  # the one model key report.json leaves out: templates a plugin gives
HEADLINE_PARAM = {"pure": "epsilon", "approx": "epsilon", "zcdp": "rho", "renyi": "epsilon", "gdp": "mu"}
AUDIENCE_NOTES = {
    "public": (
        "For publication. It contains the specification, the budget and how it was computed, the "
        "public facts the budget depends on, what the specification releases, and the audit. "
        "Nothing else computed from the confidential data appears here."
    ),
    "internal": (
        "Not for publication. Besides everything in the public report it contains "
        "figures computed against the confidential data (utility, run notes, timings)."
    ),
}


def budget_json(b) -> dict | None:
    """A budget for the model: its parameters, its premetric's names, and a sentence form."""
    if b is None:
        return None
    out = jsonable(b.to_json())
    out["text"] = str(b) if b.is_finite else "infinite (no finite guarantee)"
    out["paper_name"] = b.paper_name
    out["finite"] = bool(b.is_finite)
    return out


def headline(b) -> str:
    """The number in front of -DP(...) in the paper's notation."""
    if b is None:
        return "eps_D"
    if not b.is_finite:
        return "inf"
    value = b.params().get(HEADLINE_PARAM.get(b.kind, ""), None)
    if isinstance(value, list):
        return str(b)
    return format_figure(value) if value is not None else str(b)


def _number(value):
    """A float figure for JSON (infinities as text), or None."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    return jsonable(value)


def _invariants(spec: ir.Spec, induced) -> list[dict]:
    out = []
    induced_keys = {q.key() for q in induced}
    undeclared = {q.key() for q in undetermined(induced, spec.invariants, spec.domain)}
    for q in spec.invariants:
        origin = "declared; the mechanism keeps it exact" if q.key() in induced_keys else "declared"
        out.append(
            {"statistic": q.describe(), "granularity": granularity(q, spec.domain), "origin": origin, "declared": True}
        )
    declared_keys = {q.key() for q in spec.invariants}
    for q in induced:
        if q.key() in declared_keys:
            continue
        origin = (
            "kept exact by the mechanism, NOT declared"
            if q.key() in undeclared
            else "kept exact by the mechanism; implied by the declared invariants"
        )
        out.append(
            {"statistic": q.describe(), "granularity": granularity(q, spec.domain), "origin": origin, "declared": False}
        )
    return out


def _mechanism(spec: ir.Spec, checked) -> dict | None:
    if spec.mechanism is None:
        return None
    mech = checked.mechanism if checked else None
    package, package_version = getattr(mech, "_dpspec_package", ("?", "?"))
    return {
        "name": spec.mechanism.name,
        "version": getattr(mech, "version", None),
        "package": package,
        "package_version": package_version,
        "description": getattr(mech, "description", "") or "",
        "proof": getattr(mech, "proof", "") or "",  # additive (report 1.1): the plugin's evidence
        "sampling": getattr(mech, "sampling", "") or "",
        "parameters": {p.name: jsonable(ir.to_jsonable(p.value)) for p in spec.mechanism.params.params},
        # additive: what each stated parameter is, in the plugin's own words (a reader of the
        # report does not know the mechanism's settings: opt_tol, failsafe, postprocess_only ...)
        "parameter_docs": _parameter_docs(mech, [p.name for p in spec.mechanism.params.params]),
    }


def _parameter_docs(mech, names: list[str]) -> dict:
    """{parameter: its declared description} for the parameters the spec states."""
    schema = getattr(mech, "parameters", None)
    out = {}
    for name in names:
        declared = schema.get(name) if schema is not None else None
        if declared is not None and getattr(declared, "doc", None):
            out[name] = str(declared.doc)
    return out


def _budget(ctx) -> dict:
    """The budget block; every key is present (None when unknown) so templates stay simple."""
    ledger, stmt = ctx.ledger, ctx.statement
    out = {
        "available": False,
        "problem": ctx.account.problem if ctx.account else None,
        "native": None,
        "declared": None,
        "worst": None,
        "headline": "eps_D",
        "currencies": [],
        "steps": [],
        "bounds": [],
        "bounds_hold": None,
    }
    if ledger is None:
        out["problem"] = out["problem"] or "no budget account (the spec did not check, or its data was not read)"
        return out
    flavor = ledger.native_flavor
    out.update(
        {
            "available": True,
            "native": {
                "flavor": {"table": flavor.table, "relation": flavor.relation, "premetric": flavor.premetric},
                "actual": budget_json(stmt.actual),
                "worst": budget_json(stmt.worst),
                "per_universe": bool(stmt.per_universe),
                "depends_on": jsonable(dict(stmt.depends_on)),
                "notes": list(stmt.notes),
                "public": [str(p) for p in getattr(stmt, "public", ())],
            },
            "declared": budget_json(ledger.declared),
            "worst": budget_json(ledger.worst),
            "problem": ledger.problem,
            "headline": headline(ledger.declared),
            "currencies": [
                {
                    "budget": budget_json(c.result),
                    "premetric": c.result.paper_name,
                    "method": c.method,
                    "method_words": method_words(c.method),
                    "citation": c.citation,
                }
                for c in ledger.currencies
            ],
            "steps": [
                {
                    "what": s.what,
                    "from": budget_json(s.source),
                    "to": budget_json(s.result),
                    "method": s.method,
                    "method_words": method_words(s.method),
                    "citation": s.citation,
                }
                for s in ledger.steps
            ],
            "bounds": [
                {
                    "bound": c.bound.describe(),
                    "limit": _number(c.bound.value),
                    "achieved": _number(c.achieved),
                    "achieved_text": achieved_text(c),
                    "holds": bool(c.holds),
                    "currency": c.currency,
                }
                for c in ledger.bounds
            ],
            "bounds_hold": bool(ledger.bounds_hold),
        }
    )
    return out


def budget_block(spec: ir.Spec, outcome, section=None) -> dict:
    """The report's budget block (declared, worst, currencies, conversion steps, bounds, the
    facts it depends on, per attribute and geography, how the mechanism spends it) of an audit
    `outcome`: report.json's, and what `dpspec compile --json` prints. `section`: the
    mechanism's `BudgetSection` when the caller has it already (`budget_section`)."""
    ctx = outcome.context
    budget = _budget(ctx)
    if budget["native"] is not None:
        budget["native"]["depends_on_shown"] = _shown_facts(
            budget["native"]["depends_on"], _fact_labels(spec, ctx.checked)
        )
    budget["semantics"] = _semantics(spec, ctx.checked, ctx)  # additive: per attribute and geography
    section = section if section is not None else budget_section(spec, ctx)
    budget["spending"] = jsonable(section.data) if section is not None else None  # additive: the plugin's figures
    return budget


def _semantics(spec: ir.Spec, checked, ctx) -> dict | None:
    """Per-attribute and per-geography budgets, when the mechanism has them (as `dpspec budget`)."""
    if checked is None or ctx.ledger is None or spec.premetric is None:
        return None
    sem = stated_semantics(spec, checked)
    if sem is None:
        return None

    delta = float(spec.premetric.option("delta") or DEFAULT_DELTA)
    return semantics_json(spec, ctx.ledger.native_flavor, sem, delta)


def budget_section(spec: ir.Spec, ctx):
    """How the mechanism spends its budget (a `dpspec.contract.BudgetSection` from its plugin's
    `dpspec_report_budget` hook), when the spec has a budget account; None otherwise. The core
    knows neither its keys nor its words: it writes the section's data as `budget.spending` and
    renders its templates inside the budget section."""
    checked = ctx.checked
    if checked is None or ctx.ledger is None:
        return None
    return plugins.report_budget(spec, checked.mechanism, checked.params)


def _sections(result, audience: str) -> list[dict]:
    """Sections mechanism plugins contribute; internal ones only in the internal report."""
    if result is None:
        return []
    out = []
    for s in plugins.report_sections(result):
        internal = bool(getattr(s, "internal", False))
        if internal and audience != "internal":
            continue
        out.append(
            {
                "title": str(s.title),
                "html": s.html or "",
                "markdown": s.markdown or "",
                "data": jsonable(s.data),
                "internal": internal,
            }
        )
    return out


def key_words(key: str) -> str:
    """A fact's key as words when its plugin gives no label: 'strata_of_two_or_more' -> 'Strata of two or more'."""
    words = str(key).replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _fact_labels(spec: ir.Spec, checked) -> dict:
    mech = checked.mechanism if checked else None
    if mech is None or spec.mechanism is None:
        return {}
    try:
        return dict(mech.fact_labels(spec, checked.params) or {})
    except AttributeError:  # a plugin written before the hook existed
        return {}


def _shown_facts(facts: dict, labels: dict) -> list[dict]:
    """The public facts for a reader: each with its label; a list of records as a table whose
    columns carry labels too (the JSON keeps the raw facts under `public_facts`)."""
    out = []
    for key, value in facts.items():
        item = {"key": key, "label": labels.get(key) or key_words(key), "value": value, "table": None}
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            columns = list(dict.fromkeys(c for row in value for c in row))
            item["table"] = {
                "columns": [{"key": c, "label": labels.get(f"{key}.{c}") or key_words(c)} for c in columns],
                "rows": [[row.get(c) for c in columns] for row in value],
            }
        out.append(item)
    return out


def _findings(findings) -> list[dict]:
    """Each finding with its rule's title (what the rule catches, in words) beside its id."""

    titles = {r.id: r.title for r in all_rules()}
    return [{**f.to_json(), "title": titles.get(f.rule)} for f in findings]


def _provenance(spec: ir.Spec, result, checked) -> dict:
    ran = spec.mechanism.name if spec.mechanism is not None else None
    mechanisms = [
        {**{k: m[k] for k in ("name", "version", "package", "package_version")}, "ran": m["name"] == ran}
        for m in plugins.describe_mechanisms()
    ]
    out = {
        "dpspec_version": __version__,
        "spec_file": os.path.basename(spec.path) if spec.path else None,
        "spec_sha256": result.spec_hash if result is not None else spec_sha256(spec),
        "data": [
            {"file": os.path.basename(k.rstrip("/")), "sha256": v}
            for k, v in sorted((result.data_hashes or {}).items())
        ]
        if result is not None
        else [{"file": os.path.basename(d.path), "sha256": None} for d in spec.data],
        "plugins": mechanisms,  # every installed mechanism; `ran` marks the one this spec names
        "mechanism_plugin": next((m for m in mechanisms if m["ran"]), None),
        "seed_policy": seed_policy(result.seed, result.mechanism) if result is not None else None,
        "runs": getattr(result, "runs", None),
        "compiled": result is not None,
    }
    return out


def _releases(spec: ir.Spec, result) -> list[dict]:
    if result is None:
        return [{"name": r.describe(), "rows": None} for r in spec.releases]
    # a mechanism whose release size depends on its noise (adaptive detail, suppression) says
    # so; the public report then gives no row count, which would vary from run to run
    varies = bool(getattr(result.mechanism, "release_size_varies", False))
    return [{"name": name, "rows": None if varies else int(len(frame))} for name, frame in result.published.items()]


def _internal(result) -> dict:
    if result is None:
        return {}
    release = result.release
    return {
        "utility": jsonable(dict(result.utility or {})),
        "run_facts": jsonable(dict(getattr(release, "facts", {}) or {})),
        "run_notes": list(getattr(release, "notes", ()) or ()),
        "timings": jsonable(dict(result.timings or {})),
    }


def _program(spec: ir.Spec, account) -> dict | None:
    """A program's members, composed total and bounds, as the audit's `program_account` laid them out."""
    if account is None:
        return None
    summary = account.summary
    if summary.get("problem") is not None:
        return {
            "title": spec.program.title,
            "problem": summary["problem"],
            "members": [],
            "total": None,
            "method": None,
            "bounds": [],
            "bounds_hold": None,
            "notes": [],
            "unit": None,
            "domain": _program_domain(spec),
            "invariants": [],
            "ledger": [],
        }
    words = account.words
    return {
        "title": summary["program"],
        "problem": None,
        "members": [
            {
                "spec": r["spec"],
                "title": r["title"],
                "parallel_group": r["parallel_group"],
                "budget": r["budget"],
                "budget_text": w["budget"],
            }
            for r, w in zip(summary["releases"], words["members"])
        ],
        "total": jsonable(summary["total"]),
        "total_text": words["total"],
        "method": summary["method"],
        "bounds": [
            {
                "bound": b["bound"],
                "achieved": _number(b["achieved"]),
                "holds": bool(b["holds"]),
                "currency": b["currency"],
                "limit": None,
            }
            for b in summary["bounds"]
        ],
        "bounds_hold": bool(summary["bounds_hold"]) if summary["bounds"] else None,
        "notes": list(summary["ledger"].get("notes", [])),
        # additive: the ledger laid out for an oversight reader: the composed unit and
        # domain, the union of the members' invariants, and per member its own unit, budget and
        # every step to the program's unit
        "unit": summary.get("unit"),
        "domain": _program_domain(spec),
        "invariants": _program_invariants(summary),
        "ledger": [_ledger_line(r, w) for r, w in zip(summary["releases"], words["members"])],
    }


def _program_flavor(spec: ir.Spec, flavor: ir.Spec, invariants: tuple | None) -> ir.Spec:
    """The composed guarantee's flavor for the one-line form and the five questions: the
    program's own domain and bounds (not its first member's), every member's invariants (the
    composed multiverse, as the audit's program account gives them), and the program's unit
    (already in ``flavor``)."""
    if invariants is None:  # the members do not load
        return flavor
    return attrs.evolve(
        flavor, domain=spec.domain or flavor.domain, budgets=spec.budgets or flavor.budgets, invariants=invariants
    )


def _program_domain(spec: ir.Spec) -> dict | None:
    d = spec.domain
    if d is None:
        return None
    return {
        "name": d.name,
        "description": d.description,
        "stage": d.stage,
        "same_as": list(d.same_as),
        "tables": [{"name": t.name, "unit": t.unit} for t in d.tables],
    }


def _program_invariants(summary: dict) -> list[dict]:
    """The multiverse of the composed guarantee: every member's invariants (their union)."""
    out: dict[str, list[str]] = {}
    for r in summary["releases"]:
        for q in r.get("invariants", ()):
            out.setdefault(q, []).append(r["spec"])
    return [{"statistic": q, "members": members} for q, members in out.items()]


def _ledger_line(r: dict, words: dict) -> dict:
    unit = r.get("unit") or {}
    how = {"hamming": "change one", "symdiff": "add or remove one"}.get(unit.get("relation"), unit.get("relation"))
    return {
        "spec": r["spec"],
        "title": r["title"],
        "own_unit": f"{how} record of table {unit.get('table')}" if unit else None,
        "own_budget_text": words["own_budget"],
        "steps": [
            {"what": st["what"], "from": st["from"], "to": st["to"], "method": st["method"]}
            for st in r.get("unit_steps", ())
        ],
        "budget_text": words["budget"],
        "epsilon_text": words["epsilon"],
    }


CERTIFICATE_HOLDS = (
    "the SHA-256 of the spec's bytes",
    "dpspec's version, the hash of its installed files and, when run from a git checkout, its commit",
    "every plugin with its version and the hash of its installed files",
    "the exact budgets below",
    "the data's fingerprint",
    "the random source (never a seed)",
    "when the compile started and ended",
    "the sign-offs given with --sign",
    "the SHA-256 of every other file of the release, this report included",
)


def _certificate(result) -> dict | None:
    """The report's certificate section: what certificate.json beside it holds, and the parts that do not
    vary from run to run (times and sign-offs stay in certificate.json: this report is reproducible)."""
    if result is None:
        return None

    return {
        "file": "certificate.json",
        "holds": list(CERTIFICATE_HOLDS),
        "budgets": exact_budgets(result),
        "verify": "dpspec certificate verify DIR",
    }


def _verdict(plain: dict, findings, budget: dict, program: dict | None) -> dict:
    """The verdict (`dpspec.audit.verdict`) and, beside it, never in its place, what the declared bounds say."""

    out = verdict(plain, list(findings))
    bounds = program["bounds"] if program else budget["bounds"]
    holds = program["bounds_hold"] if program else budget["bounds_hold"]
    if not bounds:
        out["bounds"] = "The spec declares no budget bound."
    elif holds:
        out["bounds"] = (
            "All bounds the spec declares hold: the mechanism keeps the spec's own limits, "
            "which says nothing about whether those limits protect anyone."
        )
    else:
        out["bounds"] = "NOT all bounds the spec declares hold: the spec promises less than the mechanism spends."
    return out


def build_model(
    result=None, *, spec: ir.Spec | None = None, audience: str = "public", baseline=None, outcome=None
) -> dict:
    """The report model for one audience. Give a compiled `result`, or a `spec` alone (an audit
    report without a release). `baseline` is a Spec or a compiled Result; `outcome` an
    `dpspec.audit.Audit` already run (it is run here otherwise)."""
    if audience not in AUDIENCES:
        raise ValueError(f"audience must be one of {AUDIENCES}")
    spec = spec if spec is not None else result.spec
    if outcome is None:
        outcome = run_audit_outcome(spec, result, baseline)
    ctx = outcome.context
    checked = ctx.checked
    spending = budget_section(spec, ctx)
    budget = budget_block(spec, outcome, spending)
    labels = _fact_labels(spec, checked)
    account = outcome.program_account()
    program = _program(spec, account)
    flavor = flavor_spec(spec)
    if account is not None:
        flavor = _program_flavor(spec, flavor, account.invariants)
    notation = describe.notation(flavor, budget["headline"])
    if program is not None and program["total"] is not None:
        notation = describe.notation(flavor, headline(account.total))
    plain = jsonable(outcome.plain_words())
    model = {
        "format": "dpspec-report/1",
        "audience": audience,
        "audience_note": AUDIENCE_NOTES[audience],
        "title": spec.title
        or (spec.program.title if spec.program is not None else None)
        or (os.path.basename(spec.path) if spec.path else "untitled spec"),
        "kind": "program" if program is not None else "spec",
        "program": program,
        "notation": notation,
        "notation_symbolic": describe.notation(flavor),
        "notation_gloss": [
            {"symbol": sym, "meaning": words}
            for sym, words in describe.notation_glossary(flavor, notation.split("-DP(", 1)[0])
        ],
        "questions": [{"question": q, "block": b, "answer": a} for q, b, a in describe.five_questions(flavor)],
        "invariants": _invariants(spec, checked.induced if checked else ()),
        "public_information": [{"statistic": p.query.describe(), "source": p.source} for p in spec.public],
        "mechanism": _mechanism(spec, checked),
        "check_problems": list(outcome.check_problems),
        "budget": budget,
        # Only the facts the budget is computed from; a run's own facts may depend on its noise.
        "public_facts": jsonable(dict(ctx.facts or {})),
        "public_facts_shown": _shown_facts(jsonable(dict(ctx.facts or {})), labels),
        "findings": _findings(outcome.findings),
        "severity_counts": {
            s: sum(1 for f in outcome.findings if f.severity == s) for s in ("critical", "warning", "info")
        },
        "audit": {
            "rules_run": list(outcome.rules_run),
            "skipped": [{"rule": r, "reason": why} for r, why in outcome.skipped],
        },
        "comparison": outcome.comparison.to_json() if outcome.comparison is not None else None,
        "baseline_title": ctx.baseline.title if ctx.baseline is not None else None,
        "plain_words": plain,
        # additive (report 1.1): the first screen's verdict, the bounds said beside it, the gate
        "verdict": _verdict(plain, outcome.findings, budget, program),
        "gate": {"allowed_critical": list(getattr(result, "allowed_critical", ()) or ())},
        "releases": _releases(spec, result),
        "sections": _sections(result, audience),
        "provenance": _provenance(spec, result, checked),
    }

    model["certificate"] = _certificate(result)
    model["glossary"] = glossary()  # additive (report 1.1): the jargon, glossed before its first use
    model["nist"] = nist_sections(model)  # additive (report 1.1): NIST SP 800-226's eight sections
    if audience == "internal":
        model["internal"] = _internal(result)
    if spending is not None:  # the plugin's templates of its budget section: for the renderers, not report.json
        model[RENDER_ONLY] = {"budget_markdown": spending.markdown, "budget_html": spending.html}
    return neutral(model)  # no bidi control from a spec or data reorders the report's words
