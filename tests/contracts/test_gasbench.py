"""``fedchain bench gas``: figures in a table or as JSON, the per-client gas of a round's post, and what batches save."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fedchain.chain.gasbench import BATCHED_STEPS, TARGET_GAS_PER_CLIENT_ROUND, gas


def test_gas_bench_prints_json_rows_and_each_added_client_costs_less_than_the_target() -> None:
    # Execute: two small sizes on the bench's own Anvil.
    result = CliRunner().invoke(gas, ["--json", "--clients", "2", "--clients", "4", "--batch-jobs", "0"])
    # Assert
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["target_gas_per_client_round"] == TARGET_GAS_PER_CLIENT_ROUND
    rows = report["rows"]
    assert [row["clients"] for row in rows] == [2, 4]
    assert all(row["gas_per_client_round"] == row["gas"] // row["clients"] for row in rows)
    assert all(row["finalize_gas_per_client_round"] == row["finalize_gas"] // row["clients"] for row in rows)
    marginal = (rows[1]["gas"] - rows[0]["gas"]) // 2
    assert 0 < marginal <= TARGET_GAS_PER_CLIENT_ROUND
    assert rows[1]["finalize_gas"] > rows[0]["finalize_gas"] > 21_000
    disputes = report["disputes"]
    assert all(value > 21_000 for key, value in disputes.items() if key != "clients"), disputes
    assert report["batches"] == []


def test_gas_bench_prints_a_table_by_default() -> None:
    result = CliRunner().invoke(gas, ["--clients", "1", "--batch-jobs", "1"])
    assert result.exit_code == 0, result.output
    header, row, target, _, disputes, *rest = result.output.strip().splitlines()
    assert header.split()[0] == "clients" and row.split()[0] == "1"
    assert "25,000" in target
    assert disputes.startswith("disputes on a task of 3 clients")
    batch_header, *batch_rows = rest[6:]
    assert batch_header.split()[0] == "step"
    assert [r.split()[2] for r in batch_rows] == ["1"] * len(BATCHED_STEPS)


def test_one_batch_call_for_three_jobs_costs_less_than_three_single_calls() -> None:
    # Execute
    result = CliRunner().invoke(gas, ["--json", "--clients", "1", "--batch-jobs", "3"])
    # Assert: every step saves at least the base cost (21,000 gas) of one of the two transactions it spares.
    assert result.exit_code == 0, result.output
    batches = json.loads(result.output)["batches"]
    assert [(b["step"], b["jobs"]) for b in batches] == [(step, 3) for step in BATCHED_STEPS]
    for b in batches:
        assert b["singles_gas"] - b["batch_gas"] >= 21_000, b
        assert b["saving_percent"] == round(100 * (b["singles_gas"] - b["batch_gas"]) / b["singles_gas"], 1)
