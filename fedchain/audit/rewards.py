"""Rewards in kind against the chain: every committed root is rebuilt from the store, every reward is there.

For a task whose strategy rewards in kind (:mod:`fedchain.rewards`), every posted
round must have committed a root (``RewardsCommitted``). The round's reward list
(named by the event) must be in the store; the Merkle tree rebuilt from it must
have the committed root; it must list every client active in the round once, and
no client whose removal was final when the round opened (one whose removal was
still pending then was rightly trained and may be listed); and every listed reward must be in the store intact (its bytes hash to its name) and
be a reward payload of its client, task and round with the model's tensors. The
``--verify-scores`` reproduction then recomputes each reward (:mod:`fedchain.audit.scores`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import TaskHistory
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import RewardsCommitted
from fedchain.errors import RewardError, StoreError, TaskSpecError
from fedchain.store import BlobStore, to_hex


def reward_events(task_id: int, events: Iterable[ChainEvent]) -> dict[int, RewardsCommitted]:
    """Round -> the task's ``RewardsCommitted`` event."""
    return {e.round: e for e in events if isinstance(e, RewardsCommitted) and e.task_id == task_id}


def active_in(history: TaskHistory, round_number: int) -> list[int]:
    """The indices of the clients still in the task when ``round_number`` was scored."""
    return [c.index for c in history.clients if c.removed_round is None or c.removed_round >= round_number]


def check_rewards(history: TaskHistory, commitments: Mapping[int, RewardsCommitted], store: BlobStore) -> Tally:
    """The ``store.rewards`` check (module docstring)."""
    from fedchain.rewards import load_reward, load_reward_list
    from fedchain.taskspec import gives_rewards, load_spec

    tally = Tally()
    params = history.task.params
    if params is None:
        tally.skip(CheckName.STORE_REWARDS, "the task has no parameters")
        return tally
    try:
        spec = load_spec(store, params.dataset_id)
    except (TaskSpecError, RewardError, StoreError) as err:  # missing or damaged: store.models fails on it
        tally.skip(CheckName.STORE_REWARDS, f"the task spec cannot be read: {str(err).splitlines()[0]}")
        return tally
    if not gives_rewards(spec.strategy):  # then no round may commit rewards
        for posted in history.rounds:
            event = commitments.get(posted.round)
            tally.require(
                CheckName.STORE_REWARDS,
                event is None,
                f"round {posted.round} committed rewards, but strategy {spec.strategy!r} gives none",
                event,
            )
        if not history.rounds:
            tally.skip(CheckName.STORE_REWARDS, "no round was posted")
        return tally
    accounts = {c.index: c.account for c in history.clients}
    in_task = {p.round: p.in_task_at_start for p in history.posted}
    for posted in history.rounds:
        n = posted.round
        commitment = commitments.get(n)
        if commitment is None:
            tally.fail(CheckName.STORE_REWARDS, f"round {n} committed no reward root")
            continue
        try:
            listed = load_reward_list(store, commitment.reward_list, task_id=history.task.task_id, round_number=n)
        except RewardError as err:
            tally.fail(CheckName.STORE_REWARDS, f"round {n}: {str(err).splitlines()[0]}", commitment)
            continue
        root = listed.tree.root
        tally.require(
            CheckName.STORE_REWARDS,
            root == commitment.rewards_root,
            f"round {n}: the stored reward list builds root {to_hex(root)}, "
            f"the chain committed {to_hex(commitment.rewards_root)}",
            commitment,
        )
        listed_clients = [index for index, _ in listed.rewards]
        active, allowed = active_in(history, n), in_task.get(n, ())
        tally.require(
            CheckName.STORE_REWARDS,
            listed_clients == sorted(set(listed_clients)) and set(active) <= set(listed_clients) <= set(allowed),
            f"round {n}: rewards listed for clients {listed_clients}; expected every active client {active} once, "
            f"and only clients still in the task when the round opened {list(allowed)}",
            commitment,
        )
        for index, digest in listed.rewards:
            problem = None
            try:
                load_reward(
                    store,
                    spec,
                    digest,
                    task_id=history.task.task_id,
                    round_number=n,
                    client_index=index,
                    client=accounts.get(index, ""),
                )
            except RewardError as err:
                problem = str(err).splitlines()[0]
            tally.require(CheckName.STORE_REWARDS, problem is None, f"round {n} client {index}: {problem}", commitment)
    if not history.rounds:
        tally.skip(CheckName.STORE_REWARDS, "no round was posted")
    return tally
