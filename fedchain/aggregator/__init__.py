"""The aggregator of a task: fetch and verify updates, score, aggregate, post one transaction per round.

``fedchain aggregator run --task ID`` (:mod:`fedchain.aggregator.cli`) runs
:class:`Aggregator`; :func:`score_round` is one round's arithmetic on its own.
"""

from fedchain.aggregator.scoring import ClientInput, Evaluator, RoundOutcome, quality_source, score_round
from fedchain.aggregator.service import Aggregator, AggregatorSettings

__all__ = ["Aggregator", "AggregatorSettings", "ClientInput", "Evaluator", "RoundOutcome", "quality_source", "score_round"]
