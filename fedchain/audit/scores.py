"""``--verify-scores``: re-run the aggregator's scoring of every round from the stored updates.

For round ``n`` the auditor takes what the aggregator had: the task spec
(``datasetId``), the global model the clients trained from (``modelId`` for
round 1, ``RoundPosted(n-1).modelHash`` after), every committed update of the
round (verified and decoded as the aggregator does, a malformed one counting as
rejected), the data sizes from the auctions, the publisher's validation set
from the data root, and the strategy's state carried from the previous rounds
of this reproduction. It then calls the aggregator's own scoring function,
:func:`fedchain.aggregator.scoring.score_round`, and compares the posted
qualities, acceptances and accuracy with the reproduced ones. Evaluation runs
in floating point, so qualities match within a tolerance, not to the wei.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable

import torch

from fedchain.audit.auditor import DEFAULT_SCORE_TOLERANCE
from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import TaskHistory
from fedchain.audit.replay import replay_task
from fedchain.audit.report import RoundScore, ScoreVerification
from fedchain.chain.abi import ChainEvent
from fedchain.errors import FedchainError, UpdateRejected
from fedchain.fl.params import ParamSpec, flatten
from fedchain.store import BlobStore
from fedchain.store.digest import to_hex
from fedchain.updates import UpdateMeta, fetch_update

log = logging.getLogger(__name__)

WAD = 10**18


def verify_scores(
    task_id: int,
    events: Iterable[ChainEvent],
    store: BlobStore,
    *,
    tolerance: float = DEFAULT_SCORE_TOLERANCE,
    data_root: str | Path | None = None,
    device: str = "cpu",
    strategy: str | None = None,
    quality: str = "auto",
) -> ScoreVerification:
    """Reproduce every posted round's scores.

    ``strategy`` and ``quality`` are what the aggregator ran with when it did not
    use the task spec's strategy (its ``--strategy``, ``--quality``; the spec's
    options go with the spec's strategy only, as in the aggregator).
    """
    history = replay_task(task_id, events).history
    tally = Tally()
    limit = int(round(tolerance * WAD))
    try:
        rounds = tuple(_reproduce(history, store, tally, limit, data_root, device, strategy, quality))
    except FedchainError as err:
        tally.fail(CheckName.SCORES, f"cannot reproduce the scores: {str(err).splitlines()[0]}")
        rounds = ()
    if not history.rounds:
        tally.skip(CheckName.SCORES, "no round was posted")
    return ScoreVerification(tally=tally, rounds=rounds, tolerance=limit)


def _reproduce(
    history: TaskHistory, store: BlobStore, tally: Tally, limit: int, data_root: str | Path | None, device: str,
    strategy_name: str | None, quality_choice: str,
) -> Iterable[RoundScore]:
    from fedchain.aggregator.scoring import ClientInput, Evaluator, check_supported, quality_source, score_round
    from fedchain.fl.strategy import get_strategy
    from fedchain.taskspec import load_model, load_spec, load_validation, update_meta

    task = history.task
    if task.params is None or not history.rounds:
        return
    spec = load_spec(store, task.params.dataset_id)
    name = strategy_name or spec.strategy
    check_supported(name)
    strategy = get_strategy(name, **(dict(spec.strategy_options) if name == spec.strategy else {}))
    quality = quality_source(name, quality_choice)  # type: ignore[arg-type]
    evaluator = Evaluator(spec.model_spec(), load_validation(spec, None if data_root is None else str(data_root)), device)
    param_spec, max_bytes = spec.param_spec(), spec.max_payload_bytes()
    sizes = {a.client_index: a.data_size for a in history.auctions}
    commits = {(c.client_index, c.round): c for c in history.commits}
    model_hash, state = task.params.model_id, None
    log.info("reproducing %d rounds of task %d with %s (%s quality)", len(history.rounds), task.task_id, name, quality)
    for posted in history.rounds:
        n = posted.round
        global_params = flatten(
            load_model(store, spec, model_hash, task_id=task.task_id, round_number=n - 1), param_spec
        )[0]
        clients, rejections = [], []
        for client in history.clients:
            active = client.removed_round is None or client.removed_round >= n
            commit = commits.get((client.index, n))
            update, reason = None, None
            if active and commit is not None:
                expected = update_meta(spec, task.task_id, n, client.index, client.account)
                update, reason = _decoded_update(store, commit.update_hash, expected, param_spec, max_bytes)
            rejections.append(reason)
            round_time = posted.measurements[client.index].round_time if commit is not None else None
            size = sizes.get(client.index, 0)
            clients.append(ClientInput(update=update, data_size=size, round_time=round_time, active=active))
        outcome = score_round(strategy, global_params, clients, evaluator, state, quality=quality)
        state, model_hash = outcome.state, posted.model_hash
        reproduced: list[int | None] = []
        gaps = []
        for client, mine, theirs in zip(history.clients, outcome.measurements, posted.measurements):
            if not posted.scored[client.index]:
                reproduced.append(None)
                continue
            reproduced.append(mine.quality)
            gaps.append(abs(mine.quality - theirs.quality))
            tally.require(
                CheckName.SCORES, mine.accepted == theirs.accepted,
                f"round {n} client {client.index}: posted as {'accepted' if theirs.accepted else 'rejected'}, "
                f"reproduced as {'accepted' if mine.accepted else 'rejected'}",
            )
            tally.require(
                CheckName.SCORES, abs(mine.quality - theirs.quality) <= limit,
                f"round {n} client {client.index}: posted quality {theirs.quality / WAD:.6f}, "
                f"reproduced {mine.quality / WAD:.6f} (tolerance {limit / WAD:g})",
            )
        accuracy_gap = abs(outcome.accuracy_wad - posted.accuracy)
        tally.require(
            CheckName.SCORES, accuracy_gap <= limit,
            f"round {n}: posted accuracy {posted.accuracy / WAD:.6f}, reproduced {outcome.accuracy_wad / WAD:.6f}",
        )
        largest = max(gaps + [accuracy_gap])
        yield RoundScore(
            n, tuple(m.quality for m in posted.measurements), tuple(reproduced), largest, largest <= limit, tuple(rejections)
        )


def _decoded_update(
    store: BlobStore, update_hash: bytes, expected: UpdateMeta, param_spec: ParamSpec, max_bytes: int
) -> tuple[torch.Tensor | None, str | None]:
    """The update as the aggregator decodes it (flat), or None with the reason code it is rejected for."""
    try:
        decoded = fetch_update(store, update_hash, param_spec, max_bytes, expected_meta=expected)
    except UpdateRejected as err:
        log.info("update %s of job %s round %d rejected (%s)",
                 to_hex(update_hash), expected.job_id, expected.round, err.reason.value)
        return None, err.reason.value
    return flatten(decoded.params, param_spec)[0], None
