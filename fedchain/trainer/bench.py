"""``fedchain bench train``: samples per second of the FedChain trainer against the plain PyTorch loop.

The workload is the issue's: N clients x M MNIST-shaped samples, LeNet-5,
batch 32, one local epoch per round, SGD. Each round both contenders train
every client from the same global model:

* the plain loop: what a researcher writes, one client after another, a
  fresh model and ``torch.optim.SGD`` per client, batches from
  ``DataLoader(TensorDataset(x, y), batch_size, shuffle=True)``, with torch's
  threads over all usable cores;
* FedChain's sequential engine (tensor indexing instead of a DataLoader), as
  a second reference;
* the FedChain trainer with the chosen engine (``auto``: worker processes on a
  CPU, vectorised clients on a GPU);
* with ``--flower``, Flower's simulation engine (Ray) training the plain
  loop's clients (:mod:`fedchain.trainer.flower_baseline`), after the others:
  it runs its rounds in one go.

Rounds alternate between the contenders so that they see the same machine
load; the first round of each is a warm-up and not counted. Worker start-up
is reported separately. Figures are medians over rounds.
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from fedchain.console import machine_json
from fedchain.data.datasets import DATA_ROOT_ENV, load_dataset
from fedchain.data.partition import iid
from fedchain.errors import ConfigError, DataError
from fedchain.fl.params import ParamSpec, unflatten
from fedchain.models.registry import ModelSpec
from fedchain.trainer.config import ENGINES, Engine, TrainConfig
from fedchain.trainer.device import resolve_device
from fedchain.trainer.flower_baseline import FLOWER_VERSION, flower_round_seconds, require_flower
from fedchain.trainer.plain import fit_client
from fedchain.trainer.pool import available_cores
from fedchain.trainer.trainer import Trainer, initial_params

log = logging.getLogger(__name__)

Clients = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Contender:
    """One contender's figures."""

    name: str
    seconds_per_round: float
    samples_per_second: float
    rounds: tuple[float, ...]
    #: CPU seconds per round (this process and the workers, median), or None where unknown.
    cpu_seconds_per_round: float | None
    #: Samples per CPU second: efficiency independent of how busy the machine is.
    samples_per_cpu_second: float | None


def _workload(clients: int, samples: int, data_root: str | None, seed: int) -> tuple[Clients, str]:
    """Real MNIST training samples split IID when a data root is known, else MNIST-shaped random data."""
    if data_root or os.environ.get(DATA_ROOT_ENV):
        try:
            mnist = load_dataset("mnist", root=data_root)
        except DataError as err:
            log.warning("falling back to random data: %s", err)
        else:
            if clients * samples <= len(mnist):
                chosen = np.random.default_rng(seed).permutation(len(mnist))[: clients * samples]
                parts = iid(np.zeros(len(chosen)), clients, seed=seed)
                return [
                    (mnist.images[chosen[p]].contiguous(), mnist.labels[chosen[p]].contiguous()) for p in parts
                ], "real MNIST training samples"
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(samples, 1, 28, 28, generator=generator), torch.randint(0, 10, (samples,), generator=generator))
        for _ in range(clients)
    ], "MNIST-shaped random data (no data root)"


