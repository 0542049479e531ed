"""``fedchain bench drift``: the honest floating-point drift behind the dispute tolerances.

Two computations are re-run by someone other than who ran them first:

* training: a client (or an arbiter) re-executes a fog node's job
  (:mod:`fedchain.disputes.reexecution`); the fog node may have trained it with
  another engine (worker processes, stacked or vectorised gradients) and
  thread count. The figure is the relative distance between each engine's
  update and the sequential single-threaded one, over several jobs;
* scoring: a client or an arbiter re-scores a posted round
  (:class:`fedchain.audit.scores.ScoreReproduction`) on another machine. The
  figure is the largest quality difference (1e18 fixed point, shown as a
  fraction) between the round scored with 1 and with several torch threads,
  and with the evaluation split in other batch sizes.

It prints every figure next to the tolerance the product uses
(:data:`~fedchain.disputes.reexecution.UPDATE_TOLERANCE`,
:data:`~fedchain.disputes.judging.QUALITY_TOLERANCE`) and the ratio between
them. CPU only unless CUDA is present, where the GPU runs as one more engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import click
import torch

from fedchain.console import machine_json

log = logging.getLogger(__name__)

#: The drift benchmark's jobs: clients, samples per client.
JOBS, SAMPLES = 5, 600
#: Engines and thread counts a fog node may train with, on a CPU.
CPU_VARIANTS: tuple[tuple[str, int], ...] = (
    ("sequential", 2),
    ("stacked", 1),
    ("stacked", 2),
    ("vmap", 1),
    ("process", 2),
)


@dataclass(frozen=True)
class UpdateDrift:
    """How far one engine's updates are from the reference (sequential, 1 thread)."""

    model: str
    engine: str
    threads: int
    device: str
    #: The largest relative distance ||u - u_ref|| / ||u_ref|| over the jobs.
    largest: float


@dataclass(frozen=True)
class CheatDistance:
    """How far a fog node that did not train as told lands from the honest update."""

    model: str
    cheat: str
    #: The smallest relative distance over the jobs (the cheat hardest to tell from honest work).
    smallest: float


#: The cheats measured: what a fog node might commit instead of the job's honest update.
CHEATS = (
    "zero update",
    "half the samples",
    "another shuffle seed",
    "others' mean update plus noise (disguised free rider)",
)


@dataclass(frozen=True)
class QualityDrift:
    """How far one way of scoring a round is from the reference (1 thread, the default evaluation batch)."""

    model: str
    variant: str
    #: The largest |q - q_ref| over the clients, as a fraction (quality 1.0 = 1e18).
    largest: float


