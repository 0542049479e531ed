"""``FedChainClient``: what a Flower ``ClientApp`` adds to take part in a self-trained FedChain task.

Before the federation starts, each client joins the task once (its deposit, and a commitment to its data
size)::

    FedChainClient.from_env(run_config).join(data_size=len(train_set))

In its ``@app.train()`` handler it trains as it always did, then replies through the helper, which turns the
trained model into FedChain's update (trained minus start parameters, safetensors) and signs it with the
wallet that joined::

    return client.reply(msg, model.state_dict(), data_size=len(train_set), metrics={"train-loss": loss})

When the task has ended, ``client.withdraw()`` finalises what is due, settles the task and withdraws the
client's pay and deposit. The wallet's key comes from ``FEDCHAIN_PRIVATE_KEY`` in the SuperNode's environment,
never from the run config (Flower ships that to every node).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from flwr.app import ConfigRecord, Message, MetricRecord, RecordDict

from fedchain.agent.session import ChainSession
from fedchain.chain.bindings import LedgerCommitTooEarly, TaskStatus
from fedchain.client.joining import join_call, join_salt
from fedchain.errors import AgentError, ConfigError, ContractRevert, StoreError
from fedchain.flower.identity import ReplyClaim, SignedReply, sign_reply
from fedchain.flower.protocol import CLAIM_RECORD, ROUND_KEYS, config_int, pin_reply, start_model_hash
from fedchain.store.digest import to_hex
from fedchain.updates import UpdateMeta, encode_update, update_hash

if TYPE_CHECKING:
    from fedchain.publisher.service import Settlement

log = logging.getLogger(__name__)

#: Seconds between two tries of a commit the chain finds too early (the round before is not over on chain).
COMMIT_RETRY_S = 1.0

__all__ = ["SIMULATION_KEYS_ENV", "FedChainClient"]

#: One key per partition, comma-separated, for Flower's simulation (its virtual clients share one environment).
SIMULATION_KEYS_ENV = "FEDCHAIN_SIMULATION_KEYS"


@dataclass
class FedChainClient:
    """One client's wallet in one self-trained task (module docstring)."""

    session: ChainSession
    task_id: int

    @classmethod
    def from_env(
        cls, run_config: Mapping[str, Any], env: Mapping[str, str] | None = None, *, partition: int | None = None
    ) -> FedChainClient:
        """The client from a Flower run config (``fedchain-deployment``, ``fedchain-task``, optional
        ``fedchain-rpc-url``) and the wallet key in ``FEDCHAIN_PRIVATE_KEY``.

        In Flower's simulation every virtual client shares one environment: there, ``FEDCHAIN_SIMULATION_KEYS``
        holds one key per partition (comma-separated) and ``partition`` picks this client's."""
        from eth_account import Account

        from fedchain.agent.session import open_session
        from fedchain.chain.keys import PRIVATE_KEY_ENV

        env = os.environ if env is None else env
        key = env.get(PRIVATE_KEY_ENV)
        shared = [k.strip() for k in env.get(SIMULATION_KEYS_ENV, "").split(",") if k.strip()]
        if shared and partition is not None:
            if not 0 <= partition < len(shared):
                raise ConfigError(f"{SIMULATION_KEYS_ENV} holds {len(shared)} keys, none for partition {partition}")
            key = shared[partition]
        if not key:
            raise ConfigError(
                f"a FedChain client needs its wallet's key in {PRIVATE_KEY_ENV}",
                hint="export it where this SuperNode runs (each client its own wallet)",
            )
        if "fedchain-deployment" not in run_config or "fedchain-task" not in run_config:
            raise ConfigError(
                "the Flower run config lacks fedchain-deployment or fedchain-task",
                hint="set them in [tool.flwr.app.config] or with flwr run --run-config",
            )
        session = open_session(
            Path(str(run_config["fedchain-deployment"])),
            rpc_url=str(run_config.get("fedchain-rpc-url", "")) or None,
            store_url=str(run_config.get("fedchain-store", ".fedchain/store")),
            account=Account.from_key(key),
        )
        return cls(session, int(run_config["fedchain-task"]))

    @property
    def account(self) -> str:
        return self.session.address

    @property
    def salt(self) -> bytes:
        """The salt of this wallet's data commitment in this task: derived from the key, so nothing to keep."""
        return join_salt(self.session, self.task_id)

    # ------------------------------------------------------------------ joining

    def joined(self) -> int | None:
        """This wallet's client index in the task, or None before it joined."""
        try:
            return int(self.session.contracts.round_ledger.client_index(self.task_id, self.account))
        except ContractRevert:
            return None

    def join(self, data_size: int) -> int:
        """Join the task (its deposit, in the task's asset) committing to ``data_size`` samples; returns the client
        index. Joining again is a no-op that returns the index."""
        if data_size < 1:
            raise ConfigError(f"data_size must be at least 1 sample, got {data_size}")
        index = self.joined()
        if index is not None:
            return index
        deposit = self.session.contracts.task_registry.params(self.task_id).client_deposit
        data, value = join_call(self.session, self.task_id, data_size, deposit)
        receipt = self.session.transactor.send(self.session.contracts.round_ledger.address, data, value=value)
        index = int(self.session.contracts.round_ledger.client_index(self.task_id, self.account))
        log.info(
            "joined task %d as client %d (%d samples, tx %s)", self.task_id, index, data_size, receipt.transaction_hash
        )
        return index

    # ------------------------------------------------------------------ each round

    def reply(
        self,
        msg: Message,
        trained: Mapping[str, torch.Tensor],
        *,
        data_size: int,
        metrics: Mapping[str, float | int] | None = None,
        arrays_key: str = "arrays",
    ) -> Message:
        """The reply to a training message: the update (``trained`` minus the message's model), signed.

        ``data_size`` is the size this client committed at join (it weights the update); ``metrics`` go into the
        reply's MetricRecord beside ``num-examples``.
        """
        config = msg.content.config_records.get("config", ConfigRecord())
        missing = [key for key in ROUND_KEYS.values() if key not in config]
        if missing:
            raise ConfigError(
                f"the training message lacks {', '.join(missing)}: the server does not run IncentiveStrategy",
                hint="wrap the ServerApp's strategy in fedchain.flower.IncentiveStrategy",
            )
        task_id, round_number = config_int(config, ROUND_KEYS["task"]), config_int(config, ROUND_KEYS["round"])
        if task_id != self.task_id:
            raise ConfigError(f"the server trains task {task_id}, this client joined task {self.task_id}")
        index = self.joined()
        if index is None:
            raise ConfigError(
                f"{self.account} has not joined task {task_id}", hint="call FedChainClient.join before the task starts"
            )
        chain_id, ledger = config_int(config, ROUND_KEYS["chain"]), str(config[ROUND_KEYS["ledger"]])
        mine = self.session.contracts.round_ledger.address
        if chain_id != self.session.deployment.chain_id or ledger.lower() != mine.lower():
            raise ConfigError(
                f"the server names chain {chain_id} and ledger {ledger}; this client joined on chain "
                f"{self.session.deployment.chain_id} at {mine}",
                hint="point the client's fedchain-deployment at the server's deployment file",
            )
        start = msg.content.array_records[arrays_key].to_torch_state_dict()
        delta = {name: trained[name].detach().cpu().to(start[name].dtype) - start[name] for name in start}
        model = str(config.get(ROUND_KEYS["model"], ""))
        meta = UpdateMeta(
            task_id=task_id, round=round_number, kind="update", job_id=index, client=self.account, model=model
        )
        blob = encode_update(delta, meta)
        claim = ReplyClaim(
            chain_id=chain_id,
            ledger=ledger,
            task_id=task_id,
            round=round_number,
            start_model=start_model_hash(start, model, task_id, round_number),
            update_hash=update_hash(blob),
            data_size=data_size,
            salt=self.salt,
        )
        signed = sign_reply(self.session.transactor.account.key, claim)
        # Into the store first: once the commit is seen, the update and its claim are there to be read.
        self._keep(task_id, round_number, index, blob, signed)
        self._commit(task_id, round_number, index, claim.update_hash)
        record = ConfigRecord(
            {
                "update": blob,
                "account": self.account,
                "data-size": data_size,
                "salt": claim.salt,
                "signature": signed.signature,
            }
        )
        content = RecordDict(
            {"metrics": MetricRecord({"num-examples": data_size, **dict(metrics or {})}), CLAIM_RECORD: record}
        )
        return Message(content=content, reply_to=msg)

    def _commit(self, task_id: int, round_number: int, index: int, digest: bytes) -> None:
        """Commit the update on chain (``commitOwnUpdate``), sent without waiting for it to be mined: the chain,
        not the aggregator, then says that this client delivered the round, and when.

        A round is committed once: a retried message whose update is the one committed replies again; one with
        another update (training is not deterministic), or a commit the chain refuses (the deadline passed, the
        client was removed), raises, and Flower sends the server an error reply: a missed round, not an update
        that would be scored against a commit it does not match. A commit of the round after the chain's
        current one waits while the chain says that round's work cannot have started yet (the current round
        is neither committed by every active client nor past its deadline: ``LedgerCommitTooEarly``)."""
        ledger = self.session.contracts.round_ledger
        committed, committed_at, _ = ledger.own_commit(task_id, round_number, index)
        if committed_at:
            if bytes(committed) == digest:
                return
            raise AgentError(
                f"round {round_number} of task {task_id} is committed already, with update {to_hex(bytes(committed))}",
                hint="a retried message trained again: that reply cannot count; the next round can",
            )
        call = ledger.encode("commitOwnUpdate(uint256,uint16,bytes32)", task_id, round_number, digest)
        registry = self.session.contracts.task_registry
        waited = False
        while True:
            try:
                pending = self.session.transactor.submit(ledger.address, call)
                break
            except LedgerCommitTooEarly as err:
                # The chain's round is behind this one; it moves on once every client committed or at its deadline.
                state = registry.state(task_id)
                if state.status != TaskStatus.RUNNING or state.current_round >= round_number:
                    raise AgentError(f"round {round_number}'s update could not be committed on chain: {err}") from err
                if not waited:
                    log.info(
                        "round %d: the chain's round %d is not over yet; the commit waits",
                        round_number,
                        state.current_round,
                    )
                    waited = True
                time.sleep(COMMIT_RETRY_S)
            except ContractRevert as err:
                raise AgentError(f"round {round_number}'s update could not be committed on chain: {err}") from err
        log.info("round %d: update %s committed (tx %s)", round_number, to_hex(digest), pending.hash)

    def _keep(self, task_id: int, round_number: int, index: int, blob: bytes, signed: SignedReply) -> None:
        """Put the update and its signed claim in the task's store as well, where this client can reach it: the
        aggregator then cannot score the committed update as missing by saying that the reply never came."""
        try:
            self.session.store.put(blob)
            pin_reply(self.session.store, task_id, round_number, index, signed)
        except StoreError as err:
            log.warning("round %d: the update is not in the store (%s); the reply carries it", round_number, err)

    # ------------------------------------------------------------------ the end

    def withdraw(self) -> tuple[Settlement, int]:
        """Finalise what is due, settle the task once it has ended, and withdraw this wallet's balance in the
        task's asset; returns the settlement and the amount withdrawn (0 while rounds are still pending)."""
        from fedchain.publisher.service import settle_task, withdraw_task_asset

        settlement = settle_task(self.session, self.task_id, jobs=[])
        if settlement.pending:
            log.info("task %d: rounds %s are not final yet; withdraw later", self.task_id, settlement.pending)
            return settlement, 0
        return settlement, withdraw_task_asset(self.session, self.task_id)
