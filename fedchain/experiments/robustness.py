"""What an attack did to a run: whether the attackers were caught, and what the chain would pay them.

``fedchain reproduce robustness`` (DESIGN.md, Robustness) runs every strategy
against the standard attacks (:data:`ATTACKS`) and reads two things off each
finished :class:`~fedchain.experiments.results.ExperimentResult`:

* detection (:func:`detection`): an attacker is caught in a round when its
  update was rejected (screening, the strategy's own checks) or its quality
  fell below q_min, the threshold under which the chain decays its
  reputation; precision and recall are taken over (client, round) pairs;
* the chain's verdict (:func:`chain_pay`): every client's per-round qualities
  fed through the chain's own mechanism (:func:`fedchain.fl.reputation.score_round`,
  the fixed-point rendering the contracts and the auditor share) with a
  task's default terms, which says who would be removed and how much each
  client would be paid.

Pure functions of a result: nothing here trains, reads files or logs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedchain.errors import ConfigError
from fedchain.experiments.config import FaultConfig
from fedchain.experiments.federation import NO_FAULT
from fedchain.experiments.results import ExperimentResult, RoundRecord
from fedchain.fl.quality import to_wad
from fedchain.fl.reputation import ClientReputation, MechanismParams, score_round
from fedchain.units import WAD


@dataclass(frozen=True)
class Attack:
    """One standard attack: the :class:`FaultConfig` fraction its attackers take, and the fault's settings."""

    #: The fraction field of :class:`FaultConfig` the attackers are counted in; None: no attackers.
    fraction_field: str | None
    #: Other :class:`FaultConfig` fields the attack sets (a scale, a free rider's mode).
    settings: Mapping[str, Any] = field(default_factory=dict)

    def faults(self, fraction: float, riding: FreeRiding | None = None) -> FaultConfig:
        """The faults of a run in which ``fraction`` of the clients mount this attack (a free-rider attack as
        ``riding`` sets it, when given)."""
        if self.fraction_field is None:
            return FaultConfig()
        return FaultConfig(**{self.fraction_field: fraction, **self.settings, **self.riding_settings(riding)})

    @property
    def free_rides(self) -> bool:
        """Whether the attackers are free riders, which :class:`FreeRiding` sets."""
        return self.fraction_field == "free_riders"

    @property
    def disguised(self) -> bool:
        """Whether the attackers are disguised free riders, which have a noise level."""
        return self.settings.get("free_rider_mode") == "disguised"

    def riding_settings(self, riding: FreeRiding | None) -> dict[str, Any]:
        """The :class:`FaultConfig` fields ``riding`` changes in this attack: none for an attack that does not
        free-ride, or where ``riding`` leaves the attack's own setting."""
        if riding is None or not self.free_rides:
            return {}
        own = FaultConfig(**self.settings)
        changed: dict[str, Any] = {}
        if riding.free_ride_from not in (None, own.free_ride_from):
            changed["free_ride_from"] = riding.free_ride_from
        if self.disguised and riding.disguise_noise not in (None, own.disguise_noise):
            changed["disguise_noise"] = riding.disguise_noise
        return changed


@dataclass(frozen=True)
class FreeRiding:
    """How a series' free riders free-ride, where it differs from each attack's own setting (None: the attack's).

    The standard disguised free rider (Fraboni et al.) sends noise of half the last global step's RMS from round
    2; a robustness series can mount it at other noise levels and from later rounds, the settings a screen must
    also meet without having been tuned on them.
    """

    #: A disguised free rider's noise, in RMS of the step it resends (None: 0.5).
    disguise_noise: float | None = None
    #: The first round every free rider (zero, random, disguised) free-rides; it trains honestly before
    #: (None: round 1, and round 2 for the disguised one, which resends a step).
    free_ride_from: int | None = None

    def __post_init__(self) -> None:
        if self.disguise_noise is not None and not (self.disguise_noise >= 0 and math.isfinite(self.disguise_noise)):
            raise ConfigError(
                f"a disguised free rider's noise of {self.disguise_noise} is not a finite number >= 0",
                hint="give the noise in RMS of the step it resends, e.g. 0.5",
            )
        if self.free_ride_from is not None and self.free_ride_from < 1:
            raise ConfigError(
                f"free riding from round {self.free_ride_from}: rounds count from 1", hint="use 1 or later"
            )


