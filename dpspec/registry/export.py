"""`dpspec export --registry`: a spec as an OpenDP Deployments Registry entry.

The formal blocks go where the registry's schema puts them, in dpspec notation inside fenced
code blocks so that the entry reads as Markdown and imports back exactly: the domain in
`dp_variant.data_domain`, invariants and public information in
`dp_variant.unprotected_quantities`, the unit in `privacy_loss.privacy_unit_details`, the
premetric and declared bounds in `privacy_loss.privacy_parameters_details`. The privacy
parameters are the budget the mechanism achieves in the spec's flavor (computed by the same
ledger as `dpspec budget`). What a spec does not know (the curator, the intended use, the
publication date, ...) comes from its `notes`; what an import could not formalise travels in
the fenced block of privacy_parameters_details, so a round trip does not launder it into fact, keyed by the schema's field paths; a required
field that is missing is an error naming the note to add.
"""

from __future__ import annotations

import re

import yaml

from dpspec import ir
from dpspec.audit.registry_rules import UNCHECKED_NOTE
from dpspec.errors import Diagnostic, SpecError
from dpspec.language.formatter import format_spec
from dpspec.registry import prose
from dpspec.registry.entry import schema, schema_problems, dotted
from dpspec.budget.spec_account import spec_ledger

REQUIRED_BASIC = (
    "data_curators",
    "description",
    "intended_use",
    "data_product_type",
    "data_product_region",
    "publication_date",
)
LIST_FIELDS = {("basic", "data_curators"), ("administrative", "registry_authors")}


def _schema_node(path: tuple[str, ...]):
    node = schema()["properties"]["deployment"]
    for key in path:
        props = node.get("properties") if isinstance(node, dict) else None
        if not props or key not in props:
            return None
        node = props[key]
    return node


def _ordered(data: dict, node: dict) -> dict:
    """Fields in the schema's own order, as the registry's template lists them."""
    props = node.get("properties", {})
    keys = [k for k in props if k in data] + [k for k in data if k not in props]
    return {k: _ordered(data[k], props.get(k, {})) if isinstance(data[k], dict) else data[k] for k in keys}


def _notation(spec: ir.Spec, **parts) -> list[str]:
    """Some blocks of a spec in canonical dpspec notation (the formatter's own output)."""
    fragment = ir.Spec(**parts)
    return format_spec(fragment).rstrip("\n").split("\n")


def _budget_params(budget) -> dict:
    """The schema's privacy_parameters (epsilon, delta, rho) for a budget, when it has them."""
    params = budget.params()
    out = {k: float(params[k]) for k in ("epsilon", "delta", "rho") if k in params and not isinstance(params[k], list)}
    return out


def _achieved(spec: ir.Spec):

    _, _, _, _, ledger = spec_ledger(spec)
    if ledger.declared is None or not ledger.declared.is_finite:
        raise SpecError(
            [
                Diagnostic(
                    f"the spec's budget is {ledger.problem or 'infinite'}; a registry entry needs a finite one", 1, 1
                )
            ],
            spec.path,
            spec.text,
        )
    return ledger.declared


def entry_data(spec: ir.Spec) -> dict:
    """The registry entry for a checked spec, as plain data (validated against the schema)."""
    problems = []
    notes = {n.key: n.text for n in spec.notes}
    if not spec.title:
        problems.append("the spec has no title; the entry's basic.name is the spec's title (spec \"...\")")
    for key in REQUIRED_BASIC:
        if f"basic.{key}" not in notes:
            problems.append(
                f'the registry requires basic.{key}: add it to the spec\'s notes, e.g. notes {{ basic.{key}: "..." }}'
            )
    if problems:
        raise SpecError([Diagnostic(p, 1, 1) for p in problems], spec.path, spec.text)
    budget = _achieved(spec)
    deployment: dict = {}

    def put(path: tuple[str, ...], value):
        node = deployment
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    for key, text in notes.items():  # every note that names a schema field, in the schema's types
        path = tuple(key.split("."))
        node = _schema_node(path)
        if node is None or "properties" in node or path == ("basic", "name"):
            continue
        put(path, text.split("\n") if path in LIST_FIELDS else text)
    put(("basic", "name"), spec.title)
    put(("dp_variant", "variant_name"), prose.VARIANT_NAMES[spec.premetric.kind])
    put(
        ("dp_variant", "data_domain"),
        prose.with_formal(notes.get("dp_variant.data_domain"), _notation(spec, domain=spec.domain)),
    )
    where = (
        _notation(spec, invariants=spec.invariants, public=spec.public, public_keys=spec.public_keys)
        if (spec.invariants or spec.public or spec.public_keys)
        else ["invariants {", "}"]
    )
    put(
        ("dp_variant", "unprotected_quantities"),
        prose.with_formal(notes.get("dp_variant.unprotected_quantities"), where),
    )
    table = spec.domain.table(spec.unit.table)
    unit_name = table.unit if table is not None else spec.unit.table
    put(
        ("privacy_loss", "privacy_unit"),
        notes.get("privacy_loss.privacy_unit") or re.sub(r"[_ ]+", "-", unit_name).capitalize() + "-level",
    )
    put(
        ("privacy_loss", "privacy_unit_details"),
        prose.with_formal(notes.get("privacy_loss.privacy_unit_details"), _notation(spec, unit=spec.unit)),
    )
    put(("privacy_loss", "privacy_parameters"), _budget_params(budget))
    put(
        ("privacy_loss", "privacy_parameters_details"),
        prose.with_formal(
            notes.get("privacy_loss.privacy_parameters_details"),
            _notation(
                spec,
                premetric=spec.premetric,
                budgets=spec.budgets,
                notes=tuple(n for n in spec.notes if n.key == UNCHECKED_NOTE),
            ),
        ),
    )
    if spec.tuning is not None and "implementation.preprocessing_and_hyperparameter_tuning" not in notes:
        t = spec.tuning
        put(
            ("implementation", "preprocessing_and_hyperparameter_tuning"),
            f"Parameters were tuned on {t.source} data" + (f": {t.note}" if t.note else "."),
        )
    deployment = _ordered(deployment, schema()["properties"]["deployment"])
    entry = {
        "url_slug": notes.get("url_slug") or re.sub(r"[^a-z0-9]+", "-", spec.title.lower()).strip("-"),
        "status": notes.get("status", "Draft"),
        "tier": _tier(notes.get("tier")),
        "deployment": deployment,
    }
    bad = schema_problems(entry)
    if bad:
        raise SpecError(
            [Diagnostic(f"the exported entry breaks the registry schema at {dotted(f)}: {m}", 1, 1) for f, m, _ in bad],
            spec.path,
            spec.text,
        )
    return entry


def _tier(note: str | None):
    """The tier note as a number; anything else is passed on for the schema check to name
    (int() of a 5,000-digit or superscript note would crash instead)."""
    if note is None:
        return 3
    return int(note) if re.fullmatch(r"[0-9]{1,4}", note.strip()) else note


class _Dumper(yaml.SafeDumper):
    """Block scalars for text with line breaks (the registry asks for '|'), plain otherwise."""


def _str(dumper, value: str):
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def entry_yaml(spec: ir.Spec) -> str:
    """The entry as YAML text, fields in the schema's order."""
    header = "# Exported by `dpspec export --registry`; the formal blocks are dpspec notation.\n"
    return header + yaml.dump(entry_data(spec), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
