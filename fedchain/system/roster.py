"""Who takes part in a system run: clients and fog nodes with their data, costs and faults, and their keys.

Pure planning, no processes and no chain. :func:`demo_roster` makes the
demo's cast so that the sealed-bid auctions (eq. 18) spread the jobs over the
fog nodes: client sizes grow from half to one and a half times the
per-client sample count, and fog node ``j``'s frequency is the lowest one that
reaches the capped time reputation for its share of the clients
(``f = c * D * cap / T``, eqs. 9 and 11). A faster node earns the client no
more than the cap, and costs more (eq. 12: ``E ~ f^2``), so each job tends to
go to the cheapest node fast enough for it.

Every participant signs with its own key. :func:`participant_account` derives
it from a funding key, a salt (the deployment) and the participant's name, so
a run on an existing chain needs one funded key only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak

from fedchain.errors import ConfigError
from fedchain.publisher.terms import TaskTerms
from fedchain.trainer.config import Engine
from fog.bidding import CostModel

#: What a lazy (free-riding) fog node commits instead of training (as in ``fog.config.LazyMode``).
LazyMode = Literal["zero", "random"]

#: Wei each participant gets for gas on top of its deposits and escrow (a few hundred transactions on a dev chain).
GAS_ALLOWANCE_WEI = 5 * 10**16
#: Challenges a client or fog node can open in a run (a challenge bond each) without running dry.
CHALLENGES_PER_PARTICIPANT = 4


@dataclass(frozen=True)
class ClientPlan:
    """One client: its name, its part of the dataset's split, how many samples it keeps, its label noise.

    Attributes:
        name: process and log name (``client-0``).
        partition_index: its part of the IID split of the training set (one part per client).
        samples: D, the samples it keeps (its job's data size).
        noisy_labels: fraction of its labels replaced by a wrong class (0: clean; 1: garbage).
        flip_labels: every label y replaced by C-1-y (garbage that teaches a wrong mapping).
        watch: how its agent watches its own entries (``ClientConfig.watch``: reexecute, committee or off).
    """

    name: str
    partition_index: int
    samples: int
    noisy_labels: float = 0.0
    flip_labels: bool = False
    watch: str = "reexecute"

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ConfigError(f"{self.name} needs at least one sample, got {self.samples}")
        if not 0.0 <= self.noisy_labels <= 1.0:
            raise ConfigError(f"{self.name}: noisy_labels must be a fraction in [0, 1], got {self.noisy_labels}")

    @property
    def behaviour(self) -> str:
        """One phrase for tables."""
        if self.noisy_labels >= 1.0 or self.flip_labels:
            return "garbage labels"
        return f"{self.noisy_labels:.0%} noisy labels" if self.noisy_labels else "clean"


@dataclass(frozen=True)
class FogPlan:
    """One fog node: its name, cost model and fault.

    Attributes:
        name: process and log name (``fog-0``).
        cost: frequency, energy coefficient and margin it bids with (never below its cost).
        lazy: free rider: commit ``zero`` or ``random`` updates without training (None: honest).
        never_reveal: commit sealed bids but never reveal them (the deposits are forfeited).
        crash_after_round: die by SIGKILL right after committing this round (None: never).
        engine: the trainer engine it trains with (one thread each: many processes share the machine).
    """

    name: str
    cost: CostModel
    lazy: LazyMode | None = None
    never_reveal: bool = False
    crash_after_round: int | None = None
    engine: Engine = "sequential"

    @property
    def behaviour(self) -> str:
        """One phrase for tables."""
        if self.never_reveal:
            return "never reveals"
        if self.lazy is not None:
            return f"free rider ({self.lazy})"
        if self.crash_after_round is not None:
            return f"crashes after round {self.crash_after_round}"
        return "honest"


@dataclass(frozen=True)
class Roster:
    """The clients and fog nodes of one run."""

    clients: tuple[ClientPlan, ...]
    fogs: tuple[FogPlan, ...]

    def __post_init__(self) -> None:
        members: tuple[ClientPlan | FogPlan, ...] = (*self.clients, *self.fogs)
        names = [p.name for p in members]
        if len(set(names)) != len(names):
            raise ConfigError(f"participant names must be unique, got {names}")


@dataclass(frozen=True)
class AuctionScale:
    """The task terms the demo's cost models are fitted to.

    Attributes:
        cycles_per_sample: c of the task, cycles per sample.
        expected_round_s: T = T_ex / N, seconds.
        reputation_cap: the cap on the time ratio T / T_x, a plain number.
        target_price: wei per round a mid-sized job should cost, so that prices stay well below the payments.
    """

    cycles_per_sample: int
    expected_round_s: float
    reputation_cap: float
    target_price: float


def demo_roster(
    clients: int, fogs: int, samples_per_client: int, scale: AuctionScale, *, noisy_rate: float = 0.5
) -> Roster:
    """The demo's cast: ``clients`` clients (every odd one with ``noisy_rate`` noisy labels) and ``fogs``
    fog nodes (fog 0 a free rider committing zero updates, fitted to win the smallest job).

    Client ``i`` keeps ``D_i = samples * (0.5 + i / (clients - 1))`` samples (all ``samples``
    when alone). Fog 0's frequency reaches the time-reputation cap for client 0 only; the other
    clients are shared out in size order, each fog's frequency fitted to the largest of its share.
    Energy coefficients make a mid-sized job cost about ``target_price``; margins grow with the index.
    """
    if clients < 1 or fogs < 1:
        raise ConfigError(f"a run needs at least one client and one fog node, got {clients} and {fogs}")
    if samples_per_client < 2:
        raise ConfigError(f"samples per client must be at least 2, got {samples_per_client}")
    sizes = [
        max(1, round(samples_per_client * (0.5 + i / (clients - 1)))) if clients > 1 else samples_per_client
        for i in range(clients)
    ]
    plans = tuple(ClientPlan(f"client-{i}", i, size, noisy_rate if i % 2 == 1 else 0.0) for i, size in enumerate(sizes))
    largest_served = _shares(sizes, fogs)
    per_hertz = scale.cycles_per_sample * scale.reputation_cap / scale.expected_round_s
    mid = samples_per_client * scale.cycles_per_sample * (per_hertz * samples_per_client) ** 2
    alpha = 2.0 * scale.target_price / mid
    fog_plans = tuple(
        FogPlan(
            name=f"fog-{j}",
            cost=CostModel(
                frequency=math.ceil(per_hertz * largest_served[j]), alpha=alpha, margin=round(0.1 + 0.1 * j, 2)
            ),
            lazy="zero" if j == 0 and fogs > 1 else None,
        )
        for j in range(fogs)
    )
    return Roster(plans, fog_plans)


def _shares(sizes: list[int], fogs: int) -> list[int]:
    """For each fog node, the largest client size it is fitted to: fog 0 the smallest client,
    the others the rest in size order, split as evenly as possible (a fog left over gets the largest)."""
    ordered = sorted(sizes)
    if fogs == 1:
        return [ordered[-1]]
    rest = ordered[1:] or ordered
    helpers = fogs - 1
    largest = [ordered[0]]
    for j in range(helpers):
        end = min(len(rest), math.ceil(len(rest) * (j + 1) / helpers))
        largest.append(rest[max(end, 1) - 1])
    return largest


def required_funds(
    roster: Roster,
    terms: TaskTerms,
    budget: int,
    *,
    publisher: str,
    aggregator: str,
    verifiers: tuple[str, ...] = (),
) -> dict[str, int]:
    """Wei each participant needs: the publisher the budget, the aggregator its bond, a client its deposit, the
    dearest fog's escrow for all rounds and a few challenge bonds, a fog node a deposit per job it may bid for and a
    few challenge bonds; everyone (the verifiers too) a gas allowance."""
    challenges = CHALLENGES_PER_PARTICIPANT * terms.effective_challenge_bond
    funds = {publisher: budget + GAS_ALLOWANCE_WEI, aggregator: terms.bond(budget) + GAS_ALLOWANCE_WEI}
    for client in roster.clients:
        dearest = max(fog.cost.price(client.samples, terms.cycles_per_sample) for fog in roster.fogs)
        funds[client.name] = terms.client_deposit + dearest * terms.rounds + challenges + GAS_ALLOWANCE_WEI
    for fog in roster.fogs:
        funds[fog.name] = terms.fog_deposit * len(roster.clients) + challenges + GAS_ALLOWANCE_WEI
    for name in verifiers:
        funds[name] = GAS_ALLOWANCE_WEI
    return funds


def participant_account(funder_key: bytes, salt: str, name: str) -> LocalAccount:
    """The key of participant ``name``: keccak256(funder key, salt, name); the same inputs give the same key."""
    return Account.from_key(keccak(bytes(funder_key) + salt.encode() + b"/" + name.encode()))
