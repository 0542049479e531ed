"""Rewards in kind in the running system: each client's rewarded model, in the store and proven on chain.

A task whose strategy rewards in kind (fedfaim, fedave, fair: :data:`fedchain.taskspec.REWARD_IN_KIND`)
gives every active client its own model each round (``RoundResult.rewards``).
The aggregator writes them, then commits them with the round:

* each reward is a payload like a global model (safetensors, named by the
  keccak256 of its bytes) whose metadata says ``kind="reward"``, the task, the
  round, the client's index (``job_id``) and address (:func:`reward_meta`);
* the round's :class:`RewardList` (canonical JSON: every client index with its
  reward hash) goes to the store as well;
* ``RoundLedger.postRound`` takes the Merkle root over (client index, reward
  hash) (:mod:`fedchain.chain.merkle`) and the list's hash, stores the root in
  one slot and emits ``RewardsCommitted``.

So anyone who knows a task id finds a round's list from the event, rebuilds the
tree from it, and proves a reward with ``RoundLedger.verifyReward``
(:func:`verified_reward`); the auditor checks every committed round this way.

Which model a fog node trains a client's next round from is the task spec's
``train_from`` (:data:`fedchain.taskspec.TrainFrom`): ``global`` (the default: the fair protocol of
DESIGN.md decouples training from rewards) or ``reward`` (the seeds' protocol:
the client's last committed reward, verified before training).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedchain.chain.merkle import RewardTree, find_reward
from fedchain.errors import (
    BlobCorrupted,
    BlobNotFound,
    BlobTooLarge,
    NoRewardsInKind,
    RewardError,
    RewardMissing,
    RewardNotVerified,
    UpdateRejected,
)
from fedchain.store.blobs import BlobStore
from fedchain.store.digest import parse_digest, to_hex
from fedchain.taskspec import gives_rewards

if TYPE_CHECKING:
    import torch

    from fedchain.agent.session import ChainSession
    from fedchain.chain.bindings import RewardsCommitted
    from fedchain.fl.params import Params
    from fedchain.taskspec import TaskSpec
    from fedchain.updates import UpdateMeta

#: Version tag of a stored reward list; a reader rejects any other.
LIST_FORMAT = "fedchain-rewards/1"
#: Largest reward list read from a store, bytes (about 80 bytes per client).
MAX_LIST_BYTES = 1 << 20


def require_rewards(spec: TaskSpec, task_id: int) -> None:
    """A :class:`NoRewardsInKind` unless task ``task_id``'s spec has a strategy that rewards in kind."""
    if not gives_rewards(spec.strategy):
        raise NoRewardsInKind(f"task {task_id} runs strategy {spec.strategy!r}, which gives no rewards in kind")


def reward_meta(spec: TaskSpec, task_id: int, round_number: int, client_index: int, client: str) -> UpdateMeta:
    """Metadata of client ``client_index``'s (address ``client``) rewarded model after ``round_number``."""
    from fedchain.updates import UpdateMeta

    return UpdateMeta(
        task_id=task_id, round=round_number, kind="reward", job_id=client_index, client=client, model=spec.model
    )


@dataclass(frozen=True)
class RewardList:
    """One round's rewards: ``(client index, reward hash)`` of every client that got one, by index."""

    task_id: int
    round: int
    rewards: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rewards", tuple(sorted((int(i), parse_digest(h)) for i, h in self.rewards)))

    @property
    def tree(self) -> RewardTree:
        """The Merkle tree whose root is posted on chain."""
        return RewardTree.of(self.rewards)

    def reward_hash(self, client_index: int) -> bytes:
        """Client ``client_index``'s reward hash; a :class:`RewardMissing` when it has none this round."""
        digest = find_reward(self.rewards, client_index)
        if digest is not None:
            return digest
        raise RewardMissing(
            f"client {client_index} has no reward in round {self.round} of task {self.task_id}",
            hint="a client removed from the task before the round gets no reward",
        )

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the bytes whose keccak256 ``RewardsCommitted`` names."""
        data = {
            "format": LIST_FORMAT,
            "task_id": self.task_id,
            "round": self.round,
            "rewards": [[index, to_hex(digest)] for index, digest in self.rewards],
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> RewardList:
        """Parse :meth:`to_bytes`'s output; anything else is a :class:`RewardError`."""
        try:
            fields = json.loads(data.decode("utf-8"))
            if fields.pop("format") != LIST_FORMAT or set(fields) != {"task_id", "round", "rewards"}:
                raise ValueError(f"not a {LIST_FORMAT} reward list")
            pairs = tuple((int(index), parse_digest(str(digest))) for index, digest in fields["rewards"])
            return cls(int(fields["task_id"]), int(fields["round"]), pairs)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise RewardError(f"a malformed reward list: {err}") from err