#: The run every attack is compared with: no attackers at all.
NO_ATTACK = "none"

#: The standard attacks by name, in the order the table lists them.
ATTACKS: dict[str, Attack] = {
    NO_ATTACK: Attack(None),
    "scale-x10": Attack("scaled_clients", {"scale": 10.0}),
    "scale-x1000": Attack("scaled_clients", {"scale": 1000.0}),
    "sign-flip": Attack("sign_flipped_clients"),
    "noise": Attack("noise_clients"),
    "free-ride-zero": Attack("free_riders", {"free_rider_mode": "zero"}),
    "free-ride-random": Attack("free_riders", {"free_rider_mode": "random"}),
    # Fraboni et al. (2021): honest in round 1, then the last global step plus noise of half its RMS.
    "free-ride-disguised": Attack("free_riders", {"free_rider_mode": "disguised", "free_ride_from": 2}),
    "label-flip": Attack("flipped_clients"),
    "sybil": Attack("sybil_clients"),
}


def attack_faults(attack: str, fraction: float, riding: FreeRiding | None = None) -> FaultConfig:
    """The faults of attack ``attack`` mounted by ``fraction`` of the clients, its free riders as ``riding``
    sets them (None: the attack's own settings)."""
    return _attack(attack).faults(fraction, riding)


def attack_setting(attack: str, fraction: float, riding: FreeRiding | None = None) -> str:
    """The name of one attack setting of a series, which its run folders carry: ``none``, ``sign-flip-0.2``;
    a free-rider attack that ``riding`` changes names the change (``free-ride-disguised-noise1-from4-0.2``), so
    that runs of other settings never share a folder."""
    changed = _attack(attack).riding_settings(riding)
    if attack == NO_ATTACK:
        return NO_ATTACK
    parts = [attack]
    if "disguise_noise" in changed:
        parts.append(f"noise{changed['disguise_noise']:g}")
    if "free_ride_from" in changed:
        parts.append(f"from{changed['free_ride_from']}")
    return "-".join([*parts, f"{fraction:g}"])


def _attack(attack: str) -> Attack:
    if attack not in ATTACKS:
        raise ConfigError(f"unknown attack {attack!r}", hint=f"use one of {', '.join(ATTACKS)}")
    return ATTACKS[attack]


def attackers(result: ExperimentResult) -> tuple[int, ...]:
    """The indices of the clients that had a fault injected."""
    return tuple(c.index for c in result.clients if c.fault != NO_FAULT)


def attack_start(result: ExperimentResult) -> int:
    """The first round the run's attackers attack: a free rider's ``free_ride_from`` (it trains honestly
    before), else round 1."""
    faults = result.config.faults
    return faults.free_ride_from if faults.free_riders > 0 else 1


def flagged(record: RoundRecord, min_quality: float) -> tuple[bool, ...]:
    """Which clients the round caught: rejected, or scored below ``min_quality`` (q_min)."""
    return tuple(not ok or q < min_quality for ok, q in zip(record.accepted, record.quality, strict=True))


@dataclass(frozen=True)
class Detection:
    """How well a run caught its attackers, over (client, round) pairs; NaN where a figure does not apply."""

    #: Of the client-rounds caught, the share that were an attacker's (NaN: no attackers, or none caught).
    precision: float
    #: Of the attackers' client-rounds, the share that were caught (NaN: no attackers).
    recall: float
    #: Of the honest clients' client-rounds, the share that were caught: what the defence costs them.
    honest_flagged: float
    #: The round by which every attacker had been caught at least once (None: one never was, or no attackers).
    caught_round: int | None


def detection(result: ExperimentResult, min_quality: float) -> Detection:
    """Precision, recall and the round of the last first catch of ``result``'s attackers (q_min ``min_quality``)."""
    bad = set(attackers(result))
    first_caught: dict[int, int] = {}
    caught_attacker = caught_honest = 0
    for record in result.rounds:
        for client, caught in enumerate(flagged(record, min_quality)):
            if not caught:
                continue
            if client in bad:
                caught_attacker += 1
                first_caught.setdefault(client, record.round)
            else:
                caught_honest += 1
    rounds = len(result.rounds)
    honest = len(result.clients) - len(bad)
    return Detection(
        precision=_share(caught_attacker, caught_attacker + caught_honest) if bad else math.nan,
        recall=_share(caught_attacker, len(bad) * rounds),
        honest_flagged=_share(caught_honest, honest * rounds),
        caught_round=max(first_caught.values()) if bad and len(first_caught) == len(bad) else None,
    )


