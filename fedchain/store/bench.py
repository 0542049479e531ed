"""``fedchain bench store``: how long an update takes to encode, store, fetch and check.

Prints, per payload size, the median over ``--repeat`` runs of each stage an
update goes through between a fog node and the aggregator. The figures depend
on the machine and the store (a folder here unless ``--store`` names another).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

import click
import torch

from fedchain.console import machine_json
from fedchain.fl.params import ParamSpec
from fedchain.store.blobs import BlobStore
from fedchain.store.digest import keccak256
from fedchain.updates import UpdateMeta, decode_update, encode_update, fetch_update, store_update

#: Payload sizes measured by default: about an MNIST CNN (1.7 MB) and a ResNet-18 (45 MB).
DEFAULT_PARAMS = (431_080, 11_200_000)


def _median_ms(work: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``work`` in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(store: BlobStore, n_params: int, repeat: int) -> dict[str, float]:
    """Milliseconds per stage for one float32 update of ``n_params`` scalars."""
    params = {"weight": torch.randn(n_params, generator=torch.Generator().manual_seed(0))}
    spec = ParamSpec.of(params)
    meta = UpdateMeta(task_id=1, round=1, job_id=1, client="0x" + "00" * 20, model="bench")
    data = encode_update(params, meta)
    digest = store_update(store, params, meta)
    limit = len(data)
    return {
        "params": n_params,
        "megabytes": len(data) / 1e6,
        "encode_ms": _median_ms(lambda: encode_update(params, meta), repeat),
        "keccak256_ms": _median_ms(lambda: keccak256(data), repeat),
        "put_ms": _median_ms(lambda: store.put(data), repeat),
        "get_verified_ms": _median_ms(lambda: store.get(digest, max_bytes=limit), repeat),
        "decode_checked_ms": _median_ms(lambda: decode_update(data, digest, spec, limit), repeat),
        "fetch_update_ms": _median_ms(lambda: fetch_update(store, digest, spec, limit), repeat),
    }


@click.command("store")
@click.option("--store", "store_url", default=None, help="Blob store URL to measure (default: a temporary folder).")
@click.option("--params", "sizes", type=int, multiple=True, help="Scalars per update (repeatable).")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Runs per stage.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def store(store_url: str | None, sizes: tuple[int, ...], repeat: int, as_json: bool) -> None:
    """Milliseconds to encode, hash, put, get, decode and fetch one update, per update size."""
    with tempfile.TemporaryDirectory(prefix="fedchain-bench-store-") as folder:
        blob_store = BlobStore.open(store_url or folder)
        rows = [measure(blob_store, n, repeat) for n in (sizes or DEFAULT_PARAMS)]
    if as_json:
        click.echo(machine_json({"store": store_url or "temporary folder", "repeat": repeat, "rows": rows}))
        return
    columns = list(rows[0])
    click.echo(f"blob store: {store_url or 'temporary folder'}; median of {repeat} runs; times in ms")
    click.echo("  ".join(f"{c:>17}" for c in columns))
    for row in rows:
        click.echo("  ".join(f"{row[c]:>17,.1f}" if isinstance(row[c], float) else f"{row[c]:>17,}" for c in columns))
