"""The settings of production's post-processing: the post-processing-only constraints with their
heuristic, and the failsafe's minimal schema."""

from __future__ import annotations

from dpspec.api import Diagnostic


def postprocess_problems(params: dict) -> list[Diagnostic]:
    """What the core cannot check of ``postprocess_only: [NAME, ...]``, ``postprocess_heuristics: true``
    and ``postprocess_require_feasible: [LEVEL, ...]`` (production's postprocess_only_constr_names,
    use_postprocess_heuristics, require_feasible_postproc_dim; their types it has): one without the
    other, beside joint tables, a name that is not a declared constraint or is listed twice, a level
    without a budget share; each at its path."""
    only, feasible = params.get("postprocess_only"), params.get("postprocess_require_feasible")
    switch = params.get("postprocess_heuristics")
    if only is None and feasible is None and switch in (None, "false"):
        return []  # production's default; a list without the switch is refused (geo_optimizers.py:50-51)
    if only is None or switch != "true":
        at = (
            ("postprocess_only" if switch is None else "postprocess_heuristics")
            if only is not None
            else next(
                n for n in ("postprocess_heuristics", "postprocess_require_feasible") if params.get(n) is not None
            )
        )
        return [
            Diagnostic(
                "postprocess_only and postprocess_heuristics: true go together (production applies "
                "post-processing-only constraints only with its heuristics on)",
                path=(at,),
            )
        ]
    if params.get("joint") is not None:  # before the names: a joint spec's cross constraints are not candidates
        return [
            Diagnostic(
                "postprocess_only: not available with joint tables (production's interleaved "
                "optimizer, which solves them, has no post-processing-only constraints)",
                path=("postprocess_only",),
            )
        ]
    declared = _constraint_names(params)
    bad = [i for i, n in enumerate(only) if n not in declared]
    twice = [i for i, n in enumerate(only) if n in only[:i]]  # the second writing of a name
    if bad or twice:
        what = (
            f"names {', '.join(repr(only[i]) for i in bad)}, which is not a declared constraint"
            if bad
            else f"names the constraint '{only[twice[0]]}' twice"
        )
        return [
            Diagnostic(
                f"postprocess_only {what} (declared: {', '.join(declared) or 'none'})",
                path=("postprocess_only", (bad or twice)[0]),
            )
        ]
    idle = [i for i, lv in enumerate(feasible or ()) if lv not in params["levels"]]
    if idle:  # no node is solved there, so the requirement would silently do nothing
        return [
            Diagnostic(
                f"postprocess_require_feasible names {', '.join(repr(feasible[i]) for i in idle)}, which "
                f"has no budget share, so no node is solved there (levels with one: "
                f"{', '.join(params['levels'])})",
                path=("postprocess_require_feasible", idle[0]),
            )
        ]
    return []


def _constraint_names(params: dict) -> list[str]:
    """The names of the declared constraints (what postprocess_only may name)."""
    return list(params.get("constraints") or ())


def failsafe_problems(params: dict) -> list[Diagnostic]:
    """What the core cannot check of ``failsafe: { minimal_schema: [hhgq] }`` (its shape it has):
    the failsafe beside a joint table (production's interleaved optimizer has none), and a name
    that is not a histogram variable (production's `minimalSchema`, person_default.ini:81), each
    at its path."""
    block = params.get("failsafe")
    if block is None:
        return []
    if params.get("joint") is not None:  # refused here, at its line, not only when the run starts
        return [
            Diagnostic(
                "failsafe: not available with a joint table (production's interleaved optimizer, "
                "which solves the joint tables, has no failsafe); remove it or the joint block",
                path=("failsafe",),
            )
        ]
    names = block["minimal_schema"]
    bad = [i for i, n in enumerate(names) if n not in params["variables"]]
    if bad or not names:
        return [
            Diagnostic(
                f"failsafe: minimal_schema names {', '.join(names[i] for i in bad) or 'nothing'}; it needs "
                f"histogram variables (known: {', '.join(params['variables'])})",
                path=("failsafe", "minimal_schema", *bad[:1]),
            )
        ]
    return []