@contextlib.contextmanager
def _threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _jobs(data_root: str | None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from fedchain.data.datasets import load_dataset

    train = load_dataset("mnist", train=True, root=data_root)
    return [
        (train.images[i * SAMPLES : (i + 1) * SAMPLES], train.labels[i * SAMPLES : (i + 1) * SAMPLES])
        for i in range(JOBS)
    ]


def update_drift(model: str, data_root: str | None) -> list[UpdateDrift]:
    """Each engine's updates of the same jobs against the sequential single-threaded ones."""
    from fedchain.fl.params import flatten
    from fedchain.taskspec import TaskSpec
    from fedchain.trainer.trainer import Trainer

    spec = TaskSpec(dataset="mnist", model=model)
    jobs = _jobs(data_root)
    start = flatten(spec.initial_params(), spec.param_spec())[0]
    config = spec.train_config(1)

    def updates(engine: str, threads: int, device: str = "cpu") -> torch.Tensor:
        with Trainer(spec.model_spec(), engine=engine, device=device, threads=threads) as trainer:  # type: ignore[arg-type]
            result = trainer.train(start, jobs, client_ids=list(range(JOBS)), config=config)
        return result.updates(start).cpu().to(torch.float64)

    reference = updates("sequential", 1)
    variants = [(engine, threads, "cpu") for engine, threads in CPU_VARIANTS]
    if torch.cuda.is_available():
        variants += [("sequential", 1, "cuda"), ("stacked", 1, "cuda")]
    rows = []
    for engine, threads, device in variants:
        other = updates(engine, threads, device)
        distances = (other - reference).norm(dim=1) / reference.norm(dim=1)
        rows.append(UpdateDrift(model, engine, threads, device, float(distances.max())))
        log.info("%s %s x%d on %s: %.3g", model, engine, threads, device, rows[-1].largest)
    return rows


def cheat_distances(model: str, data_root: str | None) -> list[CheatDistance]:
    """How far each cheat of :data:`CHEATS` lands from the honest (sequential) update, job by job."""
    from fedchain.fl.params import flatten
    from fedchain.taskspec import TaskSpec
    from fedchain.trainer.trainer import Trainer

    spec = TaskSpec(dataset="mnist", model=model)
    jobs = _jobs(data_root)
    start = flatten(spec.initial_params(), spec.param_spec())[0]
    config = spec.train_config(1)
    with Trainer(spec.model_spec(), engine="sequential", device="cpu") as trainer:
        honest = (
            trainer.train(start, jobs, client_ids=list(range(JOBS)), config=config).updates(start).to(torch.float64)
        )
        half = [(x[: SAMPLES // 2], y[: SAMPLES // 2]) for x, y in jobs]
        halved = (
            trainer.train(start, half, client_ids=list(range(JOBS)), config=config).updates(start).to(torch.float64)
        )
        reseeded = (
            trainer.train(
                start,
                jobs,
                client_ids=list(range(JOBS)),
                config=dataclasses.replace(config, seed=config.seed + 1),
            )
            .updates(start)
            .to(torch.float64)
        )
    generator = torch.Generator().manual_seed(0)
    others = torch.stack([torch.cat([honest[:i], honest[i + 1 :]]).mean(dim=0) for i in range(JOBS)])
    noise = torch.randn(others.shape, generator=generator, dtype=torch.float64) * 0.1 * others.norm(dim=1, keepdim=True)
    noise /= others.shape[1] ** 0.5
    cheats = (torch.zeros_like(honest), halved, reseeded, others + noise)
    scale = honest.norm(dim=1)
    return [
        CheatDistance(model, name, float(((cheat - honest).norm(dim=1) / scale).min()))
        for name, cheat in zip(CHEATS, cheats, strict=True)
    ]


def quality_drift(model: str, data_root: str | None, threads: Sequence[int] = (2,)) -> list[QualityDrift]:
    """One round's qualities scored with more threads, and with the evaluation in other batch sizes."""
    from fedchain.aggregator.scoring import ClientInput, Evaluator, score_round
    from fedchain.fl.floor import DEFAULT_MIN_LOSS_REPUTATION, DEFAULT_MIN_QUALITY
    from fedchain.fl.params import flatten
    from fedchain.fl.registry import get_strategy
    from fedchain.taskspec import TaskSpec, load_validation
    from fedchain.trainer.evaluation import EVAL_BATCH_SIZE
    from fedchain.trainer.trainer import Trainer

    spec = TaskSpec(dataset="mnist", model=model)
    jobs = _jobs(data_root)
    start = flatten(spec.initial_params(), spec.param_spec())[0]
    with Trainer(spec.model_spec(), engine="sequential", device="cpu") as trainer:
        updates = trainer.train(start, jobs, client_ids=list(range(JOBS)), config=spec.train_config(1)).updates(start)
    clients = [ClientInput(update=u, data_size=SAMPLES, round_time=10) for u in updates]
    validation = load_validation(spec, data_root)

    def qualities(batch_size: int = EVAL_BATCH_SIZE) -> torch.Tensor:
        evaluator = Evaluator(spec.model_spec(), validation, "cpu", batch_size=batch_size)
        outcome = score_round(
            get_strategy(spec.strategy),
            start,
            clients,
            evaluator,
            None,
            screening=spec.screening,
            quality_floor=spec.floor_at(
                1, min_quality=DEFAULT_MIN_QUALITY, min_loss_reputation=DEFAULT_MIN_LOSS_REPUTATION
            ),
            data_credit=spec.data_credit,
            grace=spec.grace_rule(min_quality=DEFAULT_MIN_QUALITY),
        )
        return torch.tensor([m.quality for m in outcome.measurements], dtype=torch.float64) / 10**18

    with _threads(1):
        reference = qualities()
    rows = []
    for count in threads:
        with _threads(count):
            rows.append(QualityDrift(model, f"{count} threads", float((qualities() - reference).abs().max())))
    with _threads(1):
        for batch in (100, 1000):
            rows.append(
                QualityDrift(model, f"evaluation batch {batch}", float((qualities(batch) - reference).abs().max()))
            )
    return rows


@click.command(name="drift")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--model",
    "models",
    multiple=True,
    default=("lenet5", "cnn"),
    show_default=True,
    help="Models to measure (repeat the option).",
)
@click.option("--data-root", help="Dataset folder. [default: FEDCHAIN_DATA_ROOT]")
def drift(as_json: bool, models: tuple[str, ...], data_root: str | None) -> None:
    """Honest drift of re-executed training (engines, threads) and of re-scored qualities (threads, batches),
    against the tolerances of the disputes."""
    from fedchain.disputes.judging import QUALITY_TOLERANCE
    from fedchain.disputes.reexecution import UPDATE_TOLERANCE

    updates = [row for model in models for row in update_drift(model, data_root)]
    cheats = [row for model in models for row in cheat_distances(model, data_root)]
    qualities = [row for model in models for row in quality_drift(model, data_root)]
    if as_json:
        click.echo(
            machine_json(
                {
                    "update_tolerance": UPDATE_TOLERANCE,
                    "quality_tolerance": QUALITY_TOLERANCE,
                    "updates": [asdict(r) for r in updates],
                    "cheats": [asdict(r) for r in cheats],
                    "qualities": [asdict(r) for r in qualities],
                }
            )
        )
        return
    click.echo(
        f"re-executed training: largest relative distance to the sequential single-threaded update ({JOBS} jobs "
        f"of {SAMPLES} MNIST samples, round 1)"
    )
    for row in updates:
        click.echo(f"  {row.model:<7} {row.engine:<11} {row.threads} thread(s) {row.device:<5} {row.largest:10.3g}")
    click.echo("what a fog node that did not train as told commits: smallest relative distance to the honest update")
    for c in cheats:
        click.echo(f"  {c.model:<7} {c.cheat:<54} {c.smallest:10.3g}")
    click.echo(
        f"  update tolerance {UPDATE_TOLERANCE:g}: {_ratio(UPDATE_TOLERANCE, max(r.largest for r in updates))} the "
        f"largest honest drift, {_ratio(min(c.smallest for c in cheats), UPDATE_TOLERANCE)} below the nearest cheat"
    )
    click.echo("re-scored round: largest quality difference to 1 thread and the default evaluation batch")
    for q in qualities:
        click.echo(f"  {q.model:<7} {q.variant:<22} {q.largest:10.3g}")
    click.echo(
        f"  quality tolerance {QUALITY_TOLERANCE:g}: {_ratio(QUALITY_TOLERANCE, max(r.largest for r in qualities))} "
        "the largest drift"
    )


def _ratio(big: float, small: float) -> str:
    """``big / small`` in words: ``120 times``, ``0.38 times`` (two figures below 10), or ``above`` when ``small``
    is 0 (no drift at all)."""
    if small <= 0:
        return "above (none measured)"
    ratio = big / small
    return f"{ratio:,.0f} times" if ratio >= 10 else f"{ratio:.2g} times"  # 0.38 times: the drift passes the tolerance


__all__ = ["CheatDistance", "QualityDrift", "UpdateDrift", "cheat_distances", "drift", "quality_drift", "update_drift"]
