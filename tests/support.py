"""Small helpers shared by the tests."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserting that it is there: for outputs that are optional in general but not in the case under test."""
    assert value is not None
    return value
