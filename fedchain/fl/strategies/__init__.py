"""The built-in strategies; :mod:`fedchain.fl.registry` names them (see :func:`fedchain.fl.get_strategy`)."""

from fedchain.fl.strategies.cgsv import CGSV, CGSVState
from fedchain.fl.strategies.fair import Fair, FairState
from fedchain.fl.strategies.fedave import FedAVE, FedAVEState
from fedchain.fl.strategies.fedavg import FedAvg
from fedchain.fl.strategies.fedfaim import FedFAIM, FedFAIMState
from fedchain.fl.strategies.quality_weighted import QualityWeighted

__all__ = [
    "CGSV",
    "CGSVState",
    "Fair",
    "FairState",
    "FedAVE",
    "FedAVEState",
    "FedAvg",
    "FedFAIM",
    "FedFAIMState",
    "QualityWeighted",
]
