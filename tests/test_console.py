"""What the commands print for other programs: standard JSON, without Python's NaN."""

from __future__ import annotations

import json
import math

import pytest

from fedchain.console import machine_json


def _strict(text: str) -> object:
    """Parse as RFC 8259 JSON: NaN and Infinity are errors, as in jq or JavaScript."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_at_any_depth_and_the_rest_stays() -> None:
    value = {"pearson": math.nan, "rows": [{"gain": -math.inf, "seeds": 3}, (0.5, math.inf)], "name": "pow"}

    parsed = _strict(machine_json(value))

    assert parsed == {"pearson": None, "rows": [{"gain": None, "seeds": 3}, [0.5, None]], "name": "pow"}


def test_plain_json_of_a_nan_is_what_strict_parsers_refuse() -> None:
    with pytest.raises(ValueError, match="NaN is not JSON"):
        _strict(json.dumps({"pearson": math.nan}))
