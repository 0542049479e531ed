"""``fedchain bench aggregator`` prints one row of stage timings per client count."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fedchain.aggregator.bench import aggregator


def test_bench_aggregator_prints_every_stage_for_each_client_count_as_json() -> None:
    args = ["--clients", "1", "--clients", "2", "--model", "lenet5", "--validation", "20", "--repeat", "1", "--json"]

    result = CliRunner().invoke(aggregator, args)

    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["model"], report["validation"]) == ("lenet5", 20)
    rows = report["rows"]
    assert [row["clients"] for row in rows] == [1, 2]
    stages = ("fetch_check_ms", "score_ms", "publish_ms")
    assert all(row[s] >= 0 for row in rows for s in stages)
    assert all(abs(row["total_ms"] - sum(row[s] for s in stages)) < 1e-6 for row in rows)
