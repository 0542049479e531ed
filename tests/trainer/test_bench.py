"""``fedchain bench train`` prints both contenders' figures and their ratio (no timing is asserted)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fedchain.trainer.bench import train


def test_bench_train_json_reports_both_loops_on_the_requested_workload(monkeypatch) -> None:
    monkeypatch.delenv("FEDCHAIN_DATA_ROOT", raising=False)

    result = CliRunner().invoke(
        train, ["--json", "--clients", "2", "--samples", "40", "--rounds", "1", "--engine", "vmap", "--device", "cpu", "--threads", "1"]
    )

    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["workload"]["clients"] == 2 and report["workload"]["samples_per_client"] == 40
    assert report["workload"]["data"].startswith("MNIST-shaped random data")
    assert report["engine"] == "vmap"
    for key in ("plain", "sequential", "fedchain"):
        assert len(report[key]["rounds"]) == 1
        assert report[key]["samples_per_second"] == 80 / report[key]["seconds_per_round"]
    assert report["speedup_vs_plain"] == report["fedchain"]["samples_per_second"] / report["plain"]["samples_per_second"]


def test_bench_train_table_names_the_data_device_and_ratio(monkeypatch) -> None:
    monkeypatch.delenv("FEDCHAIN_DATA_ROOT", raising=False)

    result = CliRunner().invoke(
        train, ["--clients", "2", "--samples", "32", "--rounds", "1", "--engine", "sequential", "--device", "cpu", "--threads", "1"]
    )

    assert result.exit_code == 0, result.output
    assert "data: MNIST-shaped random data (no data root)" in result.output
    assert "machine: cpu" in result.output and "speed-up:" in result.output
