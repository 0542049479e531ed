"""Model parameters as flat vectors.

Aggregation and contribution kernels work on flat float32 vectors: cosine
similarities, norms and top-k selections are one call each, and many clients'
parameters stack into one ``[n_clients, n_params]`` matrix. A :class:`ParamSpec`
remembers names, shapes and dtypes so a vector turns back into a state dict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

#: A model's parameters by name, as in ``module.state_dict()``.
Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ParamSpec:
    """Names, shapes and dtypes of a parameter dict, in a fixed order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of scalars of each tensor, in the flat vector's order."""
        return tuple(math.prod(shape) for shape in self.shapes)

    @property
    def numel(self) -> int:
        """Total number of scalars."""
        return sum(self.sizes)

    @classmethod
    def of(cls, params: Mapping[str, torch.Tensor]) -> ParamSpec:
        """The spec of ``params`` (in its own key order)."""
        names = tuple(params)
        return cls(
            names=names,
            shapes=tuple(tuple(params[n].shape) for n in names),
            dtypes=tuple(params[n].dtype for n in names),
        )


def flatten(params: Mapping[str, torch.Tensor], spec: ParamSpec | None = None) -> tuple[torch.Tensor, ParamSpec]:
    """Concatenate ``params`` (in ``spec``'s order) into one float32 vector."""
    spec = spec or ParamSpec.of(params)
    vector = torch.cat([params[name].detach().reshape(-1).to(torch.float32) for name in spec.names])
    return vector, spec


def unflatten(vector: torch.Tensor, spec: ParamSpec) -> Params:
    """Split a flat vector back into named tensors of ``spec``'s shapes and dtypes."""
    if vector.ndim != 1 or vector.numel() != spec.numel:
        raise ValueError(f"vector of shape {tuple(vector.shape)} does not match a spec of {spec.numel} scalars")
    params: Params = {}
    offset = 0
    for name, shape, dtype, size in zip(spec.names, spec.shapes, spec.dtypes, spec.sizes, strict=True):
        params[name] = vector[offset : offset + size].reshape(shape).to(dtype)
        offset += size
    return params