def _share(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def mechanism_params(rounds: int) -> MechanismParams:
    """The chain mechanism of a task with the default terms (:class:`fedchain.publisher.TaskTerms`) of ``rounds`` rounds.

    The terms are the ones `fedchain task create` and the demo start from
    (q_min 0.5, r_a_min = r_t_min 0.1, psi 1e15 wei, cap 10), so the pay and
    removals measured here are the ones a default task would produce.
    """
    from fedchain.publisher.terms import TaskTerms  # loads the chain bindings: only when pay is measured

    terms = TaskTerms(rounds=rounds)
    return MechanismParams.of(terms.to_params(model_id=bytes(32), dataset_id=bytes(32)))


def neutral_round_time(params: MechanismParams) -> int:
    """The round time, in whole seconds, given to every client: the expected T = T_ex / N, at most t_max.

    A simulated client has no fog node and no clock of its own, and none of
    the attacks is about time: every client gets the same time, so its time
    reputation is the same and pay differs only by quality.
    """
    return max(1, min(params.expected_duration // params.rounds, params.max_round_time))


@dataclass(frozen=True)
class ChainPay:
    """What the chain's mechanism makes of a run's qualities, per client."""

    #: The eq. 15 payment of every round (rounds in order) to every client, wei, before any pro-rata scaling
    #: to a budget.
    by_round: tuple[tuple[int, ...], ...]
    #: The round in which the client fell below r_a_min or r_t_min and was removed (None: it stayed).
    removed_round: tuple[int | None, ...]

    @property
    def paid(self) -> tuple[int, ...]:
        """Every client's pay over the whole run, wei."""
        return self.paid_from(1)

    def paid_from(self, first_round: int) -> tuple[int, ...]:
        """Every client's pay in rounds ``first_round`` and later, wei."""
        rounds = self.by_round[first_round - 1 :]
        return tuple(sum(paid[i] for paid in rounds) for i in range(len(self.removed_round)))

    def mean_pay(self, clients: Sequence[int], first_round: int = 1) -> float:
        """The mean pay of ``clients`` in rounds ``first_round`` and later, wei (NaN for none)."""
        paid = self.paid_from(first_round)
        return sum(paid[i] for i in clients) / len(clients) if clients else math.nan

    def removed(self, clients: Sequence[int]) -> int:
        """How many of ``clients`` were removed."""
        return len(self.removed_of(clients))

    def removed_of(self, clients: Sequence[int]) -> frozenset[int]:
        """Which of ``clients`` were removed."""
        return frozenset(i for i in clients if self.removed_round[i] is not None)


def chain_pay(result: ExperimentResult, params: MechanismParams) -> ChainPay:
    """Feed every round's qualities through :func:`~fedchain.fl.reputation.score_round`, as the RoundLedger would.

    Every client joins with the initial reputation and no cross-task prior,
    takes :func:`neutral_round_time` each round, and stops being scored and
    paid once removed, as on chain. The final bonus (eq. 16) depends on when
    the task ends, not on the attack, and is left out.
    """
    n = len(result.clients)
    round_time = neutral_round_time(params)
    states = [ClientReputation.joined(params)] * n
    by_round: list[tuple[int, ...]] = []
    removed: list[int | None] = [None] * n
    for record in result.rounds:
        qualities = to_wad(record.quality)
        paid = [0] * n
        for i in range(n):
            if removed[i] is not None:
                continue
            score = score_round(states[i], params, qualities[i], round_time, record.accepted[i])
            states[i], paid[i] = score.reputation, score.payment
            if score.removed:
                removed[i] = record.round
        by_round.append(tuple(paid))
    return ChainPay(tuple(by_round), tuple(removed))


def min_quality(params: MechanismParams) -> float:
    """q_min of ``params`` as a fraction."""
    return params.min_quality / WAD


__all__ = [
    "ATTACKS",
    "NO_ATTACK",
    "Attack",
    "ChainPay",
    "Detection",
    "FreeRiding",
    "attack_faults",
    "attack_setting",
    "attack_start",
    "attackers",
    "chain_pay",
    "detection",
    "flagged",
    "mechanism_params",
    "min_quality",
    "neutral_round_time",
]
