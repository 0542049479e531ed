"""A task's on-chain terms in human units, and their conversion to the contract's ``TaskParams``.

:class:`TaskTerms` holds every parameter of DESIGN.md's step 1 in the units a
person writes: seconds, wei (amounts also accept ``"0.5ether"`` or ``"2gwei"``),
and fractions as floats (``0.1`` for ``r_a_min``), which
:meth:`TaskTerms.to_params` turns into the contract's 1e18 fixed point exactly.
:class:`PublishConfig` adds the task spec (:class:`~fedchain.taskspec.TaskSpec`),
the budget and the aggregator; it loads from a YAML file with flag overrides::

    rounds: 5
    budget: 1ether
    aggregator: "0x..."
    spec: {dataset: mnist, model: cnn, strategy: fedavg}

Two checks keep a task the contracts would accept from failing later.
:class:`TaskTerms` and :class:`PublishConfig` refuse a value the contracts
cannot hold (a uint96 deposit, a budget of 2^96 wei or more, which
``RoundLedger.postRound`` could not pay out), and :func:`check_windows` names
every window too short for the task's agents to act in on a chain with a block
clock: the smallest workable window of each is a named number of blocks
(:data:`BIDDING_BLOCKS` and the others) beyond the agents' confirmation depth.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from fedchain.chain.abi import field_names
from fedchain.chain.bindings import TaskParams, TaskRegistry
from fedchain.chain.blocktime import BlockInterval
from fedchain.config import checked_address, from_mapping, load_yaml
from fedchain.errors import ConfigError, TermOutOfRange, WindowsTooShort
from fedchain.fl.floor import DEFAULT_MIN_LOSS_REPUTATION, DEFAULT_MIN_QUALITY
from fedchain.fl.reputation import max_round_payment, minimum_challenge_bond
from fedchain.taskspec import TaskSpec
from fedchain.units import WAD, Asset, ether, parse_wei, to_units

#: Fields of :class:`TaskTerms` and :class:`PublishConfig` that are amounts of wei.
AMOUNT_FIELDS = frozenset(
    {"psi", "phi", "client_deposit", "fog_deposit", "budget", "challenge_bond", "aggregator_bond"}
)
#: Fields of :class:`TaskTerms` written as fractions and sent in 1e18 fixed point.
FRACTION_FIELDS = frozenset(
    {"target_accuracy", "min_loss_reputation", "min_time_reputation", "min_quality", "reputation_cap"}
)

#: The most clients a task may admit (TaskRegistry.MAX_CLIENTS).
MAX_CLIENTS = 500
#: The most rounds (ReputationMath.MAX_ROUNDS; also ``fedchain.fl.reputation.MAX_ROUNDS``).
MAX_ROUNDS = 1000
#: The largest reputation cap, 1e18 fixed point (ReputationMath.MAX_REPUTATION_CAP; see MAX_ROUNDS).
MAX_REPUTATION_CAP = 10 * WAD
#: The largest budget the contracts can pay out: a client's earnings are a uint96 in RoundLedger, and
#: ``postRound`` reverts with SafeCastOverflowedUintDowncast once they could pass it, which a budget
#: of 2^96 wei (about 7.9e10 ether) or more allows.
MAX_BUDGET = 2**96 - 1
#: The largest aggregator bond (a uint96 in TaskParams).
MAX_BOND = 2**96 - 1
#: The most one client may be paid in one round (psi x cap^3): a bid's utility to its client is kept in 96 bits
#: (FogAuction), so TaskRegistry refuses a larger psi.
MAX_ROUND_PAYMENT = 2**96 - 1
#: Limits tighter than their field's type that TaskRegistry enforces (TaskInvalidParameter), in the contract's units.
CONTRACT_LIMITS: dict[str, int] = {
    "rounds": MAX_ROUNDS,
    "reputation_cap": MAX_REPUTATION_CAP,
    "max_clients": MAX_CLIENTS,
}

#: Blocks a bidding window must span beyond the agents' confirmation depth: after the block that opens the
#: auction has that many blocks on top, a fog node sees it; one block to send its bid (its polling, the RPC),
#: one in which the bid is mined, and one spare for a full block or a fee that had to be raised.
BIDDING_BLOCKS = 3
#: Blocks a reveal window must span beyond the confirmation depth: the first block past the bidding deadline
#: (no reveal is valid before it), the block the reveal is mined in, and a spare one; the depth lets a fog
#: node see its reveal confirmed, or see it reorganised away and send it again, before the deadline.
REVEAL_BLOCKS = 3
#: Blocks a round must span, beyond the confirmation depth and the expected training time
#: T = expected_duration / rounds: the block a fog node's commit is mined in, and a spare one. The depth is
#: the wait before a fog node sees the round start (and the previous round's model) as final.
ROUND_BLOCKS = 2
#: Blocks of time tolerance: the aggregator reads each commit's block time while the commit may still be
#: reorganised into the next block; a tolerance of one interval keeps its post valid then.
TOLERANCE_BLOCKS = 1
#: Blocks a challenge window must span beyond the confirmation depth: the block of the post, the block a
#: challenge is mined in and a spare one; CHALLENGE_WORK_S more for the client to re-score its entry.
CHALLENGE_BLOCKS = 3
#: Seconds a client's agent is given to re-score its entry (or re-execute its job) before it challenges.
CHALLENGE_WORK_S = 10


def to_wad(fraction: float, name: str) -> int:
    """A non-negative float as exact 1e18 fixed point (from its shortest decimal form)."""
    if not fraction >= 0 or fraction == float("inf"):
        raise ConfigError(f"{name} must be a finite, non-negative number, got {fraction}")
    return int((Decimal(repr(float(fraction))) * WAD).to_integral_value(rounding=ROUND_HALF_EVEN))


@dataclass(frozen=True)
class TaskTerms:
    """Every on-chain parameter of a task (DESIGN.md step 1; ``ITaskRegistry.TaskParams``), in human units.

    Attributes:
        rounds: N, number of rounds.
        target_accuracy: validation accuracy (fraction) at which the task may finish early; 0: never early.
        expected_duration: T_ex, expected total training time, seconds (T = T_ex / N per round).
        psi: per-round payment coefficient of eq. 15, wei per unit of r_t^2 * r_a.
        phi: final-bonus coefficient of eq. 16, wei per second per unit of r_at.
        min_loss_reputation: r_a_min; a client below it is removed and forfeits its deposit.
        min_time_reputation: r_t_min; likewise.
        min_quality: q_min; a round quality below it multiplies r_a by the quality.
        max_round_time: t_max, seconds; a longer round multiplies r_t by t_max / t.
        reputation_cap: cap on every quality, time ratio and reputation (bounds payments).
        client_deposit: d, wei a client deposits to join.
        fog_deposit: r, wei a fog node deposits with each bid.
        cycles_per_sample: c, CPU cycles per training sample (T_x = c * D / f_x, eq. 11).
        round_duration: seconds from a round's start to its deadline for fog commits.
        bidding_duration: seconds an auction takes sealed bids.
        reveal_duration: seconds after bidding for reveals.
        time_tolerance: seconds a posted round time may differ from the commit's block time.
        max_clients: most clients that may join.
        second_price: pay auction winners the second price (Vickrey) instead of their bid.
        self_trained: each client trains its own job (a Flower federation, ``fedchain.flower``): no fog auction,
            so the auction terms (fog_deposit, bidding_duration, reveal_duration, second_price) are not sent.
        challenge_window: seconds after a round's post during which anyone may challenge an entry of it (and a
            client its fog node's update); the round's money moves only after it. About an hour on a testnet, a
            day for real money (ACCOUNTABILITY-NOTES), tens of seconds for a demo.
        challenge_bond: wei a challenger escrows with each challenge, at least half the client deposit (rounded
            up: every challenge costs real money, so a flood of them does); None: that least bond.
        aggregator_bond: wei the aggregator's bond must be; None: the least the contract accepts, what one
            round's post can move (every deposit plus one round's most pay, at most the budget).
    """

    rounds: int = 5
    target_accuracy: float = 0.0
    expected_duration: int = 600
    psi: int = 10**15
    phi: int = 10**12
    min_loss_reputation: float = DEFAULT_MIN_LOSS_REPUTATION
    min_time_reputation: float = 0.1
    min_quality: float = DEFAULT_MIN_QUALITY
    max_round_time: int = 120
    reputation_cap: float = 10.0
    client_deposit: int = 10**16
    fog_deposit: int = 2 * 10**16
    cycles_per_sample: int = 1000
    round_duration: int = 120
    bidding_duration: int = 30
    reveal_duration: int = 30
    time_tolerance: int = 5
    max_clients: int = 50
    second_price: bool = False
    challenge_window: int = 3600
    challenge_bond: int | None = None
    aggregator_bond: int | None = None
    self_trained: bool = False

    def __post_init__(self) -> None:
        positive = (
            "rounds",
            "expected_duration",
            "max_round_time",
            "cycles_per_sample",
            "round_duration",
            "bidding_duration",
            "reveal_duration",
            "max_clients",
            "challenge_window",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.target_accuracy <= 1:
            raise ConfigError(f"target_accuracy must be a fraction in [0, 1], got {self.target_accuracy}")
        if not self.reputation_cap > 0:
            raise ConfigError(f"reputation_cap must be positive, got {self.reputation_cap}")
        if self.time_tolerance < 0:
            raise ConfigError(f"time_tolerance must be >= 0, got {self.time_tolerance}")
        if self.self_trained and self.second_price:
            raise ConfigError(
                "second_price is an auction term, and a self-trained task has no auction",
                hint="drop second_price, or self_trained if fog nodes should bid for the clients' jobs",
            )
        floor = minimum_challenge_bond(self.client_deposit)
        if self.challenge_bond is not None and self.challenge_bond < floor:
            raise ConfigError(
                f"challenge_bond must be at least half the client deposit, {floor} wei, got {self.challenge_bond}",
                hint="a cheap challenge would let anyone hold a round's money for next to nothing; leave "
                "challenge_bond out to ask for that least bond",
            )
        unfit = [_unfit(name, value, limit) for name, value, limit in _contract_values(self) if not 0 <= value <= limit]
        if unfit:
            raise TermOutOfRange(
                "the contracts cannot hold these terms:\n" + "\n".join(f"  - {line}" for line in unfit)
            )
        cap = to_wad(self.reputation_cap, "reputation_cap")
        if max_round_payment(self.psi, min(cap, MAX_REPUTATION_CAP)) > MAX_ROUND_PAYMENT:
            raise TermOutOfRange(
                f"psi {self.psi} wei pays more than 2^96 - 1 wei in one round at the reputation cap",
                hint="lower psi or reputation_cap: a bid's utility to its client must fit 96 bits (FogAuction)",
            )

    def in_units(self, units_per_ether: int) -> TaskTerms:
        """These terms with every amount (psi, phi, deposits, bonds) moved from wei to another asset's units,
        ``units_per_ether`` of them for one ether (rounded down): the same task in a token."""
        amounts: dict[str, Any] = {
            name: to_units(value, units_per_ether)
            for name in AMOUNT_FIELDS & {f.name for f in dataclasses.fields(self)}
            if (value := getattr(self, name)) is not None
        }
        return dataclasses.replace(self, **amounts)

    @property
    def effective_challenge_bond(self) -> int:
        """The challenge bond: as set, or the least the contract accepts, half the client deposit rounded up."""
        return self.challenge_bond if self.challenge_bond is not None else minimum_challenge_bond(self.client_deposit)

    def minimum_bond(self, budget: int) -> int:
        """The least aggregator bond the contract accepts for these terms and ``budget`` (TaskRegistry.minimumBond)."""
        from fedchain.fl.reputation import minimum_aggregator_bond

        cap = to_wad(self.reputation_cap, "reputation_cap")
        return minimum_aggregator_bond(self.max_clients, self.client_deposit, self.psi, cap, budget)

    def bond(self, budget: int) -> int:
        """The aggregator bond the task asks for: as set, or :meth:`minimum_bond`."""
        return self.aggregator_bond if self.aggregator_bond is not None else self.minimum_bond(budget)

    def to_params(self, *, model_id: bytes, dataset_id: bytes, budget: int = 0) -> TaskParams:
        """The contract's ``TaskParams`` (fractions in 1e18 fixed point) for a spec and initial model; ``budget``
        sizes the default aggregator bond."""
        return TaskParams(
            model_id=model_id,
            dataset_id=dataset_id,
            rounds=self.rounds,
            target_accuracy=to_wad(self.target_accuracy, "target_accuracy"),
            expected_duration=self.expected_duration,
            psi=self.psi,
            phi=self.phi,
            min_loss_reputation=to_wad(self.min_loss_reputation, "min_loss_reputation"),
            min_time_reputation=to_wad(self.min_time_reputation, "min_time_reputation"),
            min_quality=to_wad(self.min_quality, "min_quality"),
            max_round_time=self.max_round_time,
            reputation_cap=to_wad(self.reputation_cap, "reputation_cap"),
            client_deposit=self.client_deposit,
            fog_deposit=0 if self.self_trained else self.fog_deposit,
            cycles_per_sample=self.cycles_per_sample,
            round_duration=self.round_duration,
            bidding_duration=0 if self.self_trained else self.bidding_duration,
            reveal_duration=0 if self.self_trained else self.reveal_duration,
            time_tolerance=self.time_tolerance,
            max_clients=self.max_clients,
            second_price=self.second_price,
            challenge_window=self.challenge_window,
            challenge_bond=self.effective_challenge_bond,
            aggregator_bond=self.bond(budget),
            self_trained=self.self_trained,
        )


@dataclass(frozen=True)
class PublishConfig:
    """What `fedchain task create` needs: the terms, the off-chain spec, the budget and the aggregator.

    Attributes:
        terms: the on-chain parameters.
        spec: the task spec every agent reads from the store.
        budget: wei escrowed as the reward budget.
        aggregator: the account that will post rounds (checksum address); None: the publisher itself.
        confirmations: the depth at which the task's agents (fog nodes, clients, aggregator) act on
            events; ``task create`` checks the windows against it (0 suits a local chain).
        fund_bond: the publisher posts the aggregator's bond itself, on the aggregator's behalf (it gets it
            back at settlement unless a challenge against the aggregator is upheld). Otherwise the aggregator
            posts it (``fedchain aggregator run`` does when it starts); a publisher that is its own aggregator
            always posts it at creation.
        expected_clients: how many clients the publisher expects to join; ``task create`` checks that the budget
            covers their pay (:func:`budget_estimate`). None: ``max_clients``.
        token: the ERC-20 token the task's money is in (checksum address); None: ether. The budget and every
            money term (psi, phi, deposits, bonds) are then in the token's smallest unit.
    """

    terms: TaskTerms = field(default_factory=TaskTerms)
    spec: TaskSpec = field(default_factory=TaskSpec)
    budget: int = 10**18
    aggregator: str | None = None
    confirmations: int = 0
    fund_bond: bool = False
    expected_clients: int | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None:
            object.__setattr__(self, "token", checked_address("token", self.token))
        if self.budget < 1:
            raise ConfigError("the budget must be at least 1 wei", hint="pass --budget, e.g. --budget 1ether")
        if self.budget > MAX_BUDGET:
            raise TermOutOfRange(f"the contracts cannot hold {_unfit('budget', self.budget, MAX_BUDGET)}")
        if isinstance(self.confirmations, bool) or not isinstance(self.confirmations, int) or self.confirmations < 0:
            raise ConfigError(f"confirmations must be a whole number of blocks >= 0, got {self.confirmations!r}")
        if self.expected_clients is not None and not 1 <= self.expected_clients <= self.terms.max_clients:
            raise ConfigError(
                f"expected_clients must be from 1 to max_clients ({self.terms.max_clients}), got {self.expected_clients}"
            )
        if self.aggregator is not None:
            object.__setattr__(self, "aggregator", checked_address("aggregator", self.aggregator))
        bond, floor = self.terms.bond(self.budget), self.terms.minimum_bond(self.budget)
        if bond < floor:
            raise TermOutOfRange(
                f"aggregator_bond {bond} wei is less than what one round's post can move: {floor} wei "
                f"(max_clients x client_deposit + min(budget, max_clients x psi x cap^3))",
                hint="raise --aggregator-bond (terms.aggregator_bond), or leave it out to ask for that least bond",
            )
        if bond > MAX_BOND:
            raise TermOutOfRange(f"the contracts cannot hold {_unfit('aggregator_bond', bond, MAX_BOND)}")

    def params(self, *, model_id: bytes, dataset_id: bytes) -> TaskParams:
        """The contract's ``TaskParams`` for this budget (which sizes the default aggregator bond)."""
        return self.terms.to_params(model_id=model_id, dataset_id=dataset_id, budget=self.budget)


