"""``--verify-scores``: re-run the aggregator's scoring of every round from the stored updates.

For round ``n`` the auditor takes what the aggregator had: the task spec
(``datasetId``), the global model the clients trained from (``modelId`` for
round 1, ``RoundPosted(n-1).modelHash`` after), every committed update of the
round (verified and decoded as the aggregator does, with the local losses fedave
needs, a malformed one counting as rejected), the data sizes from the auctions, the publisher's validation set
from the data root, and the strategy's state carried from the previous rounds
of this reproduction. It then calls the aggregator's own scoring function,
:func:`fedchain.aggregator.scoring.score_round`, and compares the posted
qualities, acceptances and accuracy with the reproduced ones. Evaluation runs
in floating point, so qualities match within a tolerance, not to the wei.

For a strategy that rewards in kind, every stored reward of the round
(``RewardsCommitted``) is compared with the reproduced one: their largest
parameter difference must be within the tolerance too. When the task's clients
train from their rewards, each client's start is its stored reward of the round
before (checked by ``store.rewards``), as the aggregator had it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fedchain.audit.auditor import DEFAULT_SCORE_TOLERANCE
from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import TaskHistory
from fedchain.audit.replay import replay_task
from fedchain.audit.report import RoundScore, ScoreVerification
from fedchain.audit.rewards import reward_events
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import RewardsCommitted
from fedchain.errors import FedchainError, UpdateRejected
from fedchain.fl.params import ParamSpec, flatten
from fedchain.store import BlobStore
from fedchain.store.digest import to_hex
from fedchain.units import WAD

if TYPE_CHECKING:
    import torch

    from fedchain.aggregator.scoring import ClientInput, QualityChoice
    from fedchain.taskspec import TaskSpec

log = logging.getLogger(__name__)



def verify_scores(
    task_id: int,
    events: Iterable[ChainEvent],
    store: BlobStore,
    *,
    tolerance: float = DEFAULT_SCORE_TOLERANCE,
    data_root: str | Path | None = None,
    device: str = "cpu",
    strategy: str | None = None,
    quality: QualityChoice = "auto",
) -> ScoreVerification:
    """Reproduce every posted round's scores.

    ``strategy`` and ``quality`` are what the aggregator ran with when it did not
    use the task spec's strategy (its ``--strategy``, ``--quality``; the spec's
    options go with the spec's strategy only, as in the aggregator).
    """
    events = list(events)
    history = replay_task(task_id, events).history
    commitments = reward_events(task_id, events)
    tally = Tally()
    limit = round(tolerance * WAD)
    try:
        rounds = tuple(_reproduce(history, commitments, store, tally, limit, data_root, device, strategy, quality))
    except FedchainError as err:
        tally.fail(CheckName.SCORES, f"cannot reproduce the scores: {str(err).splitlines()[0]}")
        rounds = ()
    if not history.rounds:
        tally.skip(CheckName.SCORES, "no round was posted")
    return ScoreVerification(tally=tally, rounds=rounds, tolerance=limit)


def _reproduce(
    history: TaskHistory, commitments: Mapping[int, RewardsCommitted], store: BlobStore, tally: Tally, limit: int,
    data_root: str | Path | None, device: str, strategy_name: str | None, quality_choice: QualityChoice,
) -> Iterable[RoundScore]:
    from fedchain.aggregator.scoring import ClientInput, Evaluator, quality_source, score_round, task_strategy
    from fedchain.taskspec import load_model, load_spec, load_validation

    task = history.task
    if task.params is None or not history.rounds:
        return
    spec = load_spec(store, task.params.dataset_id)
    name = strategy_name or spec.strategy
    strategy = task_strategy(name, None, spec)
    quality = quality_source(name, quality_choice)
    evaluator = Evaluator(spec.model_spec(), load_validation(spec, None if data_root is None else str(data_root)), device)
    param_spec = spec.param_spec()
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
            round_time = posted.measurements[client.index].round_time if commit is not None else None
            size = sizes.get(client.index, 0)
            entry = ClientInput(update=None, data_size=size, round_time=round_time, active=active)
            reason = None
            if active and commit is not None:
                entry, reason = _decoded_update(store, spec, param_spec, task.task_id, n, client.index,
                                                client.account, commit.update_hash, entry)
            rejections.append(reason)
            clients.append(entry)
        starts = None
        if spec.train_from == "reward" and n > 1:
            starts = global_params.expand(len(clients), -1).clone()
            for index, reward in _stored_rewards(history, commitments, store, spec, n - 1).items():
                starts[index] = reward.to(starts.dtype)
        outcome = score_round(
            strategy, global_params, clients, evaluator, state, quality=quality, screening=spec.screening,
            client_params=starts,
        )
        state, model_hash = outcome.state, posted.model_hash
        if outcome.rewards is not None and n in commitments:
            for index, stored in _stored_rewards(history, commitments, store, spec, n).items():
                gap = float((outcome.rewards[index] - stored.to(outcome.rewards.dtype)).abs().max())
                tally.require(
                    CheckName.SCORES, gap <= limit / WAD,
                    f"round {n} client {index}: the stored reward differs from the reproduced one by up to {gap:.3g} "
                    f"(tolerance {limit / WAD:g})",
                )
        reproduced: list[int | None] = []
        gaps = []
        for client, mine, theirs in zip(history.clients, outcome.measurements, posted.measurements, strict=True):
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
        largest = max([*gaps, accuracy_gap])
        yield RoundScore(
            n, tuple(m.quality for m in posted.measurements), tuple(reproduced), largest, largest <= limit, tuple(rejections)
        )


def _stored_rewards(
    history: TaskHistory, commitments: Mapping[int, RewardsCommitted], store: BlobStore, spec: TaskSpec, round_number: int
) -> dict[int, torch.Tensor]:
    """Client index -> its stored reward of ``round_number`` (flat), as listed by the round's committed list."""
    from fedchain.errors import RewardMissing
    from fedchain.rewards import load_reward, load_reward_list

    commitment = commitments.get(round_number)
    if commitment is None:
        raise RewardMissing(f"round {round_number} committed no rewards")
    task_id = history.task.task_id
    listed = load_reward_list(store, commitment.reward_list, task_id=task_id, round_number=round_number)
    accounts = {c.index: c.account for c in history.clients}
    return {
        index: flatten(
            load_reward(store, spec, digest, task_id=task_id, round_number=round_number, client_index=index,
                        client=accounts.get(index, "")),
            spec.param_spec(),
        )[0]
        for index, digest in listed.rewards
    }


def _decoded_update(
    store: BlobStore, spec: TaskSpec, param_spec: ParamSpec, task_id: int, round_number: int, index: int,
    account: str, update_hash: bytes, entry: ClientInput,
) -> tuple[ClientInput, str | None]:
    """``entry`` with the update (flat) and local losses as the aggregator decodes them, or unchanged with
    the reason code the update is rejected for."""
    from fedchain.taskspec import load_update

    try:
        decoded = load_update(store, spec, update_hash, task_id=task_id, round_number=round_number,
                              client_index=index, client=account, data_size=entry.data_size)
    except UpdateRejected as err:
        log.info("update %s of job %d round %d rejected (%s)", to_hex(update_hash), index, round_number, err.reason.value)
        return entry, err.reason.value
    update = flatten(decoded.params, param_spec)[0]
    return dataclasses.replace(entry, update=update, local_losses=decoded.local_losses), None
