"""Probe ClientApp: a linear model trained by gradient descent on random data of this node's partition."""

from __future__ import annotations

import logging
import os

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

# A child of the "flwr" logger: its records reach the SuperNode's log like Flower's own.
log = logging.getLogger("flwr.probe.client")

app = ClientApp()

FEATURES = 4
TRUE_WEIGHTS = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)


def _data(partition_id: int, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(partition_id)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = x @ TRUE_WEIGHTS + 0.1 * rng.normal(size=n).astype(np.float32)
    return x, y


def _loss(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ w + b - y) ** 2))


def _node_info(context: Context) -> ConfigRecord:
    """What this node knows about itself: its node config, the run config and one env variable."""
    return ConfigRecord(
        {
            "partition-id": int(context.node_config["partition-id"]),
            "node-id": str(context.node_id),  # a 64-bit id; kept as a string
            "probe-token": os.environ.get("FEDCHAIN_PROBE_TOKEN", ""),
            "pid": os.getpid(),
        }
    )


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Take the global arrays, run a few gradient steps on local data, return arrays and metrics."""
    partition_id = int(context.node_config["partition-id"])
    # Typed access: content.array_records / metric_records / config_records (content["x"] is a union).
    server_round = int(str(msg.content.config_records["config"]["server-round"]))
    if partition_id == int(context.run_config["fail-partition"]) and server_round == 1:
        raise RuntimeError(f"probe: partition {partition_id} fails on purpose")
    steps = int(context.run_config["local-steps"])
    lr = float(context.run_config["learning-rate"])
    arrays = msg.content.array_records["arrays"].to_numpy_ndarrays()
    w, b = arrays[0].copy(), arrays[1].copy()
    x, y = _data(partition_id)
    for _ in range(steps):
        err = x @ w + b - y
        w -= lr * 2 * x.T @ err / len(y)
        b -= lr * 2 * err.mean(keepdims=True)
    log.info("probe: partition %d round %d: loss %.4f", partition_id, server_round, _loss(w, b, x, y))
    content = RecordDict(
        {
            "arrays": ArrayRecord([w, b]),
            "metrics": MetricRecord({"num-examples": len(y), "train-loss": _loss(w, b, x, y)}),
            "node": _node_info(context),
        }
    )
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the global arrays on local data."""
    partition_id = int(context.node_config["partition-id"])
    w, b = msg.content.array_records["arrays"].to_numpy_ndarrays()
    x, y = _data(partition_id, n=32)
    content = RecordDict(
        {
            "metrics": MetricRecord({"num-examples": len(y), "eval-loss": _loss(w, b, x, y)}),
            "node": _node_info(context),
        }
    )
    return Message(content=content, reply_to=msg)
