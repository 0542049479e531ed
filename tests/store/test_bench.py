"""``fedchain bench store`` prints one row of figures per update size."""

from __future__ import annotations

import json

import torch
from click.testing import CliRunner

from fedchain.store.bench import store
from fedchain.updates import UpdateMeta, encode_update


def test_bench_store_prints_every_stage_for_each_size_as_json() -> None:
    result = CliRunner().invoke(store, ["--params", "10", "--params", "20", "--repeat", "1", "--json"])

    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [row["params"] for row in rows] == [10, 20]
    meta = UpdateMeta(task_id=1, round=1, job_id=1, client="0x" + "00" * 20, model="bench")
    assert round(rows[0]["megabytes"] * 1e6) == len(encode_update({"weight": torch.zeros(10)}, meta))
    stages = {"encode_ms", "keccak256_ms", "put_ms", "get_verified_ms", "decode_checked_ms", "fetch_update_ms"}
    assert stages <= set(rows[0]) and all(rows[0][stage] >= 0 for stage in stages)
