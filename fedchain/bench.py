"""``fedchain bench``: benchmark commands that print their figures.

Each benchmark lives beside what it measures; this group only gathers them.
"""

from __future__ import annotations

import click

from fedchain.cli import LazyGroup

BENCHMARKS: dict[str, tuple[str, str]] = {
    "gas": (
        "fedchain.chain.gasbench:gas",
        "Gas of posting one round for 10, 50 and 100 clients, and what batch calls save.",
    ),
    "train": ("fedchain.trainer.bench:train", "Samples/s of the FedChain trainer against the sequential loop."),
    "store": ("fedchain.store.bench:store", "Milliseconds to encode, store, fetch and check one update."),
    "demo": (
        "fedchain.system.bench:demo",
        "The demo at block times 0, 2 and 12 s: wall time, transactions, unbid jobs, missed rounds.",
    ),
    "aggregator": (
        "fedchain.aggregator.bench:aggregator",
        "Milliseconds of the aggregator's work on one round, per client count.",
    ),
    "drift": (
        "fedchain.disputes.drift:drift",
        "Honest float drift of re-scored rounds, against the entry dispute's quality tolerance.",
    ),
    "transcripts": (
        "fedchain.transcripts.bench:transcripts",
        "Honest segment drift of every engine's training transcripts and every cheat's catch, against the "
        "segment tolerance of fog challenges.",
    ),
}


@click.group(cls=LazyGroup, lazy=BENCHMARKS)
def bench() -> None:
    """Measure gas and training speed; every benchmark prints its figures (--json for machines)."""
