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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import Any

from eth_utils import is_checksum_address, is_hex_address, to_checksum_address

from fedchain.chain.bindings import TaskParams
from fedchain.config import from_mapping, load_yaml
from fedchain.errors import ConfigError
from fedchain.taskspec import TaskSpec
from fedchain.units import WAD

#: Units an amount may be written in, as wei per unit.
WEI_UNITS: dict[str, int] = {"wei": 1, "gwei": 10**9, "ether": 10**18, "eth": 10**18}

#: Significant digits of the arithmetic that parses amounts: every uint256 (78 digits) exactly; Decimal's
#: default of 28 would round a budget of 2^96 wei and let it pass as another amount.
AMOUNT_DIGITS = 80

#: Fields of :class:`TaskTerms` and :class:`PublishConfig` that are amounts of wei.
AMOUNT_FIELDS = frozenset({"psi", "phi", "client_deposit", "fog_deposit", "budget"})


def parse_wei(value: int | str) -> int:
    """An amount in wei from an integer, or text such as ``"1e15"``, ``"0.01ether"`` or ``"5 gwei"``."""
    if isinstance(value, bool):
        raise ConfigError(f"an amount must be a number of wei, got {value!r}")
    if isinstance(value, int):
        amount = Decimal(value)
    else:
        text = str(value).strip().lower().replace("_", "")
        unit = next((u for u in sorted(WEI_UNITS, key=len, reverse=True) if text.endswith(u)), "wei")
        number = text.removesuffix(unit).strip() if text.endswith(unit) else text
        try:
            with localcontext(prec=AMOUNT_DIGITS):
                amount = Decimal(number) * WEI_UNITS[unit]
        except InvalidOperation as err:
            raise ConfigError(
                f"{value!r} is not an amount", hint="write wei as an integer, or a number with a unit: 0.5ether, 20gwei"
            ) from err
    if amount != amount.to_integral_value() or amount < 0:
        raise ConfigError(f"{value!r} is not a whole, non-negative number of wei")
    return int(amount)


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
    """

    rounds: int = 5
    target_accuracy: float = 0.0
    expected_duration: int = 600
    psi: int = 10**15
    phi: int = 10**12
    min_loss_reputation: float = 0.1
    min_time_reputation: float = 0.1
    min_quality: float = 0.5
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

    def __post_init__(self) -> None:
        positive = ("rounds", "expected_duration", "max_round_time", "cycles_per_sample", "round_duration",
                    "bidding_duration", "reveal_duration", "max_clients")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.target_accuracy <= 1:
            raise ConfigError(f"target_accuracy must be a fraction in [0, 1], got {self.target_accuracy}")
        if not self.reputation_cap > 0:
            raise ConfigError(f"reputation_cap must be positive, got {self.reputation_cap}")
        if self.time_tolerance < 0:
            raise ConfigError(f"time_tolerance must be >= 0, got {self.time_tolerance}")

    def to_params(self, *, model_id: bytes, dataset_id: bytes) -> TaskParams:
        """The contract's ``TaskParams`` (fractions in 1e18 fixed point) for a spec and initial model."""
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
            fog_deposit=self.fog_deposit,
            cycles_per_sample=self.cycles_per_sample,
            round_duration=self.round_duration,
            bidding_duration=self.bidding_duration,
            reveal_duration=self.reveal_duration,
            time_tolerance=self.time_tolerance,
            max_clients=self.max_clients,
            second_price=self.second_price,
        )


@dataclass(frozen=True)
class PublishConfig:
    """What `fedchain task create` needs: the terms, the off-chain spec, the budget and the aggregator.

    Attributes:
        terms: the on-chain parameters.
        spec: the task spec every agent reads from the store.
        budget: wei escrowed as the reward budget.
        aggregator: the account that will post rounds (checksum address); None: the publisher itself.
    """

    terms: TaskTerms = field(default_factory=TaskTerms)
    spec: TaskSpec = field(default_factory=TaskSpec)
    budget: int = 10**18
    aggregator: str | None = None

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ConfigError("the budget must be at least 1 wei", hint="pass --budget, e.g. --budget 1ether")
        if self.aggregator is not None:
            object.__setattr__(self, "aggregator", _checked_address("aggregator", self.aggregator))


def _checked_address(name: str, value: object) -> str:
    """``value`` in checksum form; ConfigError unless it is 0x and 40 hex digits, all one case or a valid EIP-55 checksum."""
    if not isinstance(value, str) or not is_hex_address(value):
        raise ConfigError(
            f"{name} {value!r} is not an Ethereum address", hint=f"give the {name} account's address: 0x and 40 hex digits"
        )
    digits = value[2:]
    if digits not in (digits.lower(), digits.upper()) and not is_checksum_address(value):
        raise ConfigError(
            f"{name} {value!r} fails its EIP-55 checksum: a typo in the address?",
            hint="copy the address again (or give it in lower case, which carries no checksum)",
        )
    return to_checksum_address(value)


def _with_amounts(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every amount field parsed to wei."""
    return {key: parse_wei(value) if key in AMOUNT_FIELDS and value is not None else value for key, value in data.items()}


def load_publish_config(
    path: str | Path | None = None,
    *,
    terms: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    budget: int | str | None = None,
    aggregator: str | None = None,
) -> PublishConfig:
    """Load a :class:`PublishConfig` from an optional YAML file; non-None overrides win.

    The file may hold the terms at the top level or under ``terms:``, the spec
    under ``spec:``, and ``budget`` and ``aggregator`` at the top level.
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
    )
