"""The fog node's configuration: a frozen dataclass, from a YAML file and flags (flags win)."""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fedchain.config import checked_address, load_config, load_yaml
from fedchain.errors import ConfigError, DataError
from fedchain.trainer.config import ENGINES, Engine
from fedchain.units import parse_wei
from fog.bidding import CostModel

#: What a lazy (free-riding) fog node commits instead of training: an all-zero update, noise, or the last global
#: step plus noise (the disguised free rider of Fraboni et al., :func:`fedchain.data.faults.disguised_free_ride`).
LazyMode = Literal["zero", "random", "disguised"]
LAZY_MODES: tuple[str, ...] = typing.get_args(LazyMode)
#: What an attacking fog node does to the updates it trained (:data:`fedchain.data.faults.UPDATE_ATTACKS`).
AttackMode = Literal["sign-flip", "noise", "scale", "sybil"]
ATTACK_MODES: tuple[str, ...] = typing.get_args(AttackMode)


@dataclass(frozen=True)
class FogConfig:
    """How one fog node bids, trains and keeps its state.

    Attributes:
        name: the agent's name in logs and in its state file.
        state_path: where its state (last block, bids with salts, awards, rounds committed) is saved.
        tasks: only these task ids (empty: every task).
        cost: its cost model (frequency, alpha, cycles per sample, margin).
        max_jobs: the most jobs it bids for or trains at once (tasks not yet ended).
        max_deposit: the largest fog deposit r, wei, it puts down for one bid (a unit may be given: 0.05ether).
        never_reveal: commit bids but never reveal them (a fault for experiments: the deposit is forfeited).
        stop_after_round: commit rounds up to this one, then stop (a fault: the node leaves mid-task).
        crash_after_round: commit rounds up to this one, then die by SIGKILL at once, its state unsaved (a fault:
            the node crashes mid-task, at a point tests can count on).
        lazy: commit an update without training, a free rider: ``zero`` (all zeros), ``random`` (Gaussian noise),
            or ``disguised`` (the last global step, the round's global model minus the one before, plus Gaussian
            noise of ``disguise_noise`` times its RMS; all zeros in round 1, before any step).
        lazy_std: standard deviation of the ``random`` lazy update.
        disguise_noise: the ``disguised`` lazy update's noise, as a multiple of the last step's RMS.
        attack: train, then attack the updates before committing them (a fault for robustness tests):
            ``sign-flip``, ``noise`` of each update's own norm, ``scale`` by ``attack_scale``, or
            ``sybil``: every job it won in a round gets one update, ``-attack_scale`` times their mean
            (its clients act as colluding Sybils). See :func:`fedchain.data.faults.attack_updates`.
        attack_scale: the factor of the ``scale`` and ``sybil`` attacks.
        engine: the trainer's engine (``auto``: clients stacked into one model on CUDA, worker processes on a multi-core CPU).
        device: where to train (None: CUDA when present, else the CPU).
        threads: torch threads of the in-process engines while training (None: torch's default, every core).
            Any engine, thread count and device is safe: a fog challenge re-executes one segment of the
            node's transcript from its own checkpoint, where honest drift stays far below the tolerance.
        poll_interval_s: seconds between polls of the chain when nothing happens.
        confirmations: blocks on top of a block before its events are acted on (0 on a local chain).
        seed: seed of the lazy mode's and the noise attack's noise.
        watch_entries: after every posted round, re-score the entries of the updates it committed (the auditor's
            code) and challenge the aggregator when one is off beyond tolerance (:mod:`fedchain.disputes.watch`).
        data_root: folder holding the tasks' validation datasets, which watching entries re-scores on (None:
            ``$FEDCHAIN_DATA_ROOT``); checked at start when it watches.
        token_rates: the ERC-20 tokens it bids in, by address: how many of the token's smallest units one ether
            of its cost is worth (3000 USDC per ether: ``3000000000``, USDC having 6 decimals). Its cost model
            and ``max_deposit`` are in wei; a token task's prices and deposit limit are converted at this rate.
            Tasks in a token it has no rate for get no bid.
    """

    name: str = "fog"
    state_path: Path = Path(".fedchain/fog.json")
    tasks: tuple[int, ...] = ()
    cost: CostModel = field(default_factory=CostModel)
    max_jobs: int = 8
    max_deposit: int = 10**18
    never_reveal: bool = False
    stop_after_round: int | None = None
    crash_after_round: int | None = None
    lazy: LazyMode | None = None
    lazy_std: float = 0.01
    disguise_noise: float = 0.5
    attack: AttackMode | None = None
    attack_scale: float = 10.0
    engine: Engine = "auto"
    device: str | None = None
    threads: int | None = None
    poll_interval_s: float = 0.5
    confirmations: int = 0
    seed: int = 0
    watch_entries: bool = True
    data_root: Path | None = None
    token_rates: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rates = {}
        for token, rate in dict(self.token_rates).items():
            if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
                raise ConfigError(
                    f"token_rates[{token}] must be a whole number of token units per ether >= 1, got {rate!r}",
                    hint="e.g. 3000000000 for 3000 USDC (6 decimals) per ether",
                )
            rates[checked_address("token in token_rates", token)] = rate
        object.__setattr__(self, "token_rates", rates)
        if self.max_jobs < 1:
            raise ConfigError(f"max_jobs must be at least 1, got {self.max_jobs}")
        if self.max_deposit < 0:
            raise ConfigError(f"max_deposit must be >= 0 wei, got {self.max_deposit}")
        if self.stop_after_round is not None and self.stop_after_round < 0:
            raise ConfigError(f"stop_after_round must be >= 0, got {self.stop_after_round}")
        if self.crash_after_round is not None and self.crash_after_round < 1:
            raise ConfigError(f"crash_after_round must be >= 1, got {self.crash_after_round}")
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}", hint=f"use one of: {', '.join(ENGINES)}")
        if self.lazy_std < 0:
            raise ConfigError(f"lazy_std must be >= 0, got {self.lazy_std}")
        if self.lazy is not None and self.lazy not in LAZY_MODES:
            raise ConfigError(f"unknown lazy mode {self.lazy!r}", hint=f"use one of: {', '.join(LAZY_MODES)}")
        if not (self.disguise_noise >= 0 and math.isfinite(self.disguise_noise)):
            raise ConfigError(f"disguise_noise must be a finite number >= 0, got {self.disguise_noise}")
        if self.attack is not None and self.attack not in ATTACK_MODES:
            raise ConfigError(f"unknown attack {self.attack!r}", hint=f"use one of: {', '.join(ATTACK_MODES)}")
        if self.attack is not None and self.lazy is not None:
            raise ConfigError(
                "a fog node is either lazy (commits without training) or an attacker (trains, then attacks), not both",
                hint="drop --lazy or --attack",
            )
        if not (self.attack_scale > 0 and math.isfinite(self.attack_scale)):
            raise ConfigError(f"attack_scale must be a positive finite number, got {self.attack_scale}")
        from fedchain.trainer.device import resolve_device  # torch: loaded to run, not for --help

        resolve_device(self.device)  # a device this machine lacks is refused before the node bids for anything
        if self.watch_entries:
            from fedchain.data.datasets import resolve_data_root

            try:
                resolve_data_root(self.data_root)
            except DataError as err:
                raise ConfigError(
                    f"watching entries needs the validation data: {err.args[0]}",
                    hint=f"{err.hint}; or --no-watch-entries",
                ) from None

    def rate_of(self, token: str) -> int | None:
        """Units of ``token`` one ether of cost is worth, or None: the node does not bid in that token."""
        return self.token_rates.get(checked_address("token", token))

    def watches(self, task_id: int) -> bool:
        """Whether this fog node takes part in ``task_id``'s auctions."""
        return not self.tasks or task_id in self.tasks


def load_fog_config(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> FogConfig:
    """A :class:`FogConfig` from an optional YAML file, then the non-None ``overrides`` (flags).

    ``max_deposit`` may be written with a unit (``0.05ether``, as ``task create`` takes amounts) or in wei."""
    data: dict[str, Any] = load_yaml(path) if path is not None else {}
    data.update({key: value for key, value in (overrides or {}).items() if value is not None})
    if data.get("max_deposit") is not None:
        data["max_deposit"] = parse_wei(data["max_deposit"])
    return load_config(FogConfig, None, data)
