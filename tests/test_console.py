"""What the commands print: tables that never cut a cell, and standard JSON without Python's NaN."""

from __future__ import annotations

import json
import math

import pytest
from rich.console import Console
from rich.table import Table

from fedchain.console import machine_json, print_table


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


def _fairness_like_table() -> Table:
    table = Table(title="fairness")
    for column in ("partition", "strategy", "Pearson mean", "contribution Pearson", "global accuracy"):
        table.add_column(column, justify="left" if column in ("partition", "strategy") else "right")
    table.add_row("pow", "fedave-oracle", "0.539", "0.567", "52.60%")
    table.add_row("dir", "fedfaim", "0.912", "0.488", "96.01%")
    return table


def _printed(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    print_table(console, _fairness_like_table(), labels=2)
    return console.export_text()


def test_a_table_that_fits_is_printed_as_the_table() -> None:
    console = Console(width=200, record=True, color_system=None)
    console.print(_fairness_like_table())

    assert _printed(200) == console.export_text()


def test_a_table_too_wide_for_the_console_becomes_one_block_per_row_with_every_cell_whole() -> None:
    text = _printed(40)

    assert "…" not in text and all(len(line) <= 40 for line in text.splitlines())
    assert "pow · fedave-oracle" in text and "dir · fedfaim" in text
    for pair in (
        "Pearson mean 0.539",
        "contribution Pearson 0.567",
        "global accuracy 52.60%",
        "global accuracy 96.01%",
    ):
        assert pair in text


def test_a_named_heading_puts_each_label_after_its_column_header() -> None:
    table = Table()
    for column in ("client", "samples", "standalone acc", "reward acc"):
        table.add_column(column)
    table.add_row("3", "125", "14.50%", "21.00%")
    console = Console(width=30, record=True, color_system=None)

    print_table(console, table, named=True)

    text = console.export_text()
    assert text.splitlines()[0] == "client 3" and "standalone acc 14.50%" in text and "…" not in text
