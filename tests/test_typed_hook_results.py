"""An optional hook's answer is a typed, frozen object (API 1.6); the shape a plugin of API 1.5
returned is still read, with a DeprecationWarning naming the class to return."""

from __future__ import annotations

import attrs
import pytest

from dpspec.api import ZCDP, ChangeOne
from dpspec.contract.mechanism import change_one_result


class _Named:
    name = "old_change_one"


def test_a_change_one_tuple_is_read_with_a_warning_naming_the_class():
    with pytest.warns(DeprecationWarning, match=r"old_change_one.*dpspec\.api\.ChangeOne\(budget, reason\)"):
        got = change_one_result((ZCDP(1), "why"), _Named())
    assert got == ChangeOne(ZCDP(1), "why")


def test_a_change_one_object_passes_unchanged_and_is_frozen():
    answer = ChangeOne(ZCDP(1), "why")
    assert change_one_result(answer, _Named()) is answer and change_one_result(None, _Named()) is None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        answer.reason = "other"


def test_the_built_in_change_one_hooks_return_the_class():
    from dpspec.api import check, parse, read_source

    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("sdhc_production.dps", "safetab_p_production.dps"):
        path = os.path.join(root, "specs", name)
        checked = check(parse(read_source(path), path))
        answer = checked.mechanism.change_one(checked.spec, checked.params, ZCDP(1))
        assert isinstance(answer, ChangeOne) and answer.budget.rho == 2, name
