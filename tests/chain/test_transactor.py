"""The transactor sends, waits and turns every revert into the contract's own exception class."""

from __future__ import annotations

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
from fedchain.errors import ContractRevert, InsufficientFunds


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


def test_unknown_error_selector_gives_generic_revert_with_raw_data(w3: Web3, anvil: AnvilNode, probe_artifact: Artifact) -> None:
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
