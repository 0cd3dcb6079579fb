"""`dpspec export --opendp`: a Python script that builds the spec's mechanism as an OpenDP measurement.

The mechanism says how (its optional `opendp_script`); dpspec wraps that body into a script that
prints OpenDP's privacy map at the spec's unit, so the budget can be cross-checked in the library.
A mechanism without the method is not expressible, and the export says so instead of guessing.
"""

from __future__ import annotations

import json

from dpspec.errors import SpecError
from dpspec.check.checker import check
from dpspec.language.parser import parse, read_source
from dpspec.contract import plugins
from dpspec.contract.mechanism import Mechanism

HEAD = '''#!/usr/bin/env python3
"""Written by `dpspec export --opendp` from {source}: mechanism {mechanism} as an OpenDP measurement.

Run it with OpenDP 0.16 installed (pip install 'dpspec[opendp]'); it prints OpenDP's privacy map
at the spec's unit as JSON, to compare with `dpspec budget {source}`."""
import json

import opendp.prelude as dp

dp.enable_features("contrib")

'''
TAIL = """

claim = measurement.map(d_in)
print(json.dumps({{"spec": {source}, "mechanism": {mechanism}, "d_in": d_in,
                  "measure": str(measurement.output_measure),
                  "map": list(claim) if isinstance(claim, tuple) else claim}}))
"""


def opendp_script(path: str) -> str:

    checked = check(parse(read_source(path), path))
    mech, params = checked.mechanism, checked.params
    body = mech.opendp_script(checked.spec, params)
    if body is None:
        able = sorted(
            n for n, m in plugins.mechanisms().items() if type(m).opendp_script is not Mechanism.opendp_script
        )
        raise SpecError(
            f"mechanism '{mech.name}' has no OpenDP equivalent that dpspec can write (its plugin does "
            f"not provide one); the installed mechanisms that do: {', '.join(able) or 'none'}",
            path,
        )
    shown = path.replace("\\", "/").replace('"', "'")
    return (
        HEAD.format(source=shown, mechanism=mech.name)
        + body.rstrip()
        + "\n"
        + TAIL.format(source=json.dumps(path), mechanism=json.dumps(mech.name))
    )
