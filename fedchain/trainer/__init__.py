"""Local training of many clients at once (sequential, process-parallel, vectorised), and evaluation."""

from fedchain.trainer.config import ENGINES, Engine, TrainConfig
from fedchain.trainer.local import client_generator, train_one_client
from fedchain.trainer.pool import WorkerPool, available_cores
from fedchain.trainer.trainer import ClientData, TrainResult, Trainer, initial_params, train_clients

__all__ = [
    "ENGINES",
    "ClientData",
    "Engine",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "WorkerPool",
    "available_cores",
    "client_generator",
    "initial_params",
    "train_clients",
    "train_one_client",
]
