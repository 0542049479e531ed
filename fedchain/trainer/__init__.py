"""Local training of many clients at once (sequential, process-parallel, vectorised), and evaluation.

Names are imported on first use, so that the worker processes of the
``process`` engine, which import :mod:`fedchain.trainer.pool`, start without
loading torchvision and the dataset code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "ENGINES": "fedchain.trainer.config",
    "Engine": "fedchain.trainer.config",
    "TrainConfig": "fedchain.trainer.config",
    "DEVICE_TYPES": "fedchain.trainer.device",
    "resolve_device": "fedchain.trainer.device",
    "Predictions": "fedchain.trainer.evaluation",
    "accuracy": "fedchain.trainer.evaluation",
    "evaluate": "fedchain.trainer.evaluation",
    "predict": "fedchain.trainer.evaluation",
    "standalone_accuracies": "fedchain.trainer.evaluation",
    "client_generator": "fedchain.trainer.local",
    "train_one_client": "fedchain.trainer.local",
    "WorkerPool": "fedchain.trainer.pool",
    "available_cores": "fedchain.trainer.pool",
    "ClientData": "fedchain.trainer.trainer",
    "TrainResult": "fedchain.trainer.trainer",
    "Trainer": "fedchain.trainer.trainer",
    "initial_params": "fedchain.trainer.trainer",
    "train_clients": "fedchain.trainer.trainer",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedchain.trainer.config import ENGINES, Engine, TrainConfig
    from fedchain.trainer.device import DEVICE_TYPES, resolve_device
    from fedchain.trainer.evaluation import Predictions, accuracy, evaluate, predict, standalone_accuracies
    from fedchain.trainer.local import client_generator, train_one_client
    from fedchain.trainer.pool import WorkerPool, available_cores
    from fedchain.trainer.trainer import ClientData, Trainer, TrainResult, initial_params, train_clients

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
