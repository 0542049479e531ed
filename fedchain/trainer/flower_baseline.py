"""Flower's simulation engine as a contender of ``fedchain bench train --flower``.

The issue measures the FedChain trainer against Flower's simulation
engine (Ray). Flower itself is in the project's environment (fedchain.flower);
Ray is large, so it lives in an environment of its own, layered on the
project's: ``make bench-flower`` creates ``.venv-flower`` and runs the
benchmark from there.

The workload is the other contenders': every client trains LeNet-5 from the
global model for one epoch with the plain loop's code (``DataLoader``,
``torch.optim.SGD``), FedAvg aggregates. Flower runs one Ray actor per core,
each with one torch thread. A round is timed from one server-side evaluation
call to the next (Flower calls ``evaluate_fn`` before round 1 and after every
round); round 1 includes the actors' start-up, so it is a warm-up and is
reported apart.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from fedchain.errors import ConfigError, TrainingError
from fedchain.fl.params import ParamSpec, unflatten
from fedchain.models.registry import ModelSpec
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.plain import fit_client

log = logging.getLogger(__name__)

#: The Flower release the issue measured.
FLOWER_VERSION = "1.42.0"
INSTALL_HINT = (
    f"run `make bench-flower`: it installs flwr[simulation]=={FLOWER_VERSION} in .venv-flower, "
    "beside the project's packages, and runs this benchmark from there"
)

Clients = Sequence[tuple[torch.Tensor, torch.Tensor]]


def require_flower() -> None:
    """Fail with the way to install Flower unless ``flwr[simulation]`` can be imported here."""
    try:
        import flwr
        import ray  # noqa: F401  (the simulation engine's backend)
    except ImportError as err:
        raise ConfigError(f"the Flower contender needs flwr[simulation] ({err})", hint=INSTALL_HINT) from err
    if flwr.__version__ != FLOWER_VERSION:
        log.warning("Flower %s, not the %s the issue measured", flwr.__version__, FLOWER_VERSION)


def flower_round_seconds(
    spec: ModelSpec, start: torch.Tensor, clients: Clients, config: TrainConfig, rounds: int, actors: int
) -> tuple[float, list[float]]:
    """Run ``rounds + 1`` rounds of Flower's simulation engine; returns (first round, the others) in seconds.

    Raises:
        ConfigError: Flower is not installed in this environment.
        TrainingError: a round did not aggregate every client (one failed; Flower's log says why).
    """
    require_flower()
    from flwr.client import ClientApp, NumPyClient
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import run_simulation

    state = unflatten(start.cpu(), ParamSpec.of(spec.build().state_dict()))
    names = list(state)
    initial = [t.numpy().copy() for t in state.values()]
    data = [(images.cpu(), labels.cpu()) for images, labels in clients]

    class BenchClient(NumPyClient):
        def __init__(self, index: int) -> None:
            self.index = index

        def fit(self, parameters, fit_config):  # type: ignore[no-untyped-def]
            torch.set_num_threads(1)
            local = spec.build()
            local.load_state_dict({n: torch.from_numpy(p) for n, p in zip(names, parameters, strict=True)})
            images, labels = data[self.index]
            fit_client(local, images, labels, config, config.seed + self.index)
            return [t.detach().numpy() for t in local.state_dict().values()], len(labels), {"trained": 1}

    def client_fn(context: Context):  # type: ignore[no-untyped-def]
        return BenchClient(int(context.node_config["partition-id"])).to_client()

    stamps: list[float] = []
    aggregated: list[int] = []  # clients averaged in each round (FedAvg skips a round with a failed client)

    def count_results(metrics):  # type: ignore[no-untyped-def]
        aggregated.append(sum(m["trained"] for _, m in metrics))
        return {}

    def evaluate(server_round, parameters, evaluate_config):  # type: ignore[no-untyped-def]
        stamps.append(time.perf_counter())

    def server_fn(context: Context):  # type: ignore[no-untyped-def]
        strategy = FedAvg(
            fraction_fit=1.0,
            fraction_evaluate=0.0,
            min_fit_clients=len(data),
            min_available_clients=len(data),
            accept_failures=False,
            initial_parameters=ndarrays_to_parameters(initial),
            evaluate_fn=evaluate,
            fit_metrics_aggregation_fn=count_results,
        )
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds + 1))

    flwr_log = logging.getLogger("flwr")
    level = flwr_log.level
    flwr_log.setLevel(logging.ERROR)  # its per-round INFO lines and deprecation notices; failures still show
    backend: dict[str, dict[str, Any]] = {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {"num_cpus": actors, "log_to_driver": False},
    }
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="ray")  # a notice about GPU env vars
            run_simulation(
                server_app=ServerApp(server_fn=server_fn),
                client_app=ClientApp(client_fn=client_fn),
                num_supernodes=len(data),
                backend_config=backend,
            )
    finally:
        flwr_log.setLevel(level)
    if len(stamps) != rounds + 2 or aggregated != [len(data)] * (rounds + 1):
        raise TrainingError(
            f"Flower aggregated {aggregated} clients in its rounds, expected {len(data)} in each of {rounds + 1}",
            hint="a client failed; Flower's log above says why",
        )
    seconds = np.diff(stamps).tolist()
    return seconds[0], seconds[1:]
