"""Client faults for experiments: bad labels, free riders, and poisoned updates (scaled,
sign-flipped, noise, colluding Sybils).

Pure functions: they return new tensors and never change their inputs. Random
ones take a ``torch.Generator`` so that experiments are reproducible.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from fedchain.errors import ConfigError

FreeRiderMode = Literal["zero", "random", "disguised"]


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be in [0, 1], got {value}")


def noisy_labels(
    labels: torch.Tensor, fraction: float, num_classes: int, *, generator: torch.Generator
) -> torch.Tensor:
    """Labels with ``round(fraction * N)`` of them, chosen at random, replaced by a different random class."""
    _check_fraction("noisy label fraction", fraction)
    if num_classes < 2:
        raise ConfigError(f"noisy labels need at least 2 classes, got {num_classes}")
    n = labels.shape[0]
    count = round(fraction * n)
    chosen = torch.randperm(n, generator=generator)[:count].to(labels.device)
    # An offset in 1..C-1 modulo C always lands on another class, uniformly.
    offsets = torch.randint(1, num_classes, (count,), generator=generator).to(labels.device)
    noisy = labels.clone()
    noisy[chosen] = (labels[chosen] + offsets) % num_classes
    return noisy


def flip_labels(labels: torch.Tensor, num_classes: int, mapping: dict[int, int] | None = None) -> torch.Tensor:
    """Label flipping: ``y -> mapping[y]`` (default ``y -> num_classes - 1 - y``, every label wrong)."""
    if mapping is None:
        return (num_classes - 1) - labels
    table = torch.arange(num_classes, device=labels.device)
    for source, target in mapping.items():
        if not (0 <= source < num_classes and 0 <= target < num_classes):
            raise ConfigError(f"label flip {source}->{target} is outside 0..{num_classes - 1}")
        table[source] = target
    return table[labels]


def free_ride(
    update: torch.Tensor,
    mode: FreeRiderMode,
    *,
    generator: torch.Generator | None = None,
    std: float | None = None,
    last_step: torch.Tensor | None = None,
    disguise_noise: float = 0.5,
) -> torch.Tensor:
    """What a free rider submits in place of the honest ``update`` (a parameter delta).

    ``zero``: no change at all. ``random``: Gaussian noise of standard
    deviation ``std``; by default the root-mean-square of ``update``, so the
    fake has the norm of a real update and a norm check alone cannot tell.
    ``disguised``: :func:`disguised_free_ride` of ``last_step`` at ``disguise_noise``;
    the zero update while there is no step yet (round 1).
    """
    if mode == "zero" or (mode == "disguised" and last_step is None):
        return torch.zeros_like(update)
    if mode not in ("random", "disguised"):
        raise ConfigError(f"unknown free-rider mode {mode!r}", hint="use zero, random or disguised")
    if generator is None:
        raise ConfigError(
            f"a {mode} free rider needs a generator", hint="pass generator=torch.Generator().manual_seed(...)"
        )
    if last_step is not None and mode == "disguised":
        return disguised_free_ride(last_step, noise=disguise_noise, generator=generator)
    scale = float(update.float().pow(2).mean().sqrt()) if std is None else std
    noise = torch.randn(update.shape, generator=generator, dtype=torch.float32)
    return (noise * scale).to(device=update.device, dtype=update.dtype)


def disguised_free_ride(last_step: torch.Tensor, *, noise: float, generator: torch.Generator) -> torch.Tensor:
    """The disguised free rider of Fraboni et al. (AISTATS 2021): no training, only what every client can see.

    It sends the difference between the last two global models (``last_step``), plus Gaussian noise of ``noise``
    times that difference's root-mean-square per parameter. Its norm and direction look like a client's that
    learnt what the others learnt (:func:`free_ride` sends the zero update in round 1, before any step).
    """
    rms = float(last_step.float().pow(2).mean().sqrt())
    jitter = torch.randn(last_step.shape, generator=generator, dtype=torch.float32) * (noise * rms)
    return last_step + jitter.to(device=last_step.device, dtype=last_step.dtype)


def scale_update(update: torch.Tensor, factor: float) -> torch.Tensor:
    """An update multiplied by ``factor`` (a boosting attacker for factor > 1, a lazy client below 1)."""
    return update * factor


def flip_sign(update: torch.Tensor) -> torch.Tensor:
    """The sign-flip attack: minus the honest ``update``, pulling the model back as hard as it would have moved."""
    return -update


def noise_of_norm(update: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """Gaussian noise rescaled to exactly the norm of the honest ``update`` (the noise attack).

    Unlike a random free rider (:func:`free_ride`, whose norm matches only in
    expectation), the noise has the honest norm to the last bit of float
    precision, so only its direction can give it away. A zero update gives zero.
    """
    noise = torch.randn(update.shape, generator=generator, dtype=torch.float32).to(
        device=update.device, dtype=update.dtype
    )
    norm = noise.norm()
    if norm == 0:
        return torch.zeros_like(update)
    return noise * (update.norm() / norm)


def sybil_update(honest: torch.Tensor, factor: float) -> torch.Tensor:
    """The one update that every colluding Sybil sends: ``-factor`` times the mean of their honest updates.

    ``honest`` holds one honest update per Sybil (``[k, d]``). The Sybils pool
    what they learnt and all send the same vector, opposite to it: each copy is
    as far from the honest direction as a sign flip, while the copies agree
    with one another perfectly, which is what defeats defences that trust
    updates close to others (Multi-Krum, a median with enough copies) and
    contribution scores measured against the aggregate. With ``factor`` 1 its
    norm is at most a typical honest norm, so a norm check alone cannot tell.
    """
    if honest.ndim != 2 or honest.shape[0] == 0:
        raise ConfigError(f"Sybil updates need a [k, d] tensor with k >= 1, got shape {tuple(honest.shape)}")
    if not (factor > 0 and math.isfinite(factor)):
        raise ConfigError(
            f"the Sybil factor must be a positive finite number, got {factor}", hint="1 gives an honest-sized update"
        )
    return honest.mean(dim=0) * -factor


#: What an attacking fog node does to the updates it trained (``fog run --attack``).
UPDATE_ATTACKS = ("sign-flip", "noise", "scale", "sybil")


def attack_updates(updates: torch.Tensor, attack: str, *, scale: float, generator: torch.Generator) -> torch.Tensor:
    """The updates ``[k, d]`` one party trained honestly, after ``attack`` (:data:`UPDATE_ATTACKS`).

    The same faults as ``simulate``'s, for a fog node that trains its k jobs and then
    attacks: ``sign-flip`` (:func:`flip_sign`), ``noise`` of each update's own norm
    (:func:`noise_of_norm`), ``scale`` by ``scale`` (:func:`scale_update`), and ``sybil``:
    its k jobs' clients as colluding Sybils, all sent one update, ``-scale`` times the
    mean of the honest ones (:func:`sybil_update`).
    """
    if attack not in UPDATE_ATTACKS:
        raise ConfigError(f"unknown update attack {attack!r}", hint=f"use one of {', '.join(UPDATE_ATTACKS)}")
    if not (scale > 0 and math.isfinite(scale)):
        raise ConfigError(f"the attack's scale must be a positive finite number, got {scale}")
    if attack == "sybil":
        return sybil_update(updates, scale).expand_as(updates).clone()
    rows = []
    for update in updates:
        if attack == "sign-flip":
            rows.append(flip_sign(update))
        elif attack == "noise":
            rows.append(noise_of_norm(update, generator=generator))
        else:
            rows.append(scale_update(update, scale))
    return torch.stack(rows) if rows else updates.clone()
