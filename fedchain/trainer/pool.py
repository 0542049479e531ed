"""The ``process`` engine: a persistent pool of single-threaded training processes.

On a CPU, small models train faster as several independent processes with one
thread each than as one process whose every operator is split over threads
(the issue's measurement: 0.76 s against 0.97 s per round on 2 cores). Each
worker runs exactly :func:`~fedchain.trainer.local.train_one_client`, so the
results are those of the sequential engine.

Data crosses the process boundary once, in shared memory: for a call the
parent places all clients' samples in one shared tensor (kept while the same
client tensors come back, e.g. every round of an experiment), the starting
parameters in another, and allocates a shared output matrix ``[n, d]`` that
the workers fill row by row. Queues carry only small control messages (client
positions, losses) and the handles of those shared tensors; no training tensor
is pickled, no update leaves through a queue. Workers are started with
``spawn`` (safe with torch and CUDA), so scripts that use this engine need the
usual ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.multiprocessing as torch_mp
from torch import nn

from fedchain.errors import TrainingError
from fedchain.fl.params import ParamSpec
from fedchain.models.registry import ModelSpec
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.local import (
    Checkpoints,
    checkpoint_count,
    client_generator,
    flat_state,
    load_flat,
    prepare_model,
    steps_per_client,
    train_one_client,
    velocity_of,
)

log = logging.getLogger(__name__)

#: Seconds between liveness checks of the workers while waiting for results.
_POLL_SECONDS = 0.5
#: Seconds the pool waits for the next worker to say it started (imported torch) before it gives up. A quiet machine
#: starts two workers in about 6 s; one busy with a dozen other Python processes has taken over 120 s.
_START_TIMEOUT_SECONDS = 600.0
#: Seconds a worker may take to exit after being told to stop, before it is terminated.
_STOP_TIMEOUT_SECONDS = 2.0

ModelFactory = ModelSpec | Callable[[], nn.Module]


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _Job:
    """One call's work, sent once to every worker; the tensors live in shared memory."""

    job_id: int
    model: ModelFactory
    spec: ParamSpec
    config: TrainConfig
    start: torch.Tensor
    images: torch.Tensor
    labels: torch.Tensor
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    client_ids: tuple[int, ...]
    out: torch.Tensor
    #: Keep each client's state every this many steps (None: no checkpoints), into ``checkpoints`` ``[n, C, d]``
    #: (C: the most any client keeps) and, with momentum, ``velocities`` of the same shape.
    every: int | None = None
    checkpoints: torch.Tensor | None = None
    velocities: torch.Tensor | None = None


def _exit_with_parent() -> None:
    """Exit this worker as soon as its parent process ends, whatever the main thread is blocked on.

    A killed parent (SIGKILL, SIGTERM, a test timeout) runs no clean-up; without
    this its workers would wait on their queues, or on a half-written message, forever.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(0)

    threading.Thread(target=watch, name="fedchain-parent-watch", daemon=True).start()


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while worker processes start; they inherit the mask through exec.

    Ctrl-C reaches the whole process group: the parent's KeyboardInterrupt
    stops the pool, while a worker's own would only print its traceback over
    the command's output, even while it is still importing torch. A Ctrl-C
    that comes while the mask is up waits for it to come down: it is not lost.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _SharedRecorder:
    """Writes one client's checkpoints into the job's shared tensors, row by row (:func:`train_one_client`)."""

    def __init__(self, job: _Job, position: int, model: nn.Module) -> None:
        self.job, self.position, self.model, self.kept = job, position, model, 0

    def __call__(self, step: int, optimizer: torch.optim.SGD) -> None:
        job = self.job
        assert job.checkpoints is not None
        job.checkpoints[self.position, self.kept].copy_(flat_state(self.model, job.spec))
        if job.velocities is not None:
            job.velocities[self.position, self.kept].copy_(velocity_of(optimizer, self.model, job.spec))
        self.kept += 1


def _worker_main(rank: int, threads: int, jobs: Any, tasks: Any, results: Any) -> None:
    """A worker's loop: take a job, train the clients it pulls from ``tasks`` until an end marker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # born with SIGINT blocked (_sigint_blocked); ignored from here on too
    _exit_with_parent()
    torch.set_num_threads(threads)
    # The first optimiser a process builds imports torch's compiler stack (seconds);
    # pay that while starting, not in the first round.
    torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    models: dict[Any, nn.Module] = {}
    results.put(("ready", rank))
    while True:
        job: _Job | None = jobs.get()
        if job is None:
            return
        model = models.get(job.model)
        if model is None:
            fresh = job.model() if not isinstance(job.model, ModelSpec) else job.model.build()
            model = models[job.model] = prepare_model(fresh, torch.device("cpu"))
        while (position := tasks.get()) is not None:
            try:
                start = job.start[position if job.start.shape[0] > 1 else 0]
                load_flat(model, start, job.spec)
                begin, size = job.offsets[position], job.sizes[position]
                loss, steps = train_one_client(
                    model,
                    job.images[begin : begin + size],
                    job.labels[begin : begin + size],
                    job.config,
                    client_generator(job.config.seed, job.client_ids[position]),
                    checkpoint_every=job.every,
                    on_checkpoint=_SharedRecorder(job, position, model) if job.every is not None else None,
                )
                job.out[position].copy_(flat_state(model, job.spec))
                results.put(("done", job.job_id, position, loss, steps))
            except Exception:  # noqa: BLE001 - reported to the parent, which raises TrainingError
                results.put(("error", job.job_id, position, traceback.format_exc()))


