"""Federated experiments without a chain: ``fedchain simulate`` and ``fedchain reproduce``.

The public API::

    from fedchain.experiments import load_experiment, run_experiment
    config = load_experiment("configs/mnist-fedavg-iid.yaml", {"rounds": 3})
    result = run_experiment(config)          # an ExperimentResult
    write_metrics(result, config.output_dir)  # metrics.json, metrics.csv
"""

from fedchain.experiments.config import ExperimentConfig, FaultConfig, PruningConfig, load_experiment
from fedchain.experiments.federation import Federation, assign_faults, build_federation
from fedchain.experiments.plots import write_plots
from fedchain.experiments.results import BestRound, ClientInfo, ExperimentResult, RoundRecord, write_metrics
from fedchain.experiments.runner import run_experiment

__all__ = [
    "BestRound",
    "ClientInfo",
    "ExperimentConfig",
    "ExperimentResult",
    "FaultConfig",
    "Federation",
    "PruningConfig",
    "RoundRecord",
    "assign_faults",
    "build_federation",
    "load_experiment",
    "run_experiment",
    "write_metrics",
    "write_plots",
]
