"""Local training of many clients at once: one API, three engines.

:class:`Trainer` trains a list of clients from a global model (or one
starting point per client) and returns their local models stacked as a
``[n_clients, n_params]`` float32 matrix, the flat layout of
:mod:`fedchain.fl.params` that every strategy consumes.

Engines (all give the sequential engine's results within float tolerance):

* ``sequential``: the reference, one client after another in this process.
* ``process``: a persistent pool of single-threaded processes (CPU), data in
  shared memory; the fastest on a multi-core CPU.
* ``stacked``: all clients as one model whose layers hold every client's
  weights (grouped convolutions, batched matrix products), plain autograd;
  for GPUs, correct (but slow) on a CPU; models that chain Conv2d, Linear,
  Flatten, pooling and activation layers (LeNet-5, the small CNN).
* ``vmap``: all clients as one batched computation with ``torch.func``; for
  GPUs as well, with more work per step than ``stacked`` but for any model
  without buffers.
* ``auto``: on CUDA, ``stacked`` when the model allows it, else ``vmap``
  when it has no buffers, else ``sequential``; ``process`` on a CPU with two
  or more cores, else ``sequential``.

A fog node training several jobs of the same model passes each client's own
starting point (``global_params`` of shape ``[n, d]``); jobs of different
models use one ``Trainer`` each and may share a :class:`WorkerPool`.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedchain.data.datasets import ImageDataset
from fedchain.errors import ConfigError, DataError
from fedchain.fl.params import ParamSpec, flatten
from fedchain.models.registry import ModelSpec
from fedchain.trainer.config import ENGINES, Engine, TrainConfig
from fedchain.trainer.device import resolve_device
from fedchain.trainer.local import (
    Checkpoints,
    client_generator,
    flat_state,
    load_flat,
    model_spec_of,
    prepare_model,
    train_one_client,
    velocity_of,
)
from fedchain.trainer.pool import WorkerPool, available_cores
from fedchain.trainer.stacked import StackedLayer, stack_plan, stacked_gradients
from fedchain.trainer.vectorised import train_batched, vmap_gradients

log = logging.getLogger(__name__)

#: A client's data: an :class:`ImageDataset` or an ``(images, labels)`` pair.
ClientData = ImageDataset | tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class TrainResult:
    """What one call of :meth:`Trainer.train` produced, one row per client, in input order.

    Attributes:
        params: local models, ``[n, d]`` float32 (on the trainer's device).
        losses: each client's mean training loss over its steps, ``[n]`` float64 (CPU).
            Self-reported by the trainer: fine for logs, never for rewards.
        steps: optimiser steps per client, ``[n]`` int64.
        samples: samples per client, ``[n]`` int64.
        engine: the engine that ran.
        seconds: wall-clock time of the call.
        checkpoints: each client's training states every ``checkpoint_every`` steps (CPU), when asked for.
    """

    params: torch.Tensor
    losses: torch.Tensor
    steps: torch.Tensor
    samples: torch.Tensor
    engine: str
    seconds: float
    checkpoints: tuple[Checkpoints, ...] | None = None

    def updates(self, global_params: torch.Tensor) -> torch.Tensor:
        """Local models minus their starting point (``[d]`` or ``[n, d]``): the updates ``Delta_i``."""
        return self.params - global_params.to(self.params.device)


def initial_params(model: ModelSpec | Callable[[], nn.Module], seed: int = 0) -> torch.Tensor:
    """A freshly initialised model as a flat float32 vector, reproducible from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = model.build() if isinstance(model, ModelSpec) else model()
    return flatten(module.state_dict())[0]


def as_pair(client: ClientData) -> tuple[torch.Tensor, torch.Tensor]:
    """A client's data as an ``(images, labels)`` pair."""
    if isinstance(client, ImageDataset):
        return client.images, client.labels
    images, labels = client
    return images, labels


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (unchanged when ``None``), then restore."""
    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def pick_engine(device_type: str, *, stackable: bool, has_buffers: bool, cores: int, picklable: bool) -> Engine:
    """The engine ``auto`` stands for: the fastest correct one for the device and the model.

    On CUDA: ``stacked`` for models of standard layers, else ``vmap`` for models
    without buffers, else ``sequential``. On a CPU: ``process`` with two or more
    cores (and a model factory worker processes can receive), else ``sequential``.
    """
    if device_type == "cuda":
        return "stacked" if stackable else ("sequential" if has_buffers else "vmap")
    return "process" if device_type == "cpu" and cores >= 2 and picklable else "sequential"


def _stackable(module: nn.Module) -> tuple[StackedLayer, ...] | None:
    """The stacked engine's chain of layers of ``module``, or None where it cannot be stacked."""
    try:
        return stack_plan(module)
    except ConfigError:
        return None


def _picklable(obj: object) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - PicklingError, TypeError, AttributeError...: all mean "not picklable"
        return False
    return True


class Trainer:
    """Trains many clients of one model; see the module docstring for the engines.

    Args:
        model: a :class:`ModelSpec`, a model name (``ModelSpec(name)``: 10
            classes, one channel), or a zero-argument factory returning a
            fresh ``nn.Module`` (module-level, hence picklable, for ``process``).
        config: the default :class:`TrainConfig`; ``train`` may override it per call.
        engine: ``auto``, ``sequential``, ``process``, ``vmap`` or ``stacked``.
        device: where to train (default: CUDA if available, else CPU).
        workers: processes of the ``process`` engine (default: the usable cores).
        pool: a shared :class:`WorkerPool` to use instead of an own one.
        threads: torch threads of the in-process engines while they train
            (default: leave torch's setting alone). On a CPU shared with other
            busy processes, 1 can be many times faster than several threads.
    """

    def __init__(
        self,
        model: ModelSpec | str | Callable[[], nn.Module],
        config: TrainConfig | None = None,
        *,
        engine: Engine = "auto",
        device: torch.device | str | None = None,
        workers: int | None = None,
        pool: WorkerPool | None = None,
        threads: int | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise ConfigError(f"unknown engine {engine!r}", hint=f"use one of: {', '.join(ENGINES)}")
        self.model = ModelSpec(model) if isinstance(model, str) else model
        self.config = config or TrainConfig()
        self.device = resolve_device(device)
        self._module = prepare_model(
            self.model.build() if isinstance(self.model, ModelSpec) else self.model(), self.device
        )
        #: Names, shapes and dtypes of the flat parameter vector (the model's state dict).
        self.spec: ParamSpec = model_spec_of(self._module)
        has_buffers = any(True for _ in self._module.buffers())
        cores = workers if workers is not None else (pool.workers if pool is not None else available_cores())
        #: The stacked engine's chain of layers (None for the other engines).
        self._layers: tuple[StackedLayer, ...] | None = None
        if engine == "stacked":
            self._layers = stack_plan(self._module)
        if engine == "auto":
            self._layers = _stackable(self._module) if self.device.type == "cuda" else None
            engine = pick_engine(
                self.device.type,
                stackable=self._layers is not None,
                has_buffers=has_buffers,
                cores=cores,
                picklable=self.device.type == "cpu" and _picklable(self.model),
            )
        if engine == "process" and self.device.type != "cpu":
            raise ConfigError(
                "the process engine trains on the CPU only",
                hint="use engine='stacked', 'vmap' or 'sequential' on a GPU",
            )
        if engine == "vmap" and has_buffers:
            raise ConfigError(
                "the vmap engine cannot train a model with buffers (batch normalisation)",
                hint="use engine='sequential' or 'process' for this model",
            )
        if engine == "process" and not _picklable(self.model):
            raise ConfigError(
                "the process engine needs a picklable model factory", hint="pass a ModelSpec or a module-level function"
            )
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        self.threads = threads
        #: The engine this trainer runs.
        self.engine: str = engine
        self._own_pool = pool is None and engine == "process"
        self._pool = pool if pool is not None else (WorkerPool(cores) if engine == "process" else None)
        log.debug("trainer for %s: engine %s on %s", self.model, self.engine, self.device)

    @property
    def pool(self) -> WorkerPool | None:
        """The worker pool of the ``process`` engine (``None`` for the others)."""
        return self._pool

    def initial_params(self, seed: int = 0) -> torch.Tensor:
        """A freshly initialised model of this trainer as a flat vector (CPU), reproducible from ``seed``."""
        return initial_params(self.model, seed)

    def start(self) -> None:
        """Start the worker processes now (otherwise the first ``train`` does)."""
        if self._pool is not None:
            self._pool.start()

    def close(self) -> None:
        """Stop the worker processes this trainer started."""
        if self._own_pool and self._pool is not None:
            self._pool.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_matrix(self, global_params: torch.Tensor | Mapping[str, torch.Tensor], n: int) -> torch.Tensor:
        if isinstance(global_params, Mapping):
            missing = set(self.spec.names) - set(global_params)
            if missing:
                raise ConfigError(
                    f"global parameters lack {', '.join(sorted(missing)[:3])}", hint="pass the model's full state dict"
                )
            return flatten(global_params, self.spec)[0]
        vector = global_params.detach().to(torch.float32)
        if vector.shape not in ((self.spec.numel,), (n, self.spec.numel)):
            raise ConfigError(
                f"global parameters of shape {tuple(vector.shape)} do not fit the model "
                f"([{self.spec.numel}] or [{n}, {self.spec.numel}])",
                hint="flatten them with fedchain.fl.params.flatten or Trainer.initial_params",
            )
        if not torch.isfinite(vector).all():
            raise ConfigError("global parameters contain NaN or infinite values")
        return vector

    def train(
        self,
        global_params: torch.Tensor | Mapping[str, torch.Tensor],
        clients: Sequence[ClientData],
        *,
        client_ids: Sequence[int] | None = None,
        config: TrainConfig | None = None,
        checkpoint_every: int | None = None,
    ) -> TrainResult:
        """Train every client locally from ``global_params`` (``[d]``, ``[n, d]`` or a state dict).

        ``client_ids`` (default ``0..n-1``) pick each client's shuffling
        generator, so a client keeps its batches wherever it sits in the list.
        With ``checkpoint_every`` the result keeps each client's training state
        every that many steps (:class:`~fedchain.trainer.local.Checkpoints`): a
        fog node's training transcript.
        """
        config = config or self.config
        pairs = [as_pair(c) for c in clients]
        n = len(pairs)
        if n == 0:
            raise DataError("no clients to train", hint="pass at least one client's data")
        ids = list(range(n)) if client_ids is None else [int(i) for i in client_ids]
        if len(ids) != n:
            raise ConfigError(f"{len(ids)} client ids for {n} clients")
        for position, (images, labels) in enumerate(pairs):
            if labels.shape[0] == 0 or images.shape[0] != labels.shape[0]:
                raise DataError(
                    f"client at position {position} has {images.shape[0]} images and {labels.shape[0]} labels",
                    hint="every client needs at least one labelled sample",
                )
        start = self._start_matrix(global_params, n)
        if checkpoint_every is not None and checkpoint_every < 1:
            raise ConfigError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
        began = time.perf_counter()
        if self.engine == "process":
            assert self._pool is not None
            params, losses, steps, checkpoints = self._pool.train(
                self.model, self.spec, start, pairs, ids, config, checkpoint_every
            )
        else:
            run = self._train_batched if self.engine in ("vmap", "stacked") else self._train_sequential
            with _torch_threads(self.threads):
                params, losses, steps, checkpoints = run(start, pairs, ids, config, checkpoint_every)
        seconds = time.perf_counter() - began
        samples = torch.tensor([int(y.shape[0]) for _, y in pairs], dtype=torch.int64)
        if not torch.isfinite(params).all():
            bad = (~torch.isfinite(params).all(dim=1)).nonzero().flatten().tolist()
            log.warning("clients at positions %s diverged (NaN/inf parameters); lower the learning rate", bad)
        return TrainResult(params, losses.cpu(), steps.cpu(), samples, self.engine, seconds, checkpoints)

    def _train_sequential(
        self,
        start: torch.Tensor,
        pairs: list[tuple[torch.Tensor, torch.Tensor]],
        ids: list[int],
        config: TrainConfig,
        every: int | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[Checkpoints, ...] | None]:
        n = len(pairs)
        out = torch.empty(n, self.spec.numel, dtype=torch.float32, device=self.device)
        losses = torch.empty(n, dtype=torch.float64)
        steps = torch.empty(n, dtype=torch.int64)
        rows = start.to(self.device).reshape(-1, self.spec.numel)
        kept: list[Checkpoints] = []
        for position, (images, labels) in enumerate(pairs):
            load_flat(self._module, rows[position if rows.shape[0] > 1 else 0], self.spec)
            recorder = _Recorder(self._module, self.spec, config) if every is not None else None
            losses[position], steps[position] = train_one_client(
                self._module,
                images.to(self.device),
                labels.to(self.device),
                config,
                client_generator(config.seed, ids[position]),
                checkpoint_every=every,
                on_checkpoint=recorder,
            )
            out[position] = flat_state(self._module, self.spec)
            if recorder is not None and every is not None:
                kept.append(recorder.checkpoints(every, int(steps[position])))
        return out, losses, steps, tuple(kept) if every is not None else None

    def _train_batched(
        self,
        start: torch.Tensor,
        pairs: list[tuple[torch.Tensor, torch.Tensor]],
        ids: list[int],
        config: TrainConfig,
        every: int | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[Checkpoints, ...] | None]:
        """The vectorised engines: every client at once, with the ``stacked`` or the ``vmap`` gradients."""
        n = len(pairs)
        images = torch.cat([x.to(self.device) for x, _ in pairs])
        labels = torch.cat([y.to(self.device) for _, y in pairs])
        if self.engine == "stacked":
            assert self._layers is not None
            gradients = stacked_gradients(self._layers, self.spec, images, labels)
        else:
            self._module.train()
            gradients = vmap_gradients(self._module, self.spec, images, labels)
        rows = start.to(self.device).reshape(-1, self.spec.numel).expand(n, -1)
        generators = [client_generator(config.seed, i) for i in ids]
        return train_batched(gradients, rows, [int(y.shape[0]) for _, y in pairs], generators, config, every)


class _Recorder:
    """Keeps a model's training state at each checkpoint of :func:`train_one_client` (CPU copies)."""

    def __init__(self, module: nn.Module, spec: ParamSpec, config: TrainConfig) -> None:
        self.module, self.spec, self.momentum = module, spec, bool(config.momentum)
        self.params: list[torch.Tensor] = []
        self.velocity: list[torch.Tensor] = []

    def __call__(self, step: int, optimizer: torch.optim.SGD) -> None:
        self.params.append(flat_state(self.module, self.spec).cpu())
        if self.momentum:
            self.velocity.append(velocity_of(optimizer, self.module, self.spec))

    def checkpoints(self, every: int, steps: int) -> Checkpoints:
        return Checkpoints(
            every, steps, torch.stack(self.params), torch.stack(self.velocity) if self.momentum else None
        )


def train_clients(
    model: ModelSpec | str | Callable[[], nn.Module],
    global_params: torch.Tensor | Mapping[str, torch.Tensor],
    clients: Sequence[ClientData],
    config: TrainConfig | None = None,
    *,
    engine: Engine = "auto",
    device: torch.device | str | None = None,
    client_ids: Sequence[int] | None = None,
) -> TrainResult:
    """One-shot :meth:`Trainer.train`. For many rounds keep a :class:`Trainer` (its worker pool persists)."""
    with Trainer(model, config, engine=engine, device=device) as trainer:
        return trainer.train(global_params, clients, client_ids=client_ids)


__all__ = ["ClientData", "TrainResult", "Trainer", "initial_params", "pick_engine", "train_clients"]