class WorkerPool:
    """A persistent pool of training processes (one torch thread each by default).

    Started on first use and reused across calls; share one pool between
    several :class:`~fedchain.trainer.Trainer` objects (several jobs) to avoid
    oversubscribing the cores. Close it (or use it as a context manager) to
    stop the processes; it is also closed when garbage-collected.
    """

    def __init__(self, workers: int | None = None, threads_per_worker: int = 1) -> None:
        self.workers = workers if workers is not None else available_cores()
        if self.workers < 1 or threads_per_worker < 1:
            raise TrainingError(f"a pool needs at least one worker and one thread, got {workers}, {threads_per_worker}")
        self.threads_per_worker = threads_per_worker
        self._processes: list[Any] = []
        self._jobs: list[Any] = []
        self._lock = threading.Lock()
        self._job_counter = 0
        self._arena_key: tuple[torch.Tensor, ...] = ()
        self._arena: tuple[torch.Tensor, torch.Tensor] | None = None
        #: Seconds the last start took (spawning and importing torch in the workers).
        self.start_seconds: float | None = None

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers (for measuring their CPU time)."""
        return [p.pid for p in self._processes if p.pid is not None]

    @property
    def started(self) -> bool:
        """Whether the worker processes are running."""
        return bool(self._processes)

    def start(self) -> None:
        """Start the workers and wait until each has imported torch."""
        if self._processes:
            return
        began = time.perf_counter()
        context = torch_mp.get_context("spawn")
        self._tasks = context.Queue()
        self._results = context.Queue()
        for rank in range(self.workers):
            jobs = context.Queue()
            process = context.Process(
                target=_worker_main,
                args=(rank, self.threads_per_worker, jobs, self._tasks, self._results),
                name=f"fedchain-trainer-{rank}",
                daemon=True,
            )
            with _sigint_blocked():
                process.start()
            self._processes.append(process)
            self._jobs.append(jobs)
        ready = 0
        heard = began
        while ready < self.workers:
            message = self._get(deadline=heard + _START_TIMEOUT_SECONDS)
            if message[0] == "ready":
                ready, heard = ready + 1, time.perf_counter()
        self.start_seconds = time.perf_counter() - began
        log.info("started %d training workers in %.1f s", self.workers, self.start_seconds)

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        processes, self._processes = self._processes, []
        for jobs in self._jobs:
            jobs.put(None)
        for process in processes:
            process.join(timeout=_STOP_TIMEOUT_SECONDS)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        self._jobs = []
        self._arena_key, self._arena = (), None

    def __enter__(self) -> WorkerPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_processes", None):
            self.close()

    def _get(self, deadline: float | None = None) -> tuple:
        while True:
            try:
                return self._results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                dead = [p.name for p in self._processes if not p.is_alive()]
                if dead:
                    self.close()
                    raise TrainingError(f"training worker(s) {', '.join(dead)} died") from None
                if deadline is not None and time.perf_counter() > deadline:
                    self.close()
                    raise TrainingError("training workers did not start in time") from None

    def _shared_data(self, clients: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """All clients' samples, concatenated in shared memory; reused while the same tensors come back."""
        key = tuple(t for pair in clients for t in pair)
        if (
            self._arena is not None
            and len(key) == len(self._arena_key)
            and all(a is b for a, b in zip(key, self._arena_key, strict=True))
        ):
            return self._arena
        images = torch.cat([x.cpu() for x, _ in clients]).share_memory_()
        labels = torch.cat([y.cpu() for _, y in clients]).share_memory_()
        # Holding the client tensors keeps their identities from being reused by others.
        self._arena_key, self._arena = key, (images, labels)
        return self._arena

    def train(
        self,
        model: ModelFactory,
        spec: ParamSpec,
        start: torch.Tensor,
        clients: Sequence[tuple[torch.Tensor, torch.Tensor]],
        client_ids: Sequence[int],
        config: TrainConfig,
        checkpoint_every: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[Checkpoints, ...] | None]:
        """Train every client from ``start`` (``[d]`` or ``[n, d]``); returns (params, losses, steps, checkpoints
        every ``checkpoint_every`` steps or None)."""
        with self._lock:
            self.start()
            images, labels = self._shared_data(clients)
            sizes = tuple(int(y.shape[0]) for _, y in clients)
            offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
            n = len(clients)
            totals = [steps_per_client(size, config) for size in sizes]
            counts = [checkpoint_count(total, checkpoint_every) for total in totals] if checkpoint_every else []
            shape = (n, max(counts, default=0), spec.numel)
            self._job_counter += 1
            job = _Job(
                job_id=self._job_counter,
                model=model,
                spec=spec,
                config=config,
                start=start.detach().to("cpu", torch.float32).reshape(-1, spec.numel).clone().share_memory_(),
                images=images,
                labels=labels,
                offsets=offsets,
                sizes=sizes,
                client_ids=tuple(client_ids),
                out=torch.empty(n, spec.numel, dtype=torch.float32).share_memory_(),
                every=checkpoint_every,
                checkpoints=torch.empty(shape, dtype=torch.float32).share_memory_() if checkpoint_every else None,
                velocities=(
                    torch.empty(shape, dtype=torch.float32).share_memory_()
                    if checkpoint_every and config.momentum
                    else None
                ),
            )
            for jobs in self._jobs:
                jobs.put(job)
            # Largest clients first, so the slowest one does not start last.
            for position in sorted(range(n), key=lambda i: -sizes[i]):
                self._tasks.put(position)
            for _ in self._jobs:
                self._tasks.put(None)
            losses = torch.full((n,), math.nan, dtype=torch.float64)
            steps = torch.zeros(n, dtype=torch.int64)
            failures: list[tuple[int, str]] = []
            # Collect every client's answer, failed or not, so the pool is ready for the next call.
            answered = 0
            while answered < n:
                try:
                    message = self._get()
                except BaseException:
                    # Interrupted mid-call: queued tasks would confuse the next call; restart then.
                    self.close()
                    raise
                answered += 1
                if message[0] == "error":
                    failures.append((message[2], message[3]))
                    continue
                _, _, position, loss, count = message
                losses[position], steps[position] = loss, count
            if failures:
                position, trace = failures[0]
                log.debug("worker traceback:\n%s", trace)
                raise TrainingError(
                    f"training client at position {position} failed: {trace.strip().splitlines()[-1]}"
                    + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
                )
            if job.checkpoints is None or checkpoint_every is None:
                return job.out, losses, steps, None
            checkpoints = tuple(
                Checkpoints(
                    checkpoint_every,
                    totals[c],
                    job.checkpoints[c, : counts[c]].clone(),
                    job.velocities[c, : counts[c]].clone() if job.velocities is not None else None,
                )
                for c in range(n)
            )
            return job.out, losses, steps, checkpoints