def put_rewards(
    store: BlobStore, spec: TaskSpec, task_id: int, round_number: int, rewards: Mapping[int, tuple[str, Params]]
) -> tuple[RewardList, bytes]:
    """Write every client's reward (index -> (address, params)) and the round's list; returns the list and its hash."""
    from fedchain.updates import store_update

    hashes = [
        (index, store_update(store, params, reward_meta(spec, task_id, round_number, index, client)))
        for index, (client, params) in sorted(rewards.items())
    ]
    listed = RewardList(task_id, round_number, tuple(hashes))
    return listed, store.put(listed.to_bytes())


def load_reward_list(store: BlobStore, list_hash: bytes | str, *, task_id: int, round_number: int) -> RewardList:
    """The reward list committed as ``list_hash``; a :class:`RewardMissing` when absent or damaged."""
    name = to_hex(parse_digest(list_hash))
    try:
        listed = RewardList.from_bytes(store.get(list_hash, max_bytes=MAX_LIST_BYTES))
    except (BlobNotFound, BlobCorrupted, BlobTooLarge) as err:
        raise RewardMissing(f"the reward list {name} of round {round_number}: {err.args[0]}") from err
    if (listed.task_id, listed.round) != (task_id, round_number):
        raise RewardNotVerified(
            f"the reward list {name} is for task {listed.task_id} round {listed.round}, not task {task_id} round {round_number}"
        )
    return listed


def load_reward(
    store: BlobStore,
    spec: TaskSpec,
    reward_hash: bytes | str,
    *,
    task_id: int,
    round_number: int,
    client_index: int,
    client: str,
) -> Params:
    """Fetch and check client ``client_index``'s rewarded model by its hash; a :class:`RewardMissing` when it cannot be had."""
    from fedchain.updates import fetch_update

    expected = reward_meta(spec, task_id, round_number, client_index, client)
    try:
        return fetch_update(
            store, reward_hash, spec.param_spec(), spec.max_payload_bytes(), expected_meta=expected
        ).params
    except UpdateRejected as err:
        raise RewardMissing(
            f"the reward {to_hex(parse_digest(reward_hash))} of client {client_index} in round {round_number}: "
            f"{err.args[0]} ({err.reason.value})"
        ) from err


@dataclass(frozen=True)
class Commitment:
    """A round's rewards as committed on chain (``RewardsCommitted``): what a client's proof is checked against."""

    task_id: int
    round: int
    #: The Merkle root over (client index, reward hash) of the round.
    rewards_root: bytes
    #: The hash of the round's :class:`RewardList` in the blob store.
    reward_list: bytes
    #: The block the commitment was mined in (forgotten when a reorganisation takes that block back).
    block_number: int

    @classmethod
    def of(cls, event: RewardsCommitted) -> Commitment:
        """The commitment a ``RewardsCommitted`` event makes."""
        return cls(event.task_id, event.round, bytes(event.rewards_root), bytes(event.reward_list), event.block_number)