def _plain_round(
    spec: ModelSpec, start: torch.Tensor, clients: Clients, config: TrainConfig, device: torch.device
) -> None:
    """The plain PyTorch loop over all clients, one after another."""
    model = spec.build().to(device)
    global_state = unflatten(start.to(device), ParamSpec.of(model.state_dict()))
    for client, (images, labels) in enumerate(clients):
        model.load_state_dict(global_state)
        fit_client(model, images.to(device), labels.to(device), config, config.seed + client)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _cpu_seconds(pids: list[int]) -> float | None:
    """CPU seconds used so far by this process and the processes ``pids`` (Linux /proc), else None."""
    total = time.process_time()
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def _timed(run: Callable[[], object], device: torch.device, pids: list[int]) -> tuple[float, float | None]:
    """(wall seconds, CPU seconds) of ``run``."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    cpu_before = _cpu_seconds(pids)
    began = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - began
    cpu_after = _cpu_seconds(pids)
    return wall, (cpu_after - cpu_before) if cpu_before is not None and cpu_after is not None else None


def _contender(name: str, times: list[float], cpu: list[float | None], samples: int) -> Contender:
    median = statistics.median(times)
    known = [c for c in cpu if c is not None]
    cpu_median = statistics.median(known) if len(known) == len(cpu) and known else None
    return Contender(
        name,
        median,
        samples / median,
        tuple(round(t, 4) for t in times),
        cpu_median,
        samples / cpu_median if cpu_median else None,
    )


def run_train_bench(
    *,
    clients: int = 20,
    samples: int = 600,
    rounds: int = 5,
    engine: Engine = "auto",
    batch_size: int = 32,
    device: str | None = None,
    data_root: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    seed: int = 0,
    flower: bool = False,
) -> dict:
    """Run the benchmark and return its figures as a JSON-ready dict (``flower``: Flower as a fourth contender)."""
    if flower:
        if device not in (None, "auto", "cpu"):
            raise ConfigError(
                f"the Flower contender runs on the CPU, not {device}", hint="add --device cpu to compare with Flower"
            )
        device = "cpu"
        require_flower()
    torch_device = resolve_device(device)
    data, source = _workload(clients, samples, data_root, seed)
    spec = ModelSpec("lenet5")
    # Plain SGD with momentum, no gradient clip: the workload every contender has run since the first measurement.
    config = TrainConfig(lr=0.01, momentum=0.9, batch_size=batch_size, local_epochs=1, max_grad_norm=None, seed=seed)
    start = initial_params(spec, seed)
    cores = available_cores()
    threads = threads or cores
    load_before = os.getloadavg()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        fast = Trainer(spec, config, engine=engine, device=torch_device, workers=workers)
        reference = Trainer(spec, config, engine="sequential", device=torch_device)
        with fast:
            fast.start()
            startup = fast.pool.start_seconds if fast.pool is not None else 0.0
            timings: dict[str, list[float]] = {"plain": [], "sequential": [], "fedchain": []}
            cpu: dict[str, list[float | None]] = {"plain": [], "sequential": [], "fedchain": []}
            pids = fast.pool.pids if fast.pool is not None else []
            runs = {
                "plain": lambda: _plain_round(spec, start, data, config, torch_device),
                "sequential": lambda: reference.train(start, data),
                "fedchain": lambda: fast.train(start, data),
            }
            for round_index in range(rounds + 1):
                for name, run in runs.items():
                    seconds, cpu_seconds = _timed(run, torch_device, pids if name == "fedchain" else [])
                    if round_index > 0:  # round 0 warms up caches, allocators and kernels
                        timings[name].append(seconds)
                        cpu[name].append(cpu_seconds)
        flower_first = None
        if flower:
            flower_first, flower_times = flower_round_seconds(spec, start, data, config, rounds, actors=cores)
    finally:
        torch.set_num_threads(threads_before)
    total = clients * samples
    plain = _contender("plain PyTorch loop (DataLoader, torch.optim.SGD)", timings["plain"], cpu["plain"], total)
    sequential = _contender("FedChain sequential engine", timings["sequential"], cpu["sequential"], total)
    chosen = _contender(f"FedChain trainer ({fast.engine})", timings["fedchain"], cpu["fedchain"], total)
    report: dict[str, Any] = {
        "workload": {
            "clients": clients,
            "samples_per_client": samples,
            "model": "lenet5",
            "batch_size": batch_size,
            "local_epochs": 1,
            "rounds_measured": rounds,
            "data": source,
        },
        "machine": {
            "device": str(torch_device) if torch_device.type != "cuda" else torch.cuda.get_device_name(torch_device),
            "cpu": platform.processor() or platform.machine(),
            "usable_cores": cores,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "software": {"torch": torch.__version__, "python": platform.python_version()},
        "threads": {
            "plain_loop": threads,
            "sequential_engine": threads,
            "fedchain": (
                f"{fast.pool.workers} worker processes x {fast.pool.threads_per_worker} thread"
                if fast.pool is not None
                else f"{threads} threads in-process"
            ),
        },
        "engine": fast.engine,
        "worker_start_seconds": startup,
        "plain": asdict(plain),
        "sequential": asdict(sequential),
        "fedchain": asdict(chosen),
        "speedup_vs_plain": chosen.samples_per_second / plain.samples_per_second,
        "speedup_vs_sequential_engine": chosen.samples_per_second / sequential.samples_per_second,
    }
    if flower_first is not None:
        baseline = _contender(
            f"Flower {FLOWER_VERSION} simulation engine (Ray)", flower_times, [None] * len(flower_times), total
        )
        report["threads"]["flower"] = f"{cores} Ray actors x 1 thread"
        report["flower_first_round_seconds"] = flower_first
        report["flower"] = asdict(baseline)
        report["speedup_vs_flower"] = chosen.samples_per_second / baseline.samples_per_second
    return report


@click.command("train")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--clients", default=20, show_default=True, type=click.IntRange(1), help="Clients per round.")
@click.option("--samples", default=600, show_default=True, type=click.IntRange(1), help="Samples per client.")
@click.option(
    "--rounds", default=5, show_default=True, type=click.IntRange(1), help="Measured rounds (after one warm-up)."
)
@click.option(
    "--engine", default="auto", show_default=True, type=click.Choice(ENGINES), help="FedChain engine to measure."
)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(1))
@click.option("--device", default=None, help="cpu or cuda[:N] (default: cuda if available; cpu with --flower).")
@click.option(
    "--workers", default=None, type=click.IntRange(1), help="Processes of the process engine (default: usable cores)."
)
@click.option(
    "--threads",
    default=None,
    type=click.IntRange(1),
    help="torch threads of the in-process loops (default: usable cores).",
)
@click.option(
    "--data-root",
    default=None,
    type=click.Path(file_okay=False),
    help=f"MNIST location (default: ${DATA_ROOT_ENV}; random data without one).",
)
@click.option(
    "--flower",
    is_flag=True,
    help=f"Measure Flower {FLOWER_VERSION}'s simulation engine too (needs flwr[simulation]: make bench-flower).",
)
def train(
    as_json: bool,
    clients: int,
    samples: int,
    rounds: int,
    engine: Engine,
    batch_size: int,
    device: str | None,
    workers: int | None,
    threads: int | None,
    data_root: str | None,
    flower: bool,
) -> None:
    """Samples/s of the FedChain trainer against the plain sequential PyTorch loop (LeNet-5, MNIST-shaped)."""
    report = run_train_bench(
        clients=clients,
        samples=samples,
        rounds=rounds,
        engine=engine,
        batch_size=batch_size,
        device=device,
        data_root=data_root,
        workers=workers,
        threads=threads,
        flower=flower,
    )
    if as_json:
        click.echo(machine_json(report))
        return
    work, machine = report["workload"], report["machine"]
    click.echo(
        f"workload: {work['clients']} clients x {work['samples_per_client']} samples, LeNet-5, batch {work['batch_size']}, "
        f"1 local epoch, median of {work['rounds_measured']} rounds; data: {work['data']}"
    )
    click.echo(
        f"machine: {machine['device']}, {machine['usable_cores']} usable cores, torch {report['software']['torch']}, "
        f"load average {machine['load_average_before'][0]} -> {machine['load_average_after'][0]}"
    )
    threads_line = f"threads: plain loop {report['threads']['plain_loop']}, FedChain {report['threads']['fedchain']}"
    click.echo(threads_line + (f", Flower {report['threads']['flower']}" if "flower" in report else ""))
    if report["worker_start_seconds"]:
        click.echo(f"worker start-up (once, not counted): {report['worker_start_seconds']:.1f} s")
    if "flower" in report:
        click.echo(f"Flower's first round (actor start-up, not counted): {report['flower_first_round_seconds']:.1f} s")
    for key in ("plain", "sequential", "fedchain", "flower"):
        if key not in report:
            continue
        row = report[key]
        cpu_figure = f"{row['samples_per_cpu_second']:9.0f} samples/CPU-s" if row["samples_per_cpu_second"] else ""
        click.echo(
            f"  {row['name']:<50} {row['seconds_per_round']:7.3f} s/round {row['samples_per_second']:8.0f} samples/s {cpu_figure}"
        )
    click.echo(
        f"speed-up: {report['speedup_vs_plain']:.2f}x the plain loop, "
        f"{report['speedup_vs_sequential_engine']:.2f}x FedChain's sequential engine"
        + (f", {report['speedup_vs_flower']:.2f}x Flower" if "flower" in report else "")
    )