def _param_limits() -> dict[str, int]:
    """The largest value of every unsigned field of the contract's TaskParams: its ABI type's, or a tighter contract limit."""
    (create,) = (entry for entry in TaskRegistry.ABI if entry.get("name") == "createTask")
    components = create["inputs"][0]["components"]
    limits = {
        name: 2 ** int(component["type"].removeprefix("uint")) - 1
        for name, component in zip(field_names(components), components, strict=True)
        if component["type"].startswith("uint")
    }
    return {**limits, **CONTRACT_LIMITS}


#: The largest value the contract accepts for each unsigned TaskParams field, in its units.
PARAM_LIMITS = _param_limits()


def _contract_values(terms: TaskTerms) -> list[tuple[str, int, int]]:
    """``(name, value in the contract's units, largest value the contract accepts)`` of every bounded term."""
    params = terms.to_params(model_id=bytes(32), dataset_id=bytes(32))._asdict()
    return [(name, params[name], PARAM_LIMITS[name]) for name in PARAM_LIMITS if name in params]


def _unfit(name: str, value: int, limit: int) -> str:
    """What to say of a term or budget outside ``0..limit`` (contract units), in the units a person writes."""
    if name in AMOUNT_FIELDS:
        shown, most = f"{value} wei", f"{limit} wei (about {float(ether(limit)):.3g} ether)"
    elif name in FRACTION_FIELDS:
        shown, most = f"{value / WAD:g}", f"{limit / WAD:g}"
    else:
        shown, most = str(value), str(limit)
    where = "--budget (budget)" if name == "budget" else f"--{name.replace('_', '-')} (terms.{name})"
    if value < 0:
        return f"{name} {shown}: it must be >= 0; set {where}"
    return f"{name} {shown}: at most {most}; set {where} lower"


