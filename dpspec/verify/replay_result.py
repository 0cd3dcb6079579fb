"""What a replay found, per neighbour and overall, as text and as stable JSON (`dpspec verify --replay --json`)."""

from __future__ import annotations

from fractions import Fraction

import attrs

KINDS = ("control-flow", "structure", "sensitivity", "invariant", "failed", "not-a-native-neighbour")


@attrs.frozen
class Finding:
    """One difference between the data's run and a neighbour's (or an explained one)."""

    kind: str
    message: str
    label: str | None = None  # the measurement it concerns
    output: str | None = None  # the output it concerns

    def to_json(self) -> dict:
        out = {"kind": self.kind, "message": self.message}
        if self.label is not None:
            out["measurement"] = self.label
        if self.output is not None:
            out["output"] = self.output
        return out


@attrs.frozen
class NeighbourReplay:
    neighbour: dict  # DataNeighbour.to_json()
    universe_moved: str | None  # the invariant or public statistic the neighbour changes, if any
    native_steps: int | None  # distance under the mechanism's native relation
    findings: tuple
    explained: tuple  # differences a declared adaptive step (or a universe change) accounts for
    loss: dict  # realised privacy loss of the pair: {"rho": ..., "epsilon": ...}

    def to_json(self) -> dict:
        return {
            "neighbour": dict(self.neighbour),
            "universe_moved": self.universe_moved,
            "native_steps": self.native_steps,
            "findings": [f.to_json() for f in self.findings],
            "explained": [f.to_json() for f in self.explained],
            "realised_loss": {k: _num(v) for k, v in self.loss.items()},
        }


@attrs.frozen
class Replay:
    mechanism: str
    version: str
    spec_sha256: str
    seed: int
    table: str  # the table whose records the neighbours change
    cell_columns: tuple  # the columns whose cells they aim at
    native: dict  # the mechanism's native flavor
    budget: dict | None  # its native budget, for information
    measurements: int  # queries the data's run measured
    outputs: dict  # the data's run's release structure
    neighbours: tuple  # of NeighbourReplay
    notes: tuple = ()

    @property
    def findings(self) -> list:
        return [f for n in self.neighbours for f in n.findings]

    @property
    def exit_code(self) -> int:
        return 1 if self.findings else 0

    @property
    def verdict(self) -> str:
        return "findings" if self.findings else "clean"

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "mechanism": {"name": self.mechanism, "version": self.version},
            "spec_sha256": self.spec_sha256,
            "seed": self.seed,
            "table": self.table,
            "cell_columns": list(self.cell_columns),
            "native_flavor": dict(self.native),
            "native_budget": self.budget,
            "measurements": self.measurements,
            "outputs": self.outputs,
            "neighbours": [n.to_json() for n in self.neighbours],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        n = len(self.findings)
        head = (
            f"replay of mechanism '{self.mechanism}' {self.version}: "
            + (f"{n} finding{'s' if n != 1 else ''}" if n else "clean")
            + f" over {len(self.neighbours)} neighbour{'s' if len(self.neighbours) != 1 else ''} of the data "
            f"({self.measurements} queries measured; seed {self.seed})"
        )
        lines = [
            head,
            f"neighbours change one '{self.table}' record"
            + (f", aimed at the cells of {', '.join(self.cell_columns)}" if self.cell_columns else ""),
        ]
        if self.budget:
            lines.append("native budget (for information): " + ", ".join(f"{k} {v}" for k, v in self.budget.items()))
        for note in self.notes:
            lines.append(f"note: {note}")
        for r in self.neighbours:
            nb = r.neighbour
            what = f"{nb['label']}: {nb['change']} record {nb['row']}" + (
                " (" + ", ".join(f"{k}={v}" for k, v in nb["record"].items()) + ")" if nb.get("record") else ""
            )
            loss = "; realised loss " + ", ".join(f"{k} {_num(v):.4g}" for k, v in r.loss.items()) if r.loss else ""
            universe = f"; leaves the universe ('{r.universe_moved}')" if r.universe_moved else ""
            lines.append(f"- {what}{universe}{loss}")
            for f in r.findings:
                lines.append(f"    FINDING [{f.kind}] {f.message}")
            for f in r.explained:
                lines.append(f"    explained [{f.kind}] {f.message}")
        return "\n".join(lines)


def _num(v):
    return float(v) if isinstance(v, Fraction) else v