class CommitmentBook:
    """The ``RewardsCommitted`` of one task that an agent has seen, kept in its JSON state.

    Agents record the events of the block ranges they handle (:meth:`record`), so finding a round's
    commitment reads no log twice, and a restarted agent has them all; when blocks are reorganised
    away, the agent's ``on_reorg`` calls :meth:`forget_after` and the new branch's events are recorded
    as they are handled again. ``table`` is the state's own dict (round -> root, list and block), changed in place.
    """

    def __init__(self, task_id: int, table: dict[str, dict[str, Any]]) -> None:
        self.task_id = task_id
        self.table = table

    def record(self, event: RewardsCommitted) -> None:
        """Keep ``event`` if it is of this book's task."""
        if event.task_id == self.task_id:
            entry = {"root": to_hex(event.rewards_root), "list": to_hex(event.reward_list), "block": event.block_number}
            self.table[str(event.round)] = entry

    def get(self, round_number: int) -> Commitment | None:
        """Round ``round_number``'s commitment, or None when none was seen (not posted yet, or no rewards)."""
        entry = self.table.get(str(round_number))
        return None if entry is None else self._commitment(round_number, entry)

    def commitments(self) -> list[Commitment]:
        """Every commitment seen, by round."""
        return [self._commitment(int(r), entry) for r, entry in sorted(self.table.items(), key=lambda e: int(e[0]))]

    def _commitment(self, round_number: int, entry: dict[str, Any]) -> Commitment:
        return Commitment(
            self.task_id, round_number, parse_digest(entry["root"]), parse_digest(entry["list"]), int(entry["block"])
        )

    def forget_after(self, block: int) -> list[int]:
        """Forget the commitments mined after ``block`` (reorganised away); returns their rounds."""
        gone = sorted(int(r) for r, entry in self.table.items() if int(entry["block"]) > block)
        for round_number in gone:
            del self.table[str(round_number)]
        return gone


def reward_commitments(session: ChainSession, task_id: int) -> dict[int, Commitment]:
    """Round -> the commitment of every round of task ``task_id`` that committed rewards, read from every log
    of the ledger since the deployment (for one-off commands; agents keep a :class:`CommitmentBook`)."""
    from fedchain.chain.bindings import RewardsCommitted
    from fedchain.chain.events import LogQuery, iter_events

    query = LogQuery(addresses=(session.contracts.round_ledger.address,), from_block=session.deployment.block_number)
    return {
        event.round: Commitment.of(event)
        for event in iter_events(session.w3, session.transactor.registry, query)
        if isinstance(event, RewardsCommitted) and event.task_id == task_id
    }


@dataclass(frozen=True)
class VerifiedReward:
    """A client's reward of one round, proven against the root on chain."""

    task_id: int
    round: int
    client_index: int
    reward_hash: bytes
    proof: tuple[bytes, ...]
    params: Params


def verify_listed(
    session: ChainSession, listed: RewardList, root: bytes, client_index: int
) -> tuple[bytes, tuple[bytes, ...]]:
    """Client ``client_index``'s (reward hash, proof) from ``listed``, checked against ``root`` by the contract's view."""
    tree = listed.tree
    if tree.root != root:
        raise RewardNotVerified(
            f"the reward list of task {listed.task_id} round {listed.round} builds root {to_hex(tree.root)}, "
            f"but the chain committed {to_hex(root)}"
        )
    reward_hash = listed.reward_hash(client_index)
    proof = tree.proof(client_index)
    if not session.contracts.round_ledger.verify_reward(
        listed.task_id, listed.round, client_index, reward_hash, list(proof)
    ):
        raise RewardNotVerified(
            f"RoundLedger.verifyReward refused client {client_index}'s reward of round {listed.round}"
        )
    return reward_hash, proof


def verified_reward(
    session: ChainSession,
    spec: TaskSpec,
    commitment: Commitment,
    client_index: int,
    client: str,
) -> VerifiedReward:
    """Client ``client_index``'s reward of the round ``commitment`` names: listed, proven on chain, fetched and checked."""
    task_id, round_number = commitment.task_id, commitment.round
    listed = load_reward_list(session.store, commitment.reward_list, task_id=task_id, round_number=round_number)
    reward_hash, proof = verify_listed(session, listed, commitment.rewards_root, client_index)
    params = load_reward(
        session.store,
        spec,
        reward_hash,
        task_id=task_id,
        round_number=round_number,
        client_index=client_index,
        client=client,
    )
    return VerifiedReward(task_id, round_number, client_index, reward_hash, proof, params)


