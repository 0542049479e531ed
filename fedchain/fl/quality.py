"""The per-round quality ``q_i^n`` the chain consumes (DESIGN.md, Tian eq. 4).

Two sources, one per task:

- ``"loss"`` (default): ``q_i = loss_avg / loss_i``, where ``loss_i`` is the
  validation loss of client i's updated model and ``loss_avg`` the median over
  the accepted (screened, :mod:`fedchain.fl.screening`) clients: with a mean,
  one attacker's huge loss would raise every honest client's quality a
  thousandfold, and its tiny loss lower them; a median moves only when half
  the round moves it. Losses are floored at :data:`LOSS_FLOOR` (both sides),
  so a perfect model gets a large finite quality, and all-zero losses give 1.
- ``"contribution"``: the strategy's per-round contribution, rescaled so that
  its mean over the accepted clients is 1. Rule for zero and negative values:
  a negative (or NaN) contribution counts as 0, a contribution that harms the
  model earns no quality; when no accepted client has a positive contribution,
  every quality is 0 (nothing was contributed, so nothing is rescaled to 1).

A contribution also grows with the data behind it, so on POW data the
smallest honest clients contributed little round after round and were
removed. With the task's ``data_credit`` (:func:`data_credited`) an accepted
client holding less than the accepted clients' mean data has its contribution
quality multiplied by mean / its data, at most by the credit: it is judged per
sample. A contribution of 0 stays 0, and a client claiming less data than it
has gains no more than the credit (docs/robustness.md, "Small clients").

Rejected clients always get quality 0. An accepted client gets at least the task's
``floor`` (:func:`floored`, 0: the seed's measure as it is): on chain a round
below q_min multiplies r_a by its quality, so one honest client's poor round
(a model trained on skewed data scored on the balanced validation set:
0.02-0.15) would take r_a below r_a_min and cost the client its deposit by
itself. With the floor a single poor round cuts that round's reputation and
pay, and only a client that stays poor round after round (a label flipper)
falls below r_a_min. The floor of a round comes from
:func:`fedchain.fl.floor.round_floor`: in the early rounds the history is too
short for a floor of 0.2, and a task's ``early_floor`` raises it there
(docs/robustness.md, "Quality on skewed data" and "The first rounds").
Values come as floats and as 1e18
fixed-point integers for the contract: ``q * 10**18`` computed exactly from
the float's shortest decimal form (``repr``: 0.1 is exactly ``10**17``),
rounded half to even.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

import torch

from fedchain.errors import ConfigError
from fedchain.fl.floor import check_data_credit, check_floor
from fedchain.fl.strategy import RoundResult
from fedchain.units import WAD

#: Smallest loss used in the ratio: keeps a zero loss from dividing by zero.
LOSS_FLOOR = 1e-8

QualitySource = Literal["loss", "contribution"]


@dataclass(frozen=True)
class RoundQuality:
    """Every client's quality of one round."""

    #: q_i as floats.
    values: tuple[float, ...]
    #: q_i in 1e18 fixed point, as the contract takes them.
    wad: tuple[int, ...]


