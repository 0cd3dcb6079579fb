"""The settings of production's post-processing: the post-processing-only constraints with their
heuristic, and the failsafe's minimal schema."""
from __future__ import annotations

from dpspec.api import Diagnostic, SpecError, ir

from .locate import item_at
from .tables import _levels


def _postprocess_only(spec: ir.Spec, params: dict) -> dict:
    """{"postprocess_only": names, "postprocess_feasible": levels} from ``postprocess_only: [NAME, ...]``,
    ``postprocess_heuristics: true`` and ``postprocess_require_feasible: [LEVEL, ...]`` (production's
    postprocess_only_constr_names, use_postprocess_heuristics, require_feasible_postproc_dim);
    a located SpecError when one comes without the other or names what is not declared."""
    def loc(name):
        p = spec.mechanism.params.get(name) if spec.mechanism is not None else None
        return (p.loc.line, p.loc.column) if p is not None and p.loc else (None, None)

    def names(name):
        value = params.get(name)
        if value is None:
            return None
        items = value if isinstance(value, tuple) else (value,)
        if not items or not all(isinstance(v, (ir.Name, str)) for v in items):
            example = "[hhgq_total_ub, hhgq_total_lb]" if name == "postprocess_only" else "[state, county]"
            raise SpecError(Diagnostic(f"{name}: expected a list of names, e.g. {example}", *loc(name)))
        return [str(v) for v in items]

    def item(name, value, occurrence=1):
        return item_at(spec, spec.mechanism.params.get(name) if spec.mechanism is not None else None, value,
                       occurrence=occurrence)

    only, feasible = names("postprocess_only"), names("postprocess_require_feasible")
    switch = params.get("postprocess_heuristics")
    if only is None and feasible is None and switch in (None, "false"):
        return {}  # production's default; a list without the switch is refused (geo_optimizers.py:50-51)
    if only is None or switch != "true":
        at = (("postprocess_only" if switch is None else "postprocess_heuristics") if only is not None else
              next(n for n in ("postprocess_heuristics", "postprocess_require_feasible") if params.get(n) is not None))
        raise SpecError(Diagnostic("postprocess_only and postprocess_heuristics: true go together (production applies "
                                   "post-processing-only constraints only with its heuristics on)", *loc(at)))
    if params.get("joint") is not None:  # before the names: a joint spec's cross constraints are not candidates
        raise SpecError(Diagnostic("postprocess_only: not available with joint tables (production's interleaved "
                                   "optimizer, which solves them, has no post-processing-only constraints)",
                                   *loc("postprocess_only")))
    declared = [p.name for p in params["constraints"].params] if isinstance(params.get("constraints"), ir.ParamBlock) else []
    bad = [n for n in only if n not in declared]
    twice = [n for n in only if only.count(n) > 1]
    if bad or twice:
        what = (f"names {', '.join(map(repr, bad))}, which is not a declared constraint" if bad
                else f"names the constraint '{twice[0]}' twice")
        raise SpecError(Diagnostic(f"postprocess_only {what} (declared: {', '.join(declared) or 'none'})",
                                   *item("postprocess_only", (bad or twice)[0], 1 if bad else 2)))
    levels = _levels(spec)
    bad = [lv for lv in feasible or () if lv not in levels]
    if bad:
        raise SpecError(Diagnostic(f"postprocess_require_feasible names {', '.join(map(repr, bad))}, not a geography "
                                   f"level (known: {', '.join(levels)})", *item("postprocess_require_feasible", bad[0])))
    idle = [lv for lv in feasible or () if lv not in params["levels"]]
    if idle:  # no node is solved there, so the requirement would silently do nothing
        raise SpecError(Diagnostic(f"postprocess_require_feasible names {', '.join(map(repr, idle))}, which has no "
                                   f"budget share, so no node is solved there (levels with one: "
                                   f"{', '.join(params['levels'])})", *item("postprocess_require_feasible", idle[0])))
    return {"postprocess_only": only, "postprocess_feasible": feasible or []}


def failsafe_problems(params: dict) -> list[Diagnostic]:
    """What the core cannot check of ``failsafe: { minimal_schema: [hhgq] }`` (its shape it has):
    the failsafe beside a joint table (production's interleaved optimizer has none), and a name
    that is not a histogram variable (production's `minimalSchema`, person_default.ini:81), each
    at its path."""
    block = params.get("failsafe")
    if block is None:
        return []
    if params.get("joint") is not None:  # refused here, at its line, not only when the run starts
        return [Diagnostic("failsafe: not available with a joint table (production's interleaved optimizer, "
                           "which solves the joint tables, has no failsafe); remove it or the joint block",
                           path=("failsafe",))]
    names = block["minimal_schema"]
    bad = [i for i, n in enumerate(names) if n not in params["variables"]]
    if bad or not names:
        return [Diagnostic(f"failsafe: minimal_schema names {', '.join(names[i] for i in bad) or 'nothing'}; it needs "
                           f"histogram variables (known: {', '.join(params['variables'])})",
                           path=("failsafe", "minimal_schema", *bad[:1]))]
    return []
