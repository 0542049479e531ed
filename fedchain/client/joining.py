"""A client's join of a task: the salt of its data commitment and the join transaction, for the client agent
(``fedchain client run``) and a Flower client (:class:`fedchain.flower.FedChainClient`) alike."""

from __future__ import annotations

import logging

from fedchain.agent.chainloop import chain_now
from fedchain.agent.session import ChainSession
from fedchain.chain.erc20 import allowance, payment_value, sign_permit, task_asset
from fedchain.client.commitments import DATA_SIZE_SALT, data_commitment, derive_salt
from fedchain.errors import ContractRevert
from fedchain.units import is_ether

log = logging.getLogger(__name__)

__all__ = ["join_call", "join_salt"]


def join_salt(session: ChainSession, task_id: int) -> bytes:
    """The salt of this wallet's data commitment in ``task_id``: derived from its key, so nothing to keep."""
    ledger = session.contracts.round_ledger.address
    return derive_salt(session.transactor.account.key, DATA_SIZE_SALT, ledger, task_id, 0)


def join_call(session: ChainSession, task_id: int, data_size: int, deposit: int) -> tuple[bytes, int]:
    """The join's calldata and value, committing to ``data_size`` samples.

    ``join`` with the deposit as value for an ether task; for a token task ``joinWithPermit`` when the token takes
    an EIP-2612 permit and the Treasury may not yet pull the deposit (one transaction), else ``join`` after
    approving the Treasury (:func:`~fedchain.chain.erc20.payment_value` approves it, once)."""
    contracts, transactor = session.contracts, session.transactor
    ledger, treasury = contracts.round_ledger, contracts.treasury
    commitment = data_commitment(data_size, join_salt(session, task_id))
    token = task_asset(treasury, task_id)
    if not is_ether(token) and deposit and allowance(transactor, token, treasury.address) < deposit:
        permit = sign_permit(transactor, token, treasury.address, deposit, chain_now(session))
        if permit is not None:
            signature = "joinWithPermit(uint256,bytes32,(uint256,uint8,bytes32,bytes32))"
            data = ledger.encode(signature, task_id, commitment, permit)
            try:  # a token whose permit does not take this signature: approve instead, not again and again
                transactor.estimate_gas(ledger.address, data)
            except ContractRevert as err:
                log.warning("the token refused the permit (%s); approving instead", type(err).__name__)
            else:
                log.info("joining with a permit: task %d, deposit %d of token %s", task_id, deposit, token)
                return data, 0
    value = payment_value(treasury, task_id, deposit)
    return ledger.encode("join(uint256,bytes32)", task_id, commitment), value