def loss_ratio(losses: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """Tian eq. 4 over the accepted clients: ``median_accepted(loss) / loss_i``; 0 where not accepted.

    The median is numpy's (the two middle losses averaged for an even count), so no single
    client's loss moves another client's quality beyond the next loss in order (module docstring).
    """
    losses = losses.to(torch.float64)
    if not accepted.any():
        return torch.zeros_like(losses)
    average = losses[accepted].quantile(0.5).clamp_min(LOSS_FLOOR)
    ratio = average / torch.where(accepted, losses, torch.ones_like(losses)).clamp_min(LOSS_FLOOR)
    return torch.where(accepted, ratio, torch.zeros_like(ratio))


def rescaled_contribution(contribution: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """Contributions clipped at 0 and scaled to mean 1 over the accepted clients (module rules)."""
    positive = torch.nan_to_num(contribution.to(torch.float64), nan=0.0).clamp_min(0.0)
    positive = torch.where(accepted, positive, torch.zeros_like(positive))
    total = positive.sum()
    if total <= 0:
        return torch.zeros_like(positive)
    return positive / total * int(accepted.sum())


def data_credited(
    values: torch.Tensor, accepted: torch.Tensor, data_sizes: torch.Tensor, credit: float
) -> torch.Tensor:
    """``q_i * min(credit, mean D / D_i)`` for the accepted clients with less data than the accepted clients'
    mean ``D``; the others keep their value (module docstring)."""
    check_data_credit(credit)
    sizes = data_sizes.to(torch.float64)
    if sizes.shape != values.shape:
        raise ConfigError(f"got {sizes.numel()} data sizes for {values.numel()} clients")
    if credit == 1 or not accepted.any():
        return values
    mean = sizes[accepted].mean()
    factor = (mean / sizes.clamp_min(1.0)).clamp(1.0, credit)
    return torch.where(accepted, values * factor, values)


def floored(values: torch.Tensor, accepted: torch.Tensor, floor: float) -> torch.Tensor:
    """``max(q_i, floor)`` for the accepted clients; the others keep their value (module docstring)."""
    check_floor(floor)
    if floor == 0:
        return values
    return torch.where(accepted, values.clamp_min(floor), values)


def to_wad(values: Sequence[float] | torch.Tensor) -> tuple[int, ...]:
    """Exact 1e18 fixed point of non-negative finite floats (round half to even)."""
    floats = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    wads = []
    for value in floats:
        if not (value >= 0 and value != float("inf")):
            raise ConfigError(f"a quality must be finite and non-negative, got {value}", hint="check the client losses")
        wads.append(int((Decimal(repr(float(value))) * WAD).to_integral_value(rounding=ROUND_HALF_EVEN)))
    return tuple(wads)


def round_quality(
    result: RoundResult,
    *,
    source: QualitySource = "loss",
    client_losses: torch.Tensor | Sequence[float] | None = None,
    floor: float = 0.0,
    data_sizes: torch.Tensor | Sequence[float] | None = None,
    data_credit: float = 1.0,
) -> RoundQuality:
    """The round's ``q_i`` for the chain, from ``result`` and the chosen ``source``.

    ``client_losses`` (validation loss of each client's updated model) is needed
    for ``source="loss"`` when the strategy did not measure them itself
    (``result.client_losses`` is None, e.g. fedavg and cgsv). ``floor``: the least
    quality of an accepted client (the task's :attr:`~fedchain.taskspec.TaskSpec.quality_floor`).
    ``data_credit``: the most a contribution quality grows for a client with less data than the mean
    (:attr:`~fedchain.taskspec.TaskSpec.data_credit`, 1: none); above 1 it needs every client's ``data_sizes``.
    """
    accepted = result.accepted
    if source == "contribution":
        values = rescaled_contribution(result.contribution, accepted)
        if data_credit != 1:
            if data_sizes is None:
                raise ConfigError(
                    "a data credit needs every client's data size", hint="pass data_sizes=..., or data_credit=1"
                )
            values = data_credited(values, accepted, torch.as_tensor(data_sizes, dtype=torch.float64), data_credit)
    elif source == "loss":
        losses = result.client_losses if client_losses is None else torch.as_tensor(client_losses, dtype=torch.float64)
        if losses is None:
            raise ConfigError(
                "the loss quality needs each client's validation loss",
                hint="pass client_losses=... (validation loss of global + Delta_i), or source='contribution'",
            )
        if losses.shape != accepted.shape:
            raise ConfigError(f"got {losses.numel()} client losses for {accepted.numel()} clients")
        accepted = accepted & torch.isfinite(losses)
        values = loss_ratio(losses, accepted)
    else:
        raise ConfigError(f"unknown quality source {source!r}", hint="use 'loss' or 'contribution'")
    values = floored(values, accepted, floor)
    return RoundQuality(values=tuple(values.tolist()), wad=to_wad(values))
