"""Shared fixtures: a small valid spec and its data, written into a temporary directory."""
from __future__ import annotations

import os
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

SMALL_SPEC = textwrap.dedent('''\
    spec "small"
    domain survey "a small survey" {
      stage edited
      geography geo { region > district }
      table people unit person {
        region   : category
        district : category in region
        age      : int 0..120
        smoker   : bool
        status   : {single, married, "N"}
      }
    }
    data people from "people.csv"
    invariants {
      count people
    }
    unit people : hamming
    premetric pure
    mechanism randomized_response { table: people  column: smoker  p: 3/4 }
    budget epsilon <= 1.1
    release {
      output responses
      output estimate
    }
    ''')

SMALL_CSV = textwrap.dedent('''\
    region,district,age,smoker,status
    north,n1,34,true,single
    north,n1,51,false,married
    north,n2,17,false,N
    south,s1,70,true,married
    south,s1,45,false,single
    ''')


@pytest.fixture
def small_spec(tmp_path):
    """Path to a valid spec whose data sits beside it."""
    (tmp_path / "people.csv").write_text(SMALL_CSV)
    path = tmp_path / "small.dps"
    path.write_text(SMALL_SPEC)
    return path
