"""Bundled specs are in canonical form, and fmt keeps end-of-line comments on their lines."""

from __future__ import annotations

import glob
import os

import pytest

import dpspec
from dpspec.language.formatter import format_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = sorted(glob.glob(os.path.join(ROOT, "specs", "**", "*.dps"), recursive=True))


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: os.path.relpath(p, ROOT))
def test_bundled_spec_is_canonical(path):
    spec = dpspec.load(path)
    assert format_spec(spec) == spec.text, f"run: dpspec fmt --write {os.path.relpath(path, ROOT)}"


EOL = """spec "s"  # the title
domain d "x" {
  stage edited   # where in the life cycle
  table people unit person {
    region : category   # the region
    age    : int 0..120
  }
}
data people from "people.csv"  # the file
invariants {
  count people            # the total
  count people by region  # per region
}
unit people : hamming
premetric pure
mechanism randomized_response { table: people  column: age  p: 3/4 }  # p keeps
budget epsilon <= 1.1
"""


def test_end_of_line_comments_stay_on_their_lines():
    text = format_spec(dpspec.load(EOL))
    lines = text.split("\n")
    for code, comment in [
        ('spec "s"', "# the title"),
        ("stage edited", "# where in the life cycle"),
        ("region : category", "# the region"),
        ('data people from "people.csv"', "# the file"),
        ("count people", "# the total"),
        ("count people by region", "# per region"),
        ("mechanism randomized_response {", "# p keeps"),
    ]:
        assert any(line.strip() == f"{code}  {comment}" for line in lines), (code, text)
    assert text.count("#") == 7
    assert format_spec(dpspec.load(text)) == text  # idempotent


def test_a_comment_whose_line_is_gone_is_kept_on_its_own_line():
    from dpspec.language.eol_comments import place

    assert place("a b\nc d", ((("x", "y"), "# lost"),)) == "# lost\na b\nc d"
