"""``fedchain reproduce``: the papers' tables on real MNIST, as experiments that print a table.

* ``rounds-to-accuracy``: rounds until the global LeNet-5 reaches 96% test
  accuracy with fedavg, quality (Tian eq. 19) and cgsv, 100 clients, on clean
  IID data and with 30% of the clients holding 50% noisy labels (Tian et al.
  2023, Table 4: FedAvg 20 rounds, theirs 16).
* ``fairness``: Pearson(standalone accuracy, accuracy of the rewarded model)
  for fedfaim and fedave, 10 clients, POW, CLA and DIR partitions, mean and
  standard deviation over seeds (FedAVE reports above 0.84).
* ``robustness``: every strategy against the standard attacks (scaling, sign
  flip, noise, free riding, label flipping, colluding Sybils), 10 clients,
  IID and DIR: accuracy, whether the attackers are caught, and what the
  chain's mechanism would pay them (:mod:`fedchain.experiments.robustness`).

One module per table (:mod:`.rounds`, :mod:`.fairness`, :mod:`.robustness`), what they share in
:mod:`.series`. These are experiments, not tests: they take minutes to hours and print what
they measured. Options shrink them (fewer clients, rounds, seeds or samples).
"""

from __future__ import annotations

import click

from fedchain.experiments.reproduce.fairness import (
    FAIRNESS_DEFAULTS,
    FAIRNESS_TARGET,
    ORACLE,
    FairnessRow,
    FairnessRun,
    fairness_command,
    fairness_runs,
    global_gap,
    oracle_quota_fractions,
    summarise_fairness,
)
from fedchain.experiments.reproduce.robustness import (
    ROBUSTNESS_COLUMNS,
    ROBUSTNESS_DEFAULTS,
    RobustnessRow,
    RobustnessRun,
    robustness_command,
    robustness_runs,
    robustness_table,
    summarise_robustness,
)
from fedchain.experiments.reproduce.rounds import (
    ROUNDS_DEFAULTS,
    SETTINGS,
    TIAN_TARGET_ACCURACY,
    RoundsRow,
    rounds_to_accuracy,
    rounds_to_accuracy_command,
)
from fedchain.experiments.reproduce.series import REPRODUCE_ROOT, default_output_dir


@click.group()
def reproduce() -> None:
    """Reproduce the papers' tables on real MNIST (experiments that print a table, not tests)."""


reproduce.add_command(rounds_to_accuracy_command)
reproduce.add_command(fairness_command)
reproduce.add_command(robustness_command)

__all__ = [
    "FAIRNESS_DEFAULTS",
    "FAIRNESS_TARGET",
    "ORACLE",
    "REPRODUCE_ROOT",
    "ROBUSTNESS_COLUMNS",
    "ROBUSTNESS_DEFAULTS",
    "ROUNDS_DEFAULTS",
    "SETTINGS",
    "TIAN_TARGET_ACCURACY",
    "FairnessRow",
    "FairnessRun",
    "RobustnessRow",
    "RobustnessRun",
    "RoundsRow",
    "default_output_dir",
    "fairness_runs",
    "global_gap",
    "oracle_quota_fractions",
    "reproduce",
    "robustness_runs",
    "robustness_table",
    "rounds_to_accuracy",
    "summarise_fairness",
    "summarise_robustness",
]