def _with_amounts(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every amount field parsed to wei."""
    return {
        key: parse_wei(value) if key in AMOUNT_FIELDS and value is not None else value for key, value in data.items()
    }


def load_publish_config(
    path: str | Path | None = None,
    *,
    terms: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    budget: int | str | None = None,
    aggregator: str | None = None,
    confirmations: int | None = None,
    fund_bond: bool | None = None,
    expected_clients: int | None = None,
    token: str | None = None,
) -> PublishConfig:
    """Load a :class:`PublishConfig` from an optional YAML file; non-None overrides win.

    The file may hold the terms at the top level or under ``terms:``, the spec
    under ``spec:``, and ``budget``, ``aggregator`` and ``confirmations`` at the top level.
    """
    data = load_yaml(path) if path is not None else {}
    top = {f.name for f in dataclasses.fields(PublishConfig)}
    term_names = {f.name for f in dataclasses.fields(TaskTerms)}
    unknown = sorted(set(data) - top - term_names)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)}",
            hint=f"known: {', '.join(sorted(top | term_names))}",
        )
    term_data = {**{k: v for k, v in data.items() if k in term_names}, **dict(data.get("terms") or {})}
    term_data.update({k: v for k, v in (terms or {}).items() if v is not None})
    file_spec = dict(data.get("spec") or {})
    flag_spec = {k: v for k, v in (spec or {}).items() if v is not None}
    spec_data = {**file_spec, **flag_spec}
    if isinstance(file_spec.get("validation"), Mapping) and isinstance(flag_spec.get("validation"), Mapping):
        spec_data["validation"] = {**file_spec["validation"], **flag_spec["validation"]}  # a flag changes one field
    return PublishConfig(
        terms=from_mapping(TaskTerms, _with_amounts(term_data), prefix="terms."),
        spec=from_mapping(TaskSpec, spec_data, prefix="spec."),
        budget=parse_wei(budget if budget is not None else data.get("budget", PublishConfig.budget)),
        aggregator=aggregator if aggregator is not None else data.get("aggregator"),
        confirmations=confirmations
        if confirmations is not None
        else data.get("confirmations", PublishConfig.confirmations),
        fund_bond=fund_bond if fund_bond is not None else data.get("fund_bond", PublishConfig.fund_bond),
        expected_clients=expected_clients if expected_clients is not None else data.get("expected_clients"),
        token=token if token is not None else data.get("token"),
    )


@dataclass(frozen=True)
class BudgetEstimate:
    """The pay a task's terms imply for a number of clients over every round, wei (eqs. 15 and 16).

    Two cases bound what matters: clients on time (r_a = r_t = 1: each round takes T = T_ex / N) and fast
    clients (r_a = 1, r_t at the reputation cap: each round takes T / cap or less, as small jobs on quick fog
    nodes do). The final bonus is taken at its largest, a task that ends at once (T_r = 0).

    Attributes:
        clients: the clients it is for.
        round_on_time: one client's pay for one round on time, psi.
        round_fast: one client's pay for one fast round, psi x cap^2.
        bonus_on_time: one client's largest final bonus on time, phi x T_ex.
        bonus_fast: one fast client's largest final bonus, phi x T_ex x cap.
    """

    clients: int
    rounds: int
    round_on_time: int
    round_fast: int
    bonus_on_time: int
    bonus_fast: int

    @property
    def on_time(self) -> int:
        """Every client on time, every round, with the largest bonus."""
        return self.clients * (self.rounds * self.round_on_time + self.bonus_on_time)

    @property
    def fast(self) -> int:
        """Every client fast, every round, with the largest bonus: what a budget must hold never to scale pay down."""
        return self.clients * (self.rounds * self.round_fast + self.bonus_fast)


def budget_estimate(terms: TaskTerms, clients: int) -> BudgetEstimate:
    """What ``terms`` pay ``clients`` clients (:class:`BudgetEstimate`): the mechanism's eqs. 15, 10 and 16, as the
    contract computes them, at r_a = 1 and r_t = 1 (on time) or r_t = cap (fast), with the task ending at once."""
    from fedchain.fl.reputation import final_bonus, round_payment, total_reputation

    cap = to_wad(terms.reputation_cap, "reputation_cap")

    def bonus(time_rep: int) -> int:
        return final_bonus(terms.phi, terms.expected_duration, 0, total_reputation(WAD, time_rep, cap))

    return BudgetEstimate(
        clients=clients,
        rounds=terms.rounds,
        round_on_time=round_payment(terms.psi, WAD, WAD, 0, 0),
        round_fast=round_payment(terms.psi, WAD, cap, 0, 0),
        bonus_on_time=bonus(WAD),
        bonus_fast=bonus(cap),
    )


def budget_warning(config: PublishConfig, asset: Asset | None = None) -> str | None:
    """Why ``config``'s budget may run out before its expected clients are paid, with the figures and the budget that
    would do; None when it covers even fast clients. Once a budget is spent, each round's pay is scaled down pro
    rata (and the final bonus with it), so reputation barely changes what a client gets. Amounts are shown in
    ``asset`` (default: ether), the task's money."""
    money = (asset or Asset()).format
    terms = config.terms
    clients = config.expected_clients or terms.max_clients
    estimate = budget_estimate(terms, clients)
    if config.budget >= estimate.fast:
        return None
    how = "runs out even if every client is on time" if config.budget < estimate.on_time else "may run out"
    fast_round_time = terms.expected_duration / terms.rounds / terms.reputation_cap
    return (
        f"the budget of {money(config.budget)} {how}: for {clients} client(s) over {terms.rounds} round(s) the "
        f"terms imply {money(estimate.on_time)} with every client on time (r_a = r_t = 1: psi = "
        f"{money(estimate.round_on_time)} per client and round) and up to {money(estimate.fast)} when "
        f"rounds take {fast_round_time:g} s or less (r_t at the cap {terms.reputation_cap:g}: "
        f"{money(estimate.round_fast)} per client and round), final bonuses (phi x T_ex x r_at) included. "
        f"Once it is spent, every round's pay is scaled down pro rata and reputation barely changes it. "
        f"A budget of {money(estimate.fast)} covers every case; or lower psi, phi or reputation_cap, or give "
        f"expected_clients (now {clients})"
    )


@dataclass(frozen=True)
class WindowProblem:
    """A task window too short for the agents to act in on a chain with a block clock.

    Attributes:
        name: the :class:`TaskTerms` field (``bidding_duration``, ``reveal_duration``, ``round_duration``
            or ``time_tolerance``).
        value: the window as set, seconds.
        smallest: the smallest workable window on this chain at this depth, seconds.
        blocks: the blocks of the chain in ``smallest``.
        needs: what has to fit in the window, in words.
        training: seconds of ``smallest`` that are not blocks: the round's expected training time, or the time a
            client is given to re-score its entry before it challenges.
    """

    name: str
    value: int
    smallest: int
    blocks: int
    needs: str
    training: int = 0

    def __str__(self) -> str:
        blocks = f"{self.blocks} block{'s' if self.blocks != 1 else ''}"
        made_of = f"{self.training} s + {blocks}" if self.training else blocks
        return (
            f"{self.name} {self.value} s is too short: at least {self.smallest} s ({made_of}) for {self.needs}; "
            f"set --{self.name.replace('_', '-')} (terms.{self.name})"
        )


def check_windows(terms: TaskTerms, interval: BlockInterval, confirmations: int) -> list[WindowProblem]:
    """Every window of ``terms`` shorter than its agents need on a chain making blocks every ``interval``.

    ``confirmations`` is the depth at which the agents act on events. On a chain
    that makes blocks on demand (automine) a block comes when a transaction
    does, so no window is too short for it and nothing is returned.
    """
    if confirmations < 0:
        raise ConfigError(f"confirmations must be >= 0, got {confirmations}")
    if interval.on_demand:
        return []
    depth = f"{confirmations} confirmation{'s' if confirmations != 1 else ''}"
    training = math.ceil(terms.expected_duration / terms.rounds)
    rules = (
        (
            "bidding_duration",
            terms.bidding_duration,
            confirmations + BIDDING_BLOCKS,
            0,
            f"a fog node to see the auction open at {depth} and get its bid mined",
        ),
        (
            "reveal_duration",
            terms.reveal_duration,
            confirmations + REVEAL_BLOCKS,
            0,
            f"the chain to pass the bidding deadline and a reveal to be mined and confirmed at {depth}",
        ),
        (
            "round_duration",
            terms.round_duration,
            confirmations + ROUND_BLOCKS,
            training,
            f"the expected training time (expected_duration / rounds), a fog node seeing the round start at {depth} "
            "and its commit being mined",
        ),
        (
            "time_tolerance",
            terms.time_tolerance,
            TOLERANCE_BLOCKS,
            0,
            "a commit re-mined one block later by a reorganisation to keep the round time the aggregator read",
        ),
        (
            "challenge_window",
            terms.challenge_window,
            confirmations + CHALLENGE_BLOCKS,
            CHALLENGE_WORK_S,
            f"a client to see the post at {depth}, re-score its entry and get its challenge mined",
        ),
    )
    # A self-trained task has no auction (its clients commit their own updates, dated by their blocks as a fog's are).
    unused = ("bidding_duration", "reveal_duration") if terms.self_trained else ()
    problems = []
    for name, value, blocks, extra, needs in rules:
        if name in unused:
            continue
        smallest = extra + math.ceil(interval.span(blocks))
        if value < smallest:
            problems.append(WindowProblem(name, value, smallest, blocks, needs, extra))
    return problems


def windows_error(problems: list[WindowProblem], interval: BlockInterval, confirmations: int) -> WindowsTooShort:
    """The error that refuses a task for ``problems``: each window, its value and the smallest workable one."""
    lines = "\n".join(f"  - {problem}" for problem in problems)
    return WindowsTooShort(
        f"the task's windows are too short for this chain ({interval.describe()}, agents acting at "
        f"{confirmations} confirmations):\n{lines}"
    )
