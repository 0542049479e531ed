"""The transactor sends, waits and turns every revert into the contract's own exception class."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter

import pytest
from eth_account import Account
from eth_utils import keccak
from web3 import Web3

from fedchain.chain.abi import AbiRegistry, CustomError, RevertReason
from fedchain.chain.compile import Artifact
from fedchain.chain.contract import Contract
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.tx import Transactor, TxSettings
from fedchain.errors import ContractRevert, FeeCapExceeded, InsufficientFunds

GWEI = 10**9
#: A chain that mines on its own clock, like a public one (seconds per block).
BLOCK_TIME_S = 1


@pytest.fixture()
def probe(anvil: AnvilNode, w3: Web3, probe_artifact: Artifact) -> Contract:
    transactor = Transactor(w3, anvil.dev_account(1), AbiRegistry())
    return Contract.deploy(transactor, probe_artifact.bytecode, 5, abi=probe_artifact.abi)


def test_transaction_returns_receipt_with_decoded_events(probe: Contract) -> None:
    receipt = probe.transact("store", 42, "hello")

    (stored,) = receipt.events  # Probe's events are classes built from its ABI at run time
    assert type(stored).__name__ == "Stored"
    assert attrgetter("sender", "value", "note")(stored) == (probe.transactor.address, 42, "hello")
    assert stored.address == probe.address
    assert stored.block_number == receipt.block_number
    assert receipt.fee_wei == receipt.gas_used * receipt.effective_gas_price > 0
    assert probe.call("value") == 42


def test_reverting_transaction_raises_custom_error_before_sending(probe: Contract, w3: Web3) -> None:
    nonce = w3.eth.get_transaction_count(probe.transactor.address)

    with pytest.raises(ContractRevert) as caught:
        probe.transact("store", 3, "too small")

    error = caught.value
    assert isinstance(error, CustomError)
    assert type(error).__name__ == "ProbeTooSmall"
    assert attrgetter("value", "minimum")(error) == (3, 10)
    assert "ProbeTooSmall(value=3, minimum=10)" in str(error)
    assert w3.eth.get_transaction_count(probe.transactor.address) == nonce  # nothing was sent


def test_mined_failed_transaction_is_decoded_by_replay(probe: Contract, w3: Web3) -> None:
    probe.transact("close")
    calldata = probe.encode("store", 50, "after close")

    with pytest.raises(ContractRevert) as caught:
        probe.transactor.send(probe.address, calldata, gas=100_000)  # fixed gas: skips the estimate, so it is mined

    assert type(caught.value).__name__ == "ProbeClosed"
    assert isinstance(caught.value, CustomError) and caught.value.fields == ()
    assert probe.call("value") == 5


def test_failed_call_raises_error_with_string_and_bytes32_arguments(probe: Contract) -> None:
    with pytest.raises(ContractRevert) as caught:
        probe.call("fail", "quorum")

    assert type(caught.value).__name__ == "ProbeNamed"
    assert attrgetter("label", "tag")(caught.value) == ("quorum", keccak(text="quorum"))


def test_revert_string_becomes_revert_reason(probe: Contract) -> None:
    with pytest.raises(RevertReason) as caught:
        probe.call("failWithString")

    assert caught.value.reason == "plain reason"


def test_unknown_error_selector_gives_generic_revert_with_raw_data(
    w3: Web3, anvil: AnvilNode, probe_artifact: Artifact
) -> None:
    stranger = Transactor(w3, anvil.dev_account(2), AbiRegistry())  # knows no ABI at all
    probe = Contract.deploy(stranger, probe_artifact.bytecode, 5, abi=probe_artifact.abi)
    calldata = probe.encode("store", 1, "x")
    blind = Transactor(w3, anvil.dev_account(2), AbiRegistry())

    with pytest.raises(ContractRevert) as caught:
        blind.call(probe.address, calldata)

    assert type(caught.value) is ContractRevert
    expected = keccak(text="ProbeTooSmall(uint256,uint256)")[:4] + (1).to_bytes(32, "big") + (10).to_bytes(32, "big")
    assert caught.value.data == expected
    assert expected.hex() in str(caught.value)


def test_account_without_funds_is_refused_and_nothing_is_sent(w3: Web3, probe_artifact: Artifact) -> None:
    pauper = Account.from_key(keccak(text="fedchain test pauper"))
    transactor = Transactor(w3, pauper, AbiRegistry())

    with pytest.raises(InsufficientFunds, match=pauper.address):
        transactor.deploy(probe_artifact.bytecode, (5).to_bytes(32, "big"))

    assert w3.eth.get_transaction_count(pauper.address) == 0


def test_a_value_beyond_the_balance_is_refused_as_insufficient_funds_not_as_an_unreachable_node(
    probe: Contract, w3: Web3
) -> None:
    balance = w3.eth.get_balance(probe.transactor.address)
    nonce = w3.eth.get_transaction_count(probe.transactor.address)

    with pytest.raises(InsufficientFunds, match="the value sent needs") as caught:
        probe.transact("pay", value=balance + 1)

    assert f"holds {balance} wei" in str(caught.value) and "fund the account" in caught.value.hint
    assert w3.eth.get_transaction_count(probe.transactor.address) == nonce


def test_payable_value_reaches_the_contract(probe: Contract, w3: Web3) -> None:
    receipt = probe.transact("pay", value=1234)

    assert attrgetter("amount", "from_")(receipt.events[0]) == (1234, probe.transactor.address)
    assert w3.eth.get_balance(probe.address) == 1234


def test_confirmations_wait_for_blocks_on_top(probe_artifact: Artifact) -> None:
    with AnvilNode(AnvilSettings(block_time=0.2)) as node:
        w3 = node.web3()
        transactor = Transactor(w3, node.dev_account(0), AbiRegistry(), TxSettings(confirmations=2))

        receipt = transactor.deploy(probe_artifact.bytecode, (5).to_bytes(32, "big"))

        assert w3.eth.block_number >= receipt.block_number + 2


# ---------------------------------------------------------------- a chain with a block time


@pytest.fixture(scope="module")
def timed() -> Iterator[AnvilNode]:
    """An Anvil mining a block every BLOCK_TIME_S, whatever the transactions; tests use accounts of their own."""
    with AnvilNode(AnvilSettings(block_time=BLOCK_TIME_S)) as node:
        yield node


@contextmanager
def mining_paused(w3: Web3) -> Iterator[None]:
    """Hold the next block until the block ends, so that what is sent inside it surely lands in one block."""
    w3.provider.make_request("anvil_setIntervalMining", [0])
    try:
        yield
    finally:
        w3.provider.make_request("anvil_setIntervalMining", [BLOCK_TIME_S])


def set_next_base_fee(w3: Web3, wei: int) -> None:
    w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(wei)])


def test_transactions_submitted_back_to_back_are_in_flight_together_and_share_a_block_in_nonce_order(
    timed: AnvilNode, probe_artifact: Artifact
) -> None:
    w3 = timed.web3()
    transactor = Transactor(w3, timed.dev_account(0), AbiRegistry())
    probe = Contract.deploy(transactor, probe_artifact.bytecode, 5, abi=probe_artifact.abi)

    with mining_paused(w3):  # submit returns without a block: were it waiting, this would hang
        pending = [transactor.submit(probe.address, probe.encode("store", 10 + i, "batch")) for i in range(5)]
    receipts = [transactor.wait(p) for p in pending]

    assert [p.nonce for p in pending] == list(range(pending[0].nonce, pending[0].nonce + 5))
    assert len({r.block_number for r in receipts}) == 1
    positions = [w3.eth.get_transaction(p.hash)["transactionIndex"] for p in pending]
    assert positions == sorted(positions)
    assert probe.call("value") == 14


def test_a_lost_race_in_the_same_block_raises_the_contracts_custom_error(
    timed: AnvilNode, probe_artifact: Artifact
) -> None:
    w3 = timed.web3()
    winner = Transactor(w3, timed.dev_account(1), AbiRegistry(), TxSettings(priority_fee_wei=2 * GWEI))
    loser = Transactor(w3, timed.dev_account(2), AbiRegistry(), TxSettings(priority_fee_wei=GWEI))  # mined after
    probe = Contract.deploy(winner, probe_artifact.bytecode, 5, abi=probe_artifact.abi)
    loser.registry.add_abi(probe_artifact.abi)

    with mining_paused(w3):
        closing = winner.submit(probe.address, probe.encode("close"))
        # fixed gas, as an agent that estimated before the race: the store is mined and reverts there
        storing = loser.submit(probe.address, probe.encode("store", 50, "too late"), gas=100_000)
    closed = winner.wait(closing)

    with pytest.raises(ContractRevert) as caught:
        loser.wait(storing)

    assert type(caught.value).__name__ == "ProbeClosed"  # not "the replay does not say why"
    assert w3.eth.get_transaction_receipt(storing.hash)["blockNumber"] == closed.block_number


def test_a_transaction_priced_below_a_risen_base_fee_is_replaced_and_mined(probe_artifact: Artifact) -> None:
    with AnvilNode(AnvilSettings(block_time=BLOCK_TIME_S)) as node:
        w3 = node.web3()
        transactor = Transactor(
            w3, node.dev_account(0), AbiRegistry(), TxSettings(replace_after_blocks=2, timeout_s=30)
        )

        with mining_paused(w3):
            pending = transactor.submit(node.dev_account(1).address, b"", value=1)
            set_next_base_fee(w3, 100 * pending.fees.max_fee_per_gas)  # decays 12.5% a block: ~35 blocks to fall back
        receipt = transactor.wait(pending)

        mined = w3.eth.get_transaction(receipt.transaction_hash)
    assert receipt.transaction_hash != pending.hash
    assert mined["nonce"] == pending.nonce
    assert receipt.effective_gas_price > 50 * pending.fees.max_fee_per_gas


def test_a_base_fee_above_the_cap_at_submit_raises_fee_cap_exceeded_after_the_timeout() -> None:
    with AnvilNode(AnvilSettings(block_time=BLOCK_TIME_S)) as node:
        w3 = node.web3()
        cap = GWEI
        set_next_base_fee(w3, 100 * GWEI)
        while w3.eth.get_block("latest")["baseFeePerGas"] <= cap:
            pass  # the next block brings the high base fee
        transactor = Transactor(
            w3, node.dev_account(0), AbiRegistry(), TxSettings(max_fee_per_gas_cap_wei=cap, timeout_s=1.5)
        )

        with pytest.raises(FeeCapExceeded) as caught:
            transactor.send(node.dev_account(1).address, b"", value=1)

        assert w3.eth.get_transaction_count(transactor.address, "pending") == 0  # nothing was sent
    error = caught.value
    assert error.cap_wei == cap and error.base_fee_wei > cap
    assert f"base fee is {error.base_fee_wei} wei" in str(error) and f"at {cap} wei" in str(error)
    assert "max_fee_per_gas_cap_wei" in error.hint


def test_a_base_fee_rising_above_the_cap_while_waiting_raises_fee_cap_exceeded() -> None:
    with AnvilNode(AnvilSettings(block_time=BLOCK_TIME_S)) as node:
        w3 = node.web3()
        cap = 4 * GWEI  # above today's price (2 * 1 gwei base fee + 1 gwei tip), far below the base fee to come
        settings = TxSettings(max_fee_per_gas_cap_wei=cap, replace_after_blocks=1, timeout_s=3)
        transactor = Transactor(w3, node.dev_account(0), AbiRegistry(), settings)

        with mining_paused(w3):
            pending = transactor.submit(node.dev_account(1).address, b"", value=1)
            set_next_base_fee(w3, 100 * GWEI)
        with pytest.raises(FeeCapExceeded) as caught:
            transactor.wait(pending)

    assert pending.fees.max_fee_per_gas <= cap
    assert caught.value.base_fee_wei > cap


def test_transactions_reorganised_away_leave_no_nonce_gap_behind(probe: Contract, w3: Web3) -> None:
    # prepare: two transactions mined, then their blocks vanish (a reorganisation back to before them)
    transactor = probe.transactor
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    first_nonce = w3.eth.get_transaction_count(transactor.address)
    transactor.send(probe.address, probe.encode("store", 21, "gone"))
    transactor.send(probe.address, probe.encode("store", 22, "gone"))
    w3.provider.make_request("evm_revert", [snapshot])

    # execute: the next transaction, with the counter two ahead of the chain
    again = transactor.submit(probe.address, probe.encode("store", 23, "again"))
    receipt = transactor.wait(again)

    # assert: it took the first vanished nonce and was mined (a gap would have left it waiting forever)
    assert again.nonce == w3.eth.get_transaction_count(transactor.address) - 1 == first_nonce
    assert receipt.block_number == w3.eth.block_number and probe.call("value") == 23


def test_a_nonce_taken_by_another_sender_of_the_same_key_is_resynchronised(anvil: AnvilNode, w3: Web3) -> None:
    first = Transactor(w3, anvil.dev_account(15), AbiRegistry())
    second = Transactor(w3, anvil.dev_account(15), AbiRegistry())  # same key, counter of its own
    receiver = anvil.dev_account(16).address
    first.send(receiver, b"", value=1)
    second.send(receiver, b"", value=1)  # takes the nonce first's counter will offer next

    receipt = first.send(receiver, b"", value=1)

    nonce = w3.eth.get_transaction(receipt.transaction_hash)["nonce"]
    assert nonce == w3.eth.get_transaction_count(first.address) - 1 == 2


def test_threads_sharing_a_transactor_get_distinct_consecutive_nonces(anvil: AnvilNode, w3: Web3) -> None:
    transactor = Transactor(w3, anvil.dev_account(17), AbiRegistry())
    receiver = anvil.dev_account(16).address
    start = w3.eth.get_transaction_count(transactor.address)
    nonces: list[int] = []

    def send_three() -> None:
        for _ in range(3):
            nonces.append(transactor.submit(receiver, b"", value=1).nonce)

    threads = [threading.Thread(target=send_three) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(nonces) == list(range(start, start + 12))


@pytest.mark.parametrize(
    "field, invalid",
    [
        ("max_fee_per_gas_cap_wei", lambda: TxSettings(max_fee_per_gas_cap_wei=0)),
        ("replace_after_blocks", lambda: TxSettings(replace_after_blocks=0)),
        ("replacement_fee_bump", lambda: TxSettings(replacement_fee_bump=0.05)),  # nodes refuse bumps under 10%
    ],
)
def test_settings_refuse_a_cap_replacement_delay_or_bump_nodes_would_not_honour(
    field: str, invalid: Callable[[], TxSettings]
) -> None:
    with pytest.raises(ValueError, match=field):
        invalid()
