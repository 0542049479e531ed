"""fedchain.flower.cluster: a real SuperLink and SuperNodes on loopback, running the probe app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from fedchain.errors import FedchainError
from fedchain.flower.cluster import (
    ConfigValue,
    FlowerCluster,
    FlowerClusterError,
    _alive,
    _descendants,
    _proc_table,
    config_args,
    partition_nodes,
)

PROBE_APP = Path(__file__).resolve().parent / "probe_app"


def test_config_args_are_toml_values_flower_reads_back() -> None:
    from flwr.common.config import parse_config_args

    values: dict[str, ConfigValue] = {"partition-id": 2, "lr": 0.05, "fast": True, "out-dir": "/tmp/a b", "name": "x"}
    assert parse_config_args([config_args(values)]) == values


@pytest.mark.parametrize("value", ['say "hi"', "it's", "a\nb", "back\\slash", float("nan")])
def test_config_values_flower_cannot_carry_are_refused(value: ConfigValue) -> None:
    with pytest.raises(FlowerClusterError):
        config_args({"key": value})


def test_partition_nodes() -> None:
    nodes = partition_nodes(2, [{"KEY": "a"}, {"KEY": "b"}])
    assert [dict(n.config) for n in nodes] == [
        {"partition-id": 0, "num-partitions": 2},
        {"partition-id": 1, "num-partitions": 2},
    ]
    assert [dict(n.env) for n in nodes] == [{"KEY": "a"}, {"KEY": "b"}]
    with pytest.raises(FlowerClusterError):
        partition_nodes(2, [{}])


def test_a_cluster_that_does_not_come_up_in_time_is_stopped(tmp_path: Path) -> None:
    cluster = FlowerCluster(tmp_path, partition_nodes(1), startup_timeout_s=0.2)
    with pytest.raises(FlowerClusterError, match="did not answer within") as caught:
        cluster.start()
    assert isinstance(caught.value, FedchainError)
    assert not cluster.running
    assert (tmp_path / "superlink.log").exists()


def _snapshot(cluster: FlowerCluster) -> list[tuple[int, int]]:
    """Every process of the cluster now, Flower's SuperExecs and app processes included: (pid, start time)."""
    table = _proc_table()
    roots = [p.pid for p in cluster._processes]
    found = [(pid, table[pid].start_time) for pid in roots if pid in table]
    return found + [(pid, info.start_time) for root in roots for pid, info in _descendants(root, table)]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_probe_app_trains_on_three_supernodes(tmp_path: Path) -> None:
    tokens = [f"token-{i}" for i in range(3)]
    nodes = partition_nodes(3, [{"FEDCHAIN_PROBE_TOKEN": token} for token in tokens])
    with FlowerCluster(tmp_path / "cluster", nodes) as cluster:
        assert len(set(cluster.node_ids)) == 3
        assert len({cluster.superlink_port, *cluster.supernode_ports}) == 4

        out = tmp_path / "ok"
        result = cluster.run(PROBE_APP, {"num-server-rounds": 2, "out-dir": str(out)}, timeout_s=300)
        assert result.succeeded, result.log
        assert result.returncode == 0
        assert result.log.count("aggregate_train: Received 3 results and 0 failures") == 2
        summary = json.loads((out / "result.json").read_text())
        assert sorted(summary["rounds"]) == ["1", "2"]
        for entry in summary["rounds"].values():
            for phase in ("train", "evaluate"):
                replies = entry[phase]
                # every node answered, each with its own node config and its own environment
                assert sorted(r["partition-id"] for r in replies) == [0, 1, 2]
                assert all(r["probe-token"] == tokens[r["partition-id"]] for r in replies)
                assert {int(r["node-id"]) for r in replies} == set(cluster.node_ids)
        assert summary["train-metrics"]["2"]["train-loss"] < summary["train-metrics"]["1"]["train-loss"]

        # A ClientApp that raises is an error reply; a ServerApp that raises fails the run.
        out = tmp_path / "failing"
        failed = cluster.run(
            PROBE_APP,
            {"num-server-rounds": 1, "out-dir": str(out), "fail-partition": 0, "fail-server": True},
            timeout_s=300,
        )
        assert failed.status == "finished:failed"
        assert failed.returncode == 1
        assert "fails on purpose" in failed.details
        assert "Received 2 results and 1 failures" in failed.log
        errors = [r for r in json.loads((out / "result.json").read_text())["rounds"]["1"]["train"] if "error" in r]
        assert [int(r["node-id"]) for r in errors] == [cluster.node_ids[0]]

        processes = _snapshot(cluster)
    assert len(processes) >= 4 + 4  # the SuperLink and SuperNodes, and a SuperExec under each
    assert not [pid for pid, start_time in processes if _alive(pid, start_time)]
