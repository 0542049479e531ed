"""Local chains start on free ports, answer, and stop; the in-process chain behaves like a node."""

from __future__ import annotations

import socket
from operator import attrgetter

import pytest

from fedchain.chain.abi import AbiRegistry
from fedchain.chain.compile import Artifact
from fedchain.chain.contract import Contract
from fedchain.chain.node import DEFAULT_CHAIN_ID, AnvilNode, AnvilSettings, InProcessChain, connect, free_port
from fedchain.chain.tx import Transactor
from fedchain.errors import ChainError, ContractRevert

#: Anvil's public test account 0 for its default mnemonic (published in the Foundry book).
ANVIL_ACCOUNT_0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"


def test_free_port_is_bindable() -> None:
    port = free_port()

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_anvil_starts_answers_and_stops() -> None:
    node = AnvilNode(AnvilSettings(chain_id=4242, accounts=2))

    with node:
        w3 = connect(node.rpc_url, chain_id=4242)
        assert w3.eth.chain_id == 4242
        assert node.dev_account(0).address == ANVIL_ACCOUNT_0
        assert w3.eth.get_balance(ANVIL_ACCOUNT_0) == 10_000 * 10**18

    assert not node.running
    with pytest.raises(ChainError, match="no Ethereum node answers"):
        connect(node.rpc_url)


def test_session_anvil_serves_default_chain_id(anvil: AnvilNode) -> None:
    assert anvil.running and anvil.chain_id == DEFAULT_CHAIN_ID == connect(anvil.rpc_url).eth.chain_id


def test_connect_refuses_the_wrong_chain_id(anvil: AnvilNode) -> None:
    with pytest.raises(ChainError, match=f"serves chain id {DEFAULT_CHAIN_ID}, not the expected 1"):
        connect(anvil.rpc_url, chain_id=1)


def test_connect_refuses_a_non_http_url() -> None:
    with pytest.raises(ChainError, match="not an HTTP"):
        connect("localhost:8545")


def test_in_process_chain_deploys_transacts_and_decodes_reverts(probe_artifact: Artifact) -> None:
    with InProcessChain() as chain:
        transactor = Transactor(chain.web3(), chain.dev_account(0), AbiRegistry())
        probe = Contract.deploy(transactor, probe_artifact.bytecode, 5, abi=probe_artifact.abi)

        stored = probe.transact("store", 77, "in process").events[0]
        with pytest.raises(ContractRevert) as caught:
            probe.transact("store", 1, "too small")

        assert (type(stored).__name__, *attrgetter("value", "note")(stored)) == ("Stored", 77, "in process")
        assert (type(caught.value).__name__, *attrgetter("value", "minimum")(caught.value)) == ("ProbeTooSmall", 1, 10)
        assert probe.call("value") == 77


def test_in_process_chain_takes_the_real_deployment_and_typed_bindings() -> None:
    from eth_account import Account

    from fedchain.chain.bindings import REGISTRY, FedChainContracts, TaskUnknown
    from fedchain.chain.deployment import deploy
    from fedchain.errors import InsufficientFunds

    with InProcessChain() as chain:
        w3 = chain.web3()
        deployment = deploy(w3, chain.dev_account(0), rpc_url=None)
        contracts = FedChainContracts.bind(deployment, Transactor(w3, chain.dev_account(1), REGISTRY))

        with pytest.raises(TaskUnknown) as caught:
            contracts.task_registry.cancel_task(7)
        with pytest.raises(InsufficientFunds, match="holds 0 wei"):
            deploy(w3, Account.create(), rpc_url=None)

        deployment.verify(w3)
        assert caught.value.task_id == 7
        assert deployment.rpc_url is None


def test_anvils_started_side_by_side_each_bind_a_port_of_their_own_and_answer_there() -> None:
    with (
        AnvilNode(AnvilSettings(chain_id=4243, accounts=1)) as a,
        AnvilNode(AnvilSettings(chain_id=4244, accounts=1)) as b,
    ):
        assert a.port != b.port and 0 not in (a.port, b.port)
        assert connect(a.rpc_url).eth.chain_id == 4243
        assert connect(b.rpc_url).eth.chain_id == 4244


def test_anvil_on_a_port_already_taken_fails_with_anvils_reason() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        node = AnvilNode(AnvilSettings(port=taken.getsockname()[1], accounts=1))

        with pytest.raises(ChainError, match=r"(?s)anvil exited with status.*pass another port, or 0"):
            node.start()