@dataclass(frozen=True)
class RewardRow:
    """What ``fedchain client reward`` shows of one round's reward."""

    round: int
    reward_hash: bytes
    #: Whether the list rebuilds the root on chain and ``RoundLedger.verifyReward`` accepts the proof.
    verified: bool
    #: The reward's accuracy on the task's validation set, when asked for (and verified).
    accuracy: float | None = None


def client_rewards(
    session: ChainSession,
    task_id: int,
    client: str,
    *,
    round_number: int | None = None,
    accuracy: bool = False,
    data_root: str | None = None,
) -> list[RewardRow]:
    """Client ``client``'s rewards of task ``task_id`` (every committed round, or ``round_number``), each proven on chain.

    Raises :class:`NoRewardsInKind` for a task without them, :class:`RewardMissing` when a round committed
    none or a reward is not in the store; a reward that does not verify is a row with ``verified`` False.
    """
    from fedchain.taskspec import load_spec

    spec = load_spec(session.store, session.contracts.task_registry.params(task_id).dataset_id)
    require_rewards(spec, task_id)
    index = session.contracts.round_ledger.client_index(task_id, client)
    commitments = reward_commitments(session, task_id)
    rounds = sorted(commitments) if round_number is None else [round_number]
    missing = [r for r in rounds if r not in commitments]
    if not rounds or missing:
        which = f"round {missing[0]}" if missing else "any round"
        raise RewardMissing(
            f"task {task_id} has no rewards committed for {which} (rounds with rewards: {sorted(commitments) or 'none yet'})",
            hint="a round's rewards are committed when the aggregator posts it; wait for it, or pick a listed round",
        )
    evaluate = _validation_evaluator(spec, data_root) if accuracy else None
    rows = []
    for r in rounds:
        listed = load_reward_list(session.store, commitments[r].reward_list, task_id=task_id, round_number=r)
        try:
            reward_hash, _ = verify_listed(session, listed, commitments[r].rewards_root, index)
        except RewardNotVerified:
            rows.append(RewardRow(r, listed.reward_hash(index), verified=False))
            continue
        score = None
        if evaluate is not None:
            params = load_reward(
                session.store, spec, reward_hash, task_id=task_id, round_number=r, client_index=index, client=client
            )
            score = evaluate(params)
        rows.append(RewardRow(r, reward_hash, verified=True, accuracy=score))
    return rows


def _validation_evaluator(spec: TaskSpec, data_root: str | None) -> Callable[[Params], float]:
    """Accuracy of a model of ``spec`` on the task's validation set."""
    from fedchain.aggregator.scoring import Evaluator
    from fedchain.fl.params import flatten
    from fedchain.taskspec import load_validation

    evaluator = Evaluator(spec.model_spec(), load_validation(spec, data_root))
    return lambda params: evaluator(flatten(params, spec.param_spec())[0]).accuracy


def stacked_rewards(rewards: torch.Tensor | None, active: Sequence[bool]) -> dict[int, torch.Tensor]:
    """Index -> flat rewarded model of every active client (rows of ``rewards`` ``[n, d]``; none when it is None)."""
    if rewards is None:
        return {}
    return {index: rewards[index] for index, keep in enumerate(active) if keep}


__all__ = [
    "LIST_FORMAT",
    "Commitment",
    "CommitmentBook",
    "RewardList",
    "RewardRow",
    "VerifiedReward",
    "client_rewards",
    "load_reward",
    "load_reward_list",
    "put_rewards",
    "require_rewards",
    "reward_commitments",
    "reward_meta",
    "verified_reward",
    "verify_listed",
]
