"""``IncentiveStrategy``: FedChain's scoring, screening, reputation and payments around any Flower strategy.

A Flower ``ServerApp`` keeps its own strategy (Flower's FedAvg, FedProx, FedAdam...) and wraps it::

    strategy = IncentiveStrategy(FedAvg(), FedChainServer.from_run_config(context.run_config))
    strategy.start(grid=grid, initial_arrays=strategy.initial_arrays(), num_rounds=strategy.rounds)

Each round, for a self-trained task (contracts/README.md, "Tasks trained by their own clients"):

1. ``configure_train``: the wrapped strategy samples the nodes and builds its messages; the nodes whose client
   the chain removed get none, and every message carries what a client signs (chain, ledger, task, round).
2. ``aggregate_train``: each reply's client is identified by its signed claim (:mod:`fedchain.flower.identity`),
   checked against the task's on-chain join; the update goes into FedChain's store (safetensors, content hash)
   and the claim beside it. Each client committed its update on chain as it replied (``commitOwnUpdate``): the
   round waits for those commits to be mined (or for the round's deadline), and a reply without one is a missed
   round (the chain, not this server, says who delivered and when). A committed update whose reply did not come
   is scored from the store, where the client put it with its claim. FedChain scores the round exactly as the aggregator of an auction task does
   (:func:`fedchain.aggregator.scoring.score_round`: decode, screen, quality). The wrapped strategy then
   aggregates the accepted updates only (a screened-out free rider moves neither the model nor the pay).
3. The round's model (the wrapped strategy's) goes into the store, and the round is handed to a
   :class:`RoundPoster`, which posts it on chain from its own thread, with the commits as the chain has them:
   the Flower loop waits for its clients' commits, never for a post.
   A reply with an error, or no reply, is a missed round (``committed = false``).

The global model the wrapped strategy produces is the one posted (its hash and validation accuracy), or with
``aggregate="fedchain"`` the model FedChain's own strategy (the task spec's) made; the scores do not depend on it, so ``fedchain audit --verify-scores`` reproduces every quality from the stored updates and
the posted models, and evaluates each posted model for its accuracy.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from fedchain.agent.chainloop import chain_now
from fedchain.chain.bindings import TaskStatus
from fedchain.errors import ConfigError, FedchainError, UpdateRejected
from fedchain.fl.params import flatten, unflatten
from fedchain.flower.identity import ReplyClaim, SignedReply, verify_reply
from fedchain.flower.poster import RoundPoster
from fedchain.flower.protocol import (
    CLAIM_RECORD,
    ROUND_KEYS,
    config_bytes,
    config_int,
    pin_reply,
    start_model_hash,
    stored_replies,
)
from fedchain.store.digest import to_hex
from fedchain.updates import update_hash

if TYPE_CHECKING:
    from fedchain.agent.session import ChainSession
    from fedchain.aggregator.scoring import ClientInput
    from fedchain.taskspec import TaskSpec

log = logging.getLogger(__name__)

__all__ = ["FedChainServer", "IncentiveStrategy"]

#: How often a round looks for its clients' commits while it waits for them, seconds.
COMMIT_POLL_S = 0.5


@dataclass(frozen=True)
class FedChainServer:
    """Where the task lives and who posts its rounds.

    Attributes:
        session: the chain and store, signing as the task's aggregator.
        task_id: the self-trained task this federation trains.
        data_root: folder with the validation dataset (None: ``$FEDCHAIN_DATA_ROOT``).
        device: torch device for the validation passes.
    """

    session: ChainSession
    task_id: int
    data_root: str | None = None
    device: str = "cpu"

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> FedChainServer:
        """The server side from a Flower run config (``fedchain-rpc-url``, ``fedchain-deployment``,
        ``fedchain-store``, ``fedchain-task``, optional ``fedchain-data-root``) and the aggregator's key in
        ``FEDCHAIN_PRIVATE_KEY`` (never in the run config: Flower ships it to every node)."""
        from eth_account import Account

        from fedchain.agent.session import open_session
        from fedchain.chain.keys import PRIVATE_KEY_ENV

        env = os.environ if env is None else env
        missing = [k for k in ("fedchain-deployment", "fedchain-store", "fedchain-task") if k not in run_config]
        if missing:
            raise ConfigError(
                f"the Flower run config lacks {', '.join(missing)}",
                hint="set them in [tool.flwr.app.config] or with flwr run --run-config",
            )
        key = env.get(PRIVATE_KEY_ENV)
        if not key:
            raise ConfigError(
                f"the ServerApp needs the aggregator's key in {PRIVATE_KEY_ENV}",
                hint="export it where the SuperLink (and so its ServerApp) runs",
            )
        rpc_url = str(run_config.get("fedchain-rpc-url", "")) or None
        session = open_session(
            Path(str(run_config["fedchain-deployment"])),
            rpc_url=rpc_url,
            store_url=str(run_config["fedchain-store"]),
            account=Account.from_key(key),
        )
        data_root = str(run_config.get("fedchain-data-root", "")) or None
        return cls(session, int(run_config["fedchain-task"]), data_root=data_root)


class IncentiveStrategy(Strategy):
    """Wraps a Flower strategy: FedChain identifies, stores, screens, scores and posts every round (module doc).

    ``aggregate``: ``wrapped`` (the default) keeps the wrapped strategy's model, made from the accepted updates;
    ``fedchain`` takes the model FedChain's own strategy (the task spec's: fedavg, quality, cgsv, fedfaim) made
    while scoring, and leaves the wrapped strategy its sampling, its configs, its metrics and its evaluation.
    """

    def __init__(
        self,
        inner: Strategy,
        server: FedChainServer,
        *,
        aggregate: Literal["wrapped", "fedchain"] = "wrapped",
        poster: RoundPoster | None = None,
    ) -> None:
        from fedchain.aggregator.scoring import Evaluator, quality_source, task_strategy
        from fedchain.taskspec import gives_rewards, load_spec, load_validation

        if aggregate not in ("wrapped", "fedchain"):
            raise ConfigError(f"aggregate must be 'wrapped' or 'fedchain', got {aggregate!r}")
        self.inner, self.server, self.aggregate = inner, server, aggregate
        session, task_id = server.session, server.task_id
        contracts = session.contracts
        self.params = contracts.task_registry.params(task_id)
        if not self.params.self_trained:
            raise ConfigError(
                f"task {task_id} is an auction task: fog nodes train its jobs and commit them on chain",
                hint="create the task with --self-trained (each client trains its own job) for a Flower federation",
            )
        self.spec: TaskSpec = load_spec(session.store, self.params.dataset_id)
        if gives_rewards(self.spec.strategy) or self.spec.train_from != "global":
            raise ConfigError(
                f"the task's strategy {self.spec.strategy} rewards in kind: each client would train its own model, "
                "and a Flower federation trains one",
                hint="use fedavg, quality, cgsv or fedfaim in the task spec",
            )
        self.param_spec = self.spec.param_spec()
        self.strategy = task_strategy(self.spec.strategy, None, self.spec)
        self.quality = quality_source(self.spec.strategy, "auto")
        self.evaluator = Evaluator(self.spec.model_spec(), load_validation(self.spec, server.data_root), server.device)
        self.poster = poster or RoundPoster(session, task_id)
        self.chain_id = int(session.w3.eth.chain_id)
        self.ledger = contracts.round_ledger.address
        #: Flower node id -> the client index it proved (a node id is not an identity; it only routes).
        self._nodes: dict[int, int] = {}
        self._state: Any = None
        self._start: ArrayRecord | None = None
        self._previous_start: torch.Tensor | None = None
        #: The hash of the current round's start model as the store files it (what each client signs it trained from).
        self._start_hash = bytes(self.params.model_id)

    # ------------------------------------------------------------------ set-up

    @property
    def rounds(self) -> int:
        """The task's number of rounds (the Flower run's ``num_rounds``)."""
        return int(self.params.rounds)

    def initial_arrays(self) -> ArrayRecord:
        """The task's initial model (its ``modelId`` in the store): round 1 trains from it."""
        from fedchain.taskspec import load_model

        params = load_model(self.server.session.store, self.spec, self.params.model_id, task_id=0, round_number=0)
        return ArrayRecord(torch_state_dict={name: tensor.clone() for name, tensor in params.items()})

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 0,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Flower's loop over the task's rounds from its initial model, then wait until every round is posted (the
        posts run beside the loop). ``num_rounds`` must be the task's (0: take them)."""
        posted, _ = self.server.session.contracts.round_ledger.rounds(self.server.task_id)
        count = self.server.session.contracts.round_ledger.client_count(self.server.task_id)
        committed = any(self.server.session.contracts.round_ledger.own_commit_times(self.server.task_id, 1, count))
        if posted or committed:
            raise ConfigError(
                f"task {self.server.task_id} already ran: round 1 is "
                f"{'posted' if posted else 'committed by a client'}, and a Flower run starts at round 1",
                hint="resuming a federation mid-task is not supported; create a new task for a new run",
            )
        if num_rounds not in (0, self.rounds):
            raise ConfigError(
                f"num_rounds={num_rounds}, but task {self.server.task_id} has {self.rounds} rounds",
                hint="pass num_rounds=strategy.rounds",
            )
        found = start_model_hash(initial_arrays.to_torch_state_dict(), self.spec.model, self.server.task_id, 1)
        if found != bytes(self.params.model_id):
            raise ConfigError(
                "initial_arrays are not the task's initial model (its modelId)",
                hint="start from strategy.initial_arrays()",
            )
        try:
            return super().start(
                grid,
                initial_arrays,
                num_rounds=self.rounds,
                timeout=timeout,
                train_config=train_config,
                evaluate_config=evaluate_config,
                evaluate_fn=evaluate_fn,
            )
        finally:
            self.poster.close()

    def summary(self) -> None:
        log.info("FedChain incentives on task %d (%s scoring) around:", self.server.task_id, self.spec.strategy)
        self.inner.summary()

    # ------------------------------------------------------------------ training

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._start = arrays
        if self.poster.task_over:  # finished early (its target accuracy) or ended: no more work for anyone
            log.info("task %d has ended: round %d sends no work", self.server.task_id, server_round)
            return []
        config = ConfigRecord(dict(config))
        config.update(
            {
                ROUND_KEYS["chain"]: self.chain_id,
                ROUND_KEYS["ledger"]: self.ledger,
                ROUND_KEYS["task"]: self.server.task_id,
                ROUND_KEYS["round"]: server_round,
                ROUND_KEYS["model"]: self.spec.model,
            }
        )
        return self._drop_removed(self.inner.configure_train(server_round, arrays, config, grid))

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        from fedchain.aggregator.scoring import score_round, task_floor, task_grace
        from fedchain.taskspec import put_model

        if self._start is None:
            raise ConfigError("aggregate_train came before configure_train", hint="run the strategy with start()")
        replies = list(replies)
        if self.poster.task_over:
            return None, None
        start = flatten(self._start.to_torch_state_dict(), self.param_spec)[0]
        clients, by_index = self._client_inputs(server_round, replies)
        outcome = score_round(
            self.strategy,
            start,
            clients,
            self.evaluator,
            self._state,
            quality=self.quality,
            screening=self.spec.screening,
            last_step=None if self._previous_start is None else start - self._previous_start,
            quality_floor=task_floor(self.spec, self.params, server_round),
            data_credit=self.spec.data_credit,
            grace=task_grace(self.spec, self.params),
        )
        accepted = [i for i, m in enumerate(outcome.measurements) if m.accepted]
        # The wrapped strategy sees the accepted replies only, each as the model its client trained.
        # Its weights are the signed data sizes, under the keys it reads: a client's own figures weigh nothing.
        weight_key = str(getattr(self.inner, "weighted_by_key", "num-examples"))
        arrays_key = str(getattr(self.inner, "arrayrecord_key", "arrays"))
        kept = []
        for index in accepted:
            if index not in by_index:  # scored from the store (its reply did not come): no reply to hand on
                continue
            reply, update = by_index[index]
            local = unflatten(start + update, self.param_spec)
            reported = next(iter(reply.content.metric_records.values()), MetricRecord())
            weighed = MetricRecord(
                {k: v for k, v in reported.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            )
            weighed[weight_key] = clients[index].data_size
            reply.content = RecordDict({arrays_key: ArrayRecord(torch_state_dict=local), "metrics": weighed})
            kept.append(reply)
        arrays, metrics = self.inner.aggregate_train(server_round, kept) if kept else (None, None)
        if self.aggregate == "fedchain":  # the task spec's strategy made the model (quality weights, cgsv...)
            arrays = ArrayRecord(torch_state_dict=unflatten(outcome.global_params, self.param_spec))
        model = self._start if arrays is None else arrays
        params = flatten(model.to_torch_state_dict(), self.param_spec)[0]
        accuracy = self.evaluator(params).accuracy
        model_hash = put_model(
            self.server.session.store,
            self.spec,
            self.server.task_id,
            server_round,
            unflatten(params, self.param_spec),
        )
        self.poster.submit(server_round, model_hash, accuracy, outcome.measurements)
        self._state, self._previous_start, self._start_hash = outcome.state, start, model_hash
        removed = [i for i, m in enumerate(outcome.measurements) if m.committed and not m.accepted]
        log.info(
            "round %d scored: %d replies, %d accepted, %d rejected, accuracy %.4f, model %s",
            server_round,
            len(by_index),
            len(accepted),
            len(removed),
            accuracy,
            to_hex(model_hash),
        )
        summary = MetricRecord(dict(metrics or {}))
        summary.update({"fedchain-accepted": len(accepted), "fedchain-rejected": len(removed)})
        return arrays, summary

    # ------------------------------------------------------------------ evaluation: the wrapped strategy's

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self._drop_removed(self.inner.configure_evaluate(server_round, arrays, config, grid))

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, replies)

    # ------------------------------------------------------------------ helpers

    def _drop_removed(self, messages: Iterable[Message]) -> list[Message]:
        """``messages`` less those to nodes whose client the chain removed: they get no more work."""
        ledger = self.server.session.contracts.round_ledger
        kept = []
        for message in messages:
            index = self._nodes.get(message.metadata.dst_node_id)
            if index is not None and not ledger.is_active(self.server.task_id, index):
                log.info(
                    "node %d (client %d) was removed by the chain: no more work", message.metadata.dst_node_id, index
                )
                continue
            kept.append(message)
        return kept

    def _client_inputs(
        self, server_round: int, replies: list[Message]
    ) -> tuple[list[ClientInput], dict[int, tuple[Message, torch.Tensor]]]:
        """Every joined client's input (None where it did not reply with a valid claim) and the usable replies."""
        from fedchain.aggregator.scoring import ClientInput

        session, task_id = self.server.session, self.server.task_id
        ledger = session.contracts.round_ledger
        count = ledger.client_count(task_id)
        clients = [
            ClientInput(update=None, data_size=0, round_time=None, active=ledger.is_active(task_id, i))
            for i in range(count)
        ]
        usable: dict[int, tuple[Message, torch.Tensor]] = {}
        claims: dict[int, SignedReply] = {}
        for reply in replies:
            try:
                self._take(server_round, reply, clients, usable, claims)
            except FedchainError as err:  # one node's bad reply, or a passing RPC failure: that reply is missed
                log.warning("node %d's reply to round %d not taken: %s", reply.metadata.src_node_id, server_round, err)
        replied = {index: signed.claim.update_hash for index, signed in claims.items()}
        commits = self._await_commits(server_round, replied)
        kept: dict[tuple[int, int], SignedReply] | None = None  # the claims clients put in the store, read once
        for index, client in enumerate(clients):
            if not client.active:
                continue
            committed = commits.get(index)
            if committed is None:
                if index in replied:
                    log.warning(
                        "client %d replied to round %d but did not commit it on chain: a missed round",
                        index,
                        server_round,
                    )
                clients[index] = ClientInput(update=None, data_size=0, round_time=None)
                usable.pop(index, None)
            elif replied.get(index) == committed:
                # The claim goes beside the update it signs, for the audit.
                pin_reply(session.store, task_id, server_round, index, claims[index])
            else:
                # Committed, but its reply did not come, or carried another update: the store may hold the committed
                # one with its claim (the client puts them there too). Else it is unusable, as a fog commit whose
                # update cannot be read is (accepted = false, quality 0), and the audit finds the same.
                usable.pop(index, None)
                if kept is None:
                    kept = stored_replies(session.store, task_id)
                clients[index] = self._from_store(server_round, index, committed, kept.get((server_round, index)))
        return clients, usable

    def _from_store(self, server_round: int, index: int, committed: bytes, signed: SignedReply | None) -> ClientInput:
        """Client ``index``'s committed update as the store holds it with the client's claim (scored, but not in
        the wrapped strategy's aggregate: Flower has no reply to hand it), else an unusable entry."""
        from fedchain.aggregator.scoring import ClientInput
        from fedchain.taskspec import load_update

        session, task_id = self.server.session, self.server.task_id
        unusable = ClientInput(update=None, data_size=0, round_time=0)
        ledger = session.contracts.round_ledger
        account = ledger.client(task_id, index).account
        try:
            if signed is None:
                raise UpdateRejected("no reply came, and the store holds no claim of the client's for it")
            claim = signed.claim
            # This round's claim, from this round's start model, for the committed update (its size and salt are
            # checked against the join's commitment).
            expected = ReplyClaim(
                chain_id=self.chain_id,
                ledger=self.ledger,
                task_id=task_id,
                round=server_round,
                start_model=self._start_hash,
                update_hash=committed,
                data_size=claim.data_size,
                salt=claim.salt,
            )
            verify_reply(signed, account=account, commitment=ledger.data_commitment(task_id, index), expected=expected)
            decoded = load_update(
                session.store,
                self.spec,
                committed,
                task_id=task_id,
                round_number=server_round,
                client_index=index,
                client=account,
                data_size=claim.data_size,
            )
        except UpdateRejected as err:
            log.warning("client %d committed round %d, but its update is not usable: %s", index, server_round, err)
            return unusable
        log.info("client %d's committed update of round %d scored from the store", index, server_round)
        update = flatten(decoded.params, self.param_spec)[0]
        return ClientInput(update=update, data_size=claim.data_size, round_time=0, local_losses=decoded.local_losses)

    def _await_commits(self, server_round: int, replied: Mapping[int, bytes]) -> dict[int, bytes]:
        """Client index -> update hash of every commit of ``server_round`` mined so far, once the commits of the
        replying clients, and those in flight (in the node's pending block: a client whose reply failed after it
        committed), are mined, or the round's deadline has passed on chain.

        Each client sends its commit before its reply, so this is usually at once, or a block later. Waiting for
        those commits up to the deadline keeps the round's scores the ones the audit reproduces: a commit mined
        after this look would be a committed entry this round did not score."""
        session, task_id = self.server.session, self.server.task_id
        contracts = session.contracts
        ledger = contracts.round_ledger
        count = ledger.client_count(task_id)
        told = False
        while True:
            block = session.w3.eth.block_number  # one block for every read: a consistent picture
            commits = {}
            for index in range(count):
                digest, at, _ = ledger.own_commit(task_id, server_round, index, block=block)
                if at:
                    commits[index] = bytes(digest)
            in_flight = {
                index
                for index in range(count)
                if index not in commits and ledger.own_commit(task_id, server_round, index, block="pending")[1]
            }
            awaited = sorted((set(replied) | in_flight) - set(commits))
            if not awaited:
                return commits
            state = contracts.task_registry.state(task_id, block=block)
            deadline = state.round_started_at + self.params.round_duration
            if state.status != TaskStatus.RUNNING or state.current_round > server_round:
                return commits
            if state.current_round == server_round and chain_now(session) > deadline:
                return commits  # too late to be mined now: those clients missed the round
            if not told:
                log.info("round %d: waiting for the commits of clients %s", server_round, awaited)
                told = True
            time.sleep(COMMIT_POLL_S)

    def _take(
        self,
        server_round: int,
        reply: Message,
        clients: list[ClientInput],
        usable: dict[int, tuple[Message, torch.Tensor]],
        claims: dict[int, SignedReply],
    ) -> None:
        """Take one reply: its client's input in ``clients``, its signed claim in ``claims`` and, when its update
        decodes, the update in ``usable``. Its round time is the chain's (the poster reads it from the commit)."""
        from fedchain.aggregator.scoring import ClientInput
        from fedchain.taskspec import load_update

        session, task_id = self.server.session, self.server.task_id
        if reply.has_error():
            log.info(
                "node %d failed round %d: %s (a missed round)",
                reply.metadata.src_node_id,
                server_round,
                reply.error.reason,
            )
            return
        claimed = self._verified(server_round, reply)
        if claimed is None:
            return
        index, account, signed, blob = claimed
        if index in claims:
            log.warning("client %d replied twice in round %d; the first reply counts", index, server_round)
            return
        self._nodes[reply.metadata.src_node_id] = index
        size = signed.claim.data_size
        if not clients[index].active:
            return
        stored = session.store.put(blob)
        claims[index] = signed
        try:
            decoded = load_update(
                session.store,
                self.spec,
                stored,
                task_id=task_id,
                round_number=server_round,
                client_index=index,
                client=account,
                data_size=size,
            )
        except UpdateRejected as err:
            log.warning("client %d's update rejected in round %d: %s", index, server_round, err.args[0])
            clients[index] = ClientInput(update=None, data_size=size, round_time=0)
            return
        update = flatten(decoded.params, self.param_spec)[0]
        clients[index] = ClientInput(update=update, data_size=size, round_time=0, local_losses=decoded.local_losses)
        usable[index] = (reply, update)

    def _verified(self, server_round: int, reply: Message) -> tuple[int, str, SignedReply, bytes] | None:
        """(client index, account, signed claim, update bytes) of a reply whose claim checks out, else None."""
        from fedchain.errors import ContractRevert

        record = reply.content.config_records.get(CLAIM_RECORD)
        node = reply.metadata.src_node_id
        if record is None:
            log.warning("node %d replied without FedChain's signed claim; ignored (use FedChainClient)", node)
            return None
        try:
            blob = config_bytes(record, "update")
            account = str(record["account"])
            claim = ReplyClaim(
                chain_id=self.chain_id,
                ledger=self.ledger,
                task_id=self.server.task_id,
                round=server_round,
                start_model=self._start_hash,
                update_hash=update_hash(blob),
                data_size=config_int(record, "data-size"),
                salt=config_bytes(record, "salt"),
            )
            signed = SignedReply(claim, config_bytes(record, "signature"))
        except (KeyError, TypeError, ValueError) as err:
            log.warning("node %d's claim is malformed (%s); ignored", node, err)
            return None
        ledger = self.server.session.contracts.round_ledger
        try:
            index = int(ledger.client_index(self.server.task_id, account))
        except ContractRevert:
            log.warning(
                "node %d claims to be %s, which did not join task %d; ignored", node, account, self.server.task_id
            )
            return None
        try:
            verify_reply(signed, account=account, commitment=ledger.data_commitment(self.server.task_id, index))
        except UpdateRejected as err:
            log.warning(
                "node %d's reply as client %d is not signed by it for this round and start model (%s); ignored",
                node,
                index,
                err.args[0],
            )
            return None
        return index, account, signed, blob
