"""``fedchain bench gas``: figures in a table or as JSON, and the per-client gas of a round's post."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fedchain.chain.gasbench import TARGET_GAS_PER_CLIENT_ROUND, gas


def test_gas_bench_prints_json_rows_and_each_added_client_costs_less_than_the_target() -> None:
    # Execute: two small sizes on the bench's own Anvil.
    result = CliRunner().invoke(gas, ["--json", "--clients", "2", "--clients", "4"])
    # Assert
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["target_gas_per_client_round"] == TARGET_GAS_PER_CLIENT_ROUND
    rows = report["rows"]
    assert [row["clients"] for row in rows] == [2, 4]
    assert all(row["gas_per_client_round"] == row["gas"] // row["clients"] for row in rows)
    marginal = (rows[1]["gas"] - rows[0]["gas"]) // 2
    assert 0 < marginal <= TARGET_GAS_PER_CLIENT_ROUND


def test_gas_bench_prints_a_table_by_default() -> None:
    result = CliRunner().invoke(gas, ["--clients", "1"])
    assert result.exit_code == 0, result.output
    header, row, target = result.output.strip().splitlines()
    assert header.split()[0] == "clients" and row.split()[0] == "1"
    assert "25,000" in target
