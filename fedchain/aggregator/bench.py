"""``fedchain bench aggregator``: how long the aggregator's work on one round takes, per number of clients.

The stages between the fog commits and the post, without the chain: fetch and
check every update from the store, then evaluate every client's model on the
validation set, aggregate and score (:func:`~fedchain.aggregator.scoring.score_round`),
then write the new global model. Updates are random (the figures do not
depend on their values). Prints the median over ``--repeat`` runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import click
import torch

from fedchain.aggregator.scoring import ClientInput, Evaluator, quality_source, score_round
from fedchain.console import machine_json
from fedchain.fl.floor import DEFAULT_MIN_LOSS_REPUTATION, DEFAULT_MIN_QUALITY
from fedchain.fl.params import flatten, unflatten
from fedchain.fl.registry import get_strategy
from fedchain.store.blobs import BlobStore
from fedchain.taskspec import TaskSpec, ValidationSpec, load_validation, put_model, update_meta
from fedchain.updates import fetch_update, store_update

#: Client counts measured by default.
DEFAULT_CLIENTS = (5, 10, 20)


def measure(spec: TaskSpec, evaluator: Evaluator, store: BlobStore, n_clients: int, repeat: int) -> dict[str, float]:
    """Milliseconds per stage of one round of ``n_clients`` updates (medians over ``repeat`` runs)."""
    param_spec, limit = spec.param_spec(), spec.max_payload_bytes()
    generator = torch.Generator().manual_seed(n_clients)
    global_params = flatten(spec.initial_params(), param_spec)[0]
    client = "0x" + "00" * 20
    digests = [
        store_update(
            store,
            unflatten(torch.randn(global_params.numel(), generator=generator) * 1e-3, param_spec),
            update_meta(spec, 1, 1, i, client),
        )
        for i in range(n_clients)
    ]
    strategy = get_strategy(spec.strategy)
    stages: dict[str, list[float]] = {"fetch_check_ms": [], "score_ms": [], "publish_ms": []}
    for _ in range(repeat):
        start = time.perf_counter()
        updates = [
            flatten(
                fetch_update(store, d, param_spec, limit, expected_meta=update_meta(spec, 1, 1, i, client)).params,
                param_spec,
            )[0]
            for i, d in enumerate(digests)
        ]
        fetched = time.perf_counter()
        outcome = score_round(
            strategy,
            global_params,
            [ClientInput(u, 100, 10) for u in updates],
            evaluator,
            None,
            quality=quality_source(spec.strategy),
            quality_floor=spec.floor_at(
                1, min_quality=DEFAULT_MIN_QUALITY, min_loss_reputation=DEFAULT_MIN_LOSS_REPUTATION
            ),
            data_credit=spec.data_credit,
            grace=spec.grace_rule(min_quality=DEFAULT_MIN_QUALITY),
        )
        scored = time.perf_counter()
        put_model(store, spec, 1, 1, unflatten(outcome.global_params, param_spec))
        done = time.perf_counter()
        stages["fetch_check_ms"].append((fetched - start) * 1000)
        stages["score_ms"].append((scored - fetched) * 1000)
        stages["publish_ms"].append((done - scored) * 1000)
    row: dict[str, float] = {"clients": n_clients}
    row.update({name: statistics.median(times) for name, times in stages.items()})
    row["total_ms"] = row["fetch_check_ms"] + row["score_ms"] + row["publish_ms"]
    return row


@click.command("aggregator")
@click.option("--clients", "counts", type=click.IntRange(min=1), multiple=True, help="Clients per round (repeatable).")
@click.option("--model", default="cnn", show_default=True, help="Model of the task.")
@click.option("--strategy", default="fedavg", show_default=True, help="Aggregation strategy.")
@click.option(
    "--validation",
    "validation_size",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Validation samples (MNIST test split).",
)
@click.option("--device", default="cpu", show_default=True, help="Torch device for evaluation.")
@click.option("--data-root", help="Dataset folder. [default: $FEDCHAIN_DATA_ROOT]")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per client count.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def aggregator(
    counts: tuple[int, ...],
    model: str,
    strategy: str,
    validation_size: int,
    device: str,
    data_root: str | None,
    repeat: int,
    as_json: bool,
) -> None:
    """Milliseconds the aggregator spends on one round (fetch and check, score, publish), per number of clients."""
    spec = TaskSpec(model=model, strategy=strategy, validation=ValidationSpec(size=validation_size))
    evaluator = Evaluator(spec.model_spec(), load_validation(spec, data_root), device)
    with tempfile.TemporaryDirectory(prefix="fedchain-bench-aggregator-") as folder:
        store = BlobStore.open(folder)
        rows = [measure(spec, evaluator, store, n, repeat) for n in (counts or DEFAULT_CLIENTS)]
    setting = {
        "model": spec.model,
        "strategy": strategy,
        "validation": validation_size,
        "device": device,
        "repeat": repeat,
    }
    if as_json:
        click.echo(machine_json({**setting, "rows": rows}))
        return
    click.echo(", ".join(f"{k} {v}" for k, v in setting.items()) + "; medians in ms")
    columns = list(rows[0])
    click.echo("  ".join(f"{c:>15}" for c in columns))
    for row in rows:
        click.echo("  ".join(f"{row[c]:>15,.0f}" for c in columns))
