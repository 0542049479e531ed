"""The built-in strategies; importing this package registers them (see :func:`fedchain.fl.get_strategy`)."""

from fedchain.fl.strategies.fedavg import FedAvg

__all__ = ["FedAvg"]
