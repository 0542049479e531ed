"""Probe ServerApp: FedAvg over the Message API, recording which nodes answered each round.

With ``out-dir`` set in the run config it writes ``result.json`` there: per round the
replying node ids, their partition ids, process ids and probe tokens (from the
ClientApps' ``node`` ConfigRecord), and the aggregated metrics.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

# A child of the "flwr" logger: its records reach the run's log (`flwr log`) like Flower's own.
log = logging.getLogger("flwr.probe.server")

app = ServerApp()


class RecordingFedAvg(FedAvg):
    """FedAvg that remembers, per round, who replied (and who replied with an error)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rounds: dict[str, dict[str, Any]] = {}

    def _record(self, server_round: int, phase: str, replies: list[Message]) -> None:
        entry = self.rounds.setdefault(str(server_round), {})
        nodes: list[dict[str, Any]] = []
        for reply in replies:
            if reply.has_error():
                nodes.append({"node-id": reply.metadata.src_node_id, "error": reply.error.reason})
                continue
            info: dict[str, Any] = dict(reply.content.config_records.get("node", {}))
            nodes.append({"node-id": reply.metadata.src_node_id, **info})
        entry[phase] = nodes

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)  # an Iterable: read it once, keep it for both uses
        self._record(server_round, "train", replies)
        return super().aggregate_train(server_round, replies)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        replies = list(replies)
        self._record(server_round, "evaluate", replies)
        return super().aggregate_evaluate(server_round, replies)


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run FedAvg for ``num-server-rounds`` rounds on every connected node."""
    rounds = int(context.run_config["num-server-rounds"])
    out_dir = str(context.run_config.get("out-dir", ""))
    nodes = len(list(grid.get_node_ids()))
    log.info("probe: %d nodes connected at start, run config %s", nodes, dict(context.run_config))
    strategy = RecordingFedAvg(min_train_nodes=3, min_evaluate_nodes=3, min_available_nodes=3)
    initial = ArrayRecord([np.zeros(4, dtype=np.float32), np.zeros(1, dtype=np.float32)])
    result = strategy.start(
        grid=grid,
        initial_arrays=initial,
        num_rounds=rounds,
        train_config=ConfigRecord({"probe": "hello"}),
        timeout=120,
    )
    weights = [a.tolist() for a in result.arrays.to_numpy_ndarrays()]
    summary = {
        "run-id": context.run_id,
        "rounds": strategy.rounds,
        "train-metrics": {str(k): dict(v) for k, v in result.train_metrics_clientapp.items()},
        "evaluate-metrics": {str(k): dict(v) for k, v in result.evaluate_metrics_clientapp.items()},
        "final-weights": weights,
    }
    log.info("probe: finished, final weights %s", weights)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "result.json").write_text(json.dumps(summary, indent=2))
    if context.run_config.get("fail-server"):
        raise RuntimeError("probe: the ServerApp fails on purpose")
