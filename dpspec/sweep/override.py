"""Replacing a mechanism parameter in a spec's IR: the new spec is then checked like any other.

A parameter is named by its path in the mechanism block: `rate`, `levels.county`,
`queries.state.total`, `tables.t1.rho.nation.level2`, and list items by position
(`tables.t1.thresholds.nation.level1.0`). Every number written in the block is addressable,
and so is every numeric parameter of the mechanism's schema left at its default. Nothing here
judges a value: the checker does, through the same path as a value written in the file.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.contract import plugins
from dpspec.errors import Diagnostic, SpecError
from dpspec.language.diagnostics import unknown

NUMERIC_TYPES = ("number", "int")


def _leaves(value, prefix: str):
    """(path, number) for every number inside a written parameter value."""
    if isinstance(value, Fraction):
        yield prefix, value
    elif isinstance(value, ir.ParamBlock):
        for p in value.params:
            yield from _leaves(p.value, f"{prefix}.{p.name}")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{prefix}.{i}")


def addressable(spec: ir.Spec) -> dict[str, Fraction | None]:
    """{path: current value} of every parameter a sweep may vary (None: the schema's default)."""
    call = spec.mechanism
    if call is None:
        return {}
    out: dict = {}
    for p in call.params.params:
        out.update(_leaves(p.value, p.name))
    mech = plugins.mechanisms().get(call.name)
    for ps in mech.parameters.params if mech else ():
        if ps.type in NUMERIC_TYPES and call.params.get(ps.name) is None:
            out[ps.name] = Fraction(ps.default) if ps.default is not None else None
    return out


def _replace(value, parts: list[str], new: Fraction):
    """`value` with the number at `parts` replaced (parts already known to exist)."""
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(value, ir.ParamBlock):
        params = tuple(
            attrs.evolve(p, value=_replace(p.value, rest, new)) if p.name == head else p for p in value.params
        )
        return attrs.evolve(value, params=params)
    index = int(head)
    return tuple(_replace(item, rest, new) if i == index else item for i, item in enumerate(value))


def unknown_name(spec: ir.Spec, name: str) -> SpecError:
    """A parameter path the mechanism does not have, with a did-you-mean."""
    call = spec.mechanism
    message, hint = unknown("parameter", name, list(addressable(spec)), f"mechanism '{call.name}'" if call else None)
    where = call.loc if call is not None else None
    return SpecError(
        [
            Diagnostic(
                f"--vary {name}: {message}", where.line if where else None, where.column if where else None, hint=hint
            )
        ],
        spec.path,
        spec.text,
    )


def override(spec: ir.Spec, values: dict) -> ir.Spec:
    """A new spec with each {path: number} replaced; unknown paths are refused (did you mean)."""
    known = addressable(spec)
    call = spec.mechanism
    params = call.params if call is not None else None
    for path, new in values.items():
        if path not in known:
            raise unknown_name(spec, path)
        head, *rest = path.split(".")
        current = params.get(head)
        if current is None:  # a schema parameter left at its default: written now
            params = attrs.evolve(params, params=params.params + (ir.Param(head, new, call.loc),))
        else:
            params = attrs.evolve(
                params,
                params=tuple(
                    attrs.evolve(p, value=_replace(p.value, rest, new)) if p.name == head else p for p in params.params
                ),
            )
    return attrs.evolve(spec, mechanism=attrs.evolve(call, params=params))


def balanced(spec: ir.Spec, path: str) -> Fraction:
    """The value that makes `path`'s block of shares sum to exactly 1 (for --balance)."""
    known = addressable(spec)
    if path not in known:
        raise unknown_name(spec, path)
    parent = path.rpartition(".")[0]
    siblings = [
        v
        for p, v in known.items()
        if p != path
        and p.rpartition(".")[0] == parent
        and "." in p
        and p.count(".") == path.count(".")
        and v is not None
    ]
    if "." not in path or not siblings:
        raise SpecError(
            [Diagnostic(f"--balance {path}: it has no sibling shares in a block to balance against")],
            spec.path,
            spec.text,
        )
    return 1 - sum(siblings, Fraction(0))
