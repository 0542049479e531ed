"""Local training of many clients at once (sequential, process-parallel, vectorised), and evaluation."""

from fedchain.trainer.config import ENGINES, Engine, TrainConfig
from fedchain.trainer.evaluate import Predictions, accuracy, evaluate, predict, standalone_accuracies
from fedchain.trainer.local import client_generator, train_one_client
from fedchain.trainer.pool import WorkerPool, available_cores
from fedchain.trainer.trainer import ClientData, TrainResult, Trainer, initial_params, train_clients

__all__ = [
    "ClientData",
    "ENGINES",
    "Engine",
    "Predictions",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "WorkerPool",
    "accuracy",
    "available_cores",
    "client_generator",
    "evaluate",
    "initial_params",
    "predict",
    "standalone_accuracies",
    "train_clients",
    "train_one_client",
]
