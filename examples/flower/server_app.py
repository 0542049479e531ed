"""The ServerApp: Flower's FedAvg, wrapped in FedChain's IncentiveStrategy when ``fedchain`` is on.

The FedChain part is two lines: wrap the strategy, and start from the task's initial model for the task's
rounds. The aggregator's key comes from FEDCHAIN_PRIVATE_KEY where the SuperLink runs.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from pathlib import Path

from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

import mnist_task
from fedchain.flower import FedChainServer, IncentiveStrategy

log = logging.getLogger("flwr.fedchain.example")

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = context.run_config
    clients = int(config["num-clients"])
    fedavg = FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=clients)
    stamps: list[float] = []

    def stamp(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        stamps.append(time.perf_counter())  # before round 1, then after each round: the rounds' wall times
        return None

    if config["fedchain"]:
        aggregate = "fedchain" if config["fedchain-aggregate"] == "fedchain" else "wrapped"
        strategy = IncentiveStrategy(fedavg, FedChainServer.from_run_config(config), aggregate=aggregate)
        initial, rounds = strategy.initial_arrays(), strategy.rounds
    else:
        strategy, rounds = fedavg, int(config["num-server-rounds"])
        initial = ArrayRecord(torch_state_dict=mnist_task.make_model().state_dict())
    strategy.start(grid=grid, initial_arrays=initial, num_rounds=rounds, evaluate_fn=stamp, timeout=600)
    finished = time.perf_counter()
    round_seconds = [b - a for a, b in itertools.pairwise(stamps)]
    log.info("round wall times: %s s", ", ".join(f"{s:.2f}" for s in round_seconds))
    out_dir = str(config["out-dir"])
    if out_dir:
        result = {
            "fedchain": bool(config["fedchain"]),
            "round_seconds": round_seconds,
            # With FedChain: the wait for the last posts to be mined, after the loop (the loop never waits).
            "drain_seconds": finished - stamps[-1] if stamps else 0.0,
            "post_gas": dict(strategy.poster.gas) if isinstance(strategy, IncentiveStrategy) else {},
        }
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        name = "fedchain.json" if config["fedchain"] else "plain.json"
        (Path(out_dir) / name).write_text(json.dumps(result, indent=2))
