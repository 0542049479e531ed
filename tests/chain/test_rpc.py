"""A flaky JSON-RPC endpoint is survived within a bounded time, then named in RpcUnavailable."""

from __future__ import annotations

import re
import time

import pytest
from web3 import Web3

from fedchain.chain.abi import AbiRegistry
from fedchain.chain.compile import Artifact
from fedchain.chain.contract import Contract
from fedchain.chain.node import AnvilNode, free_port, http_web3
from fedchain.chain.rpc import RetrySettings, endpoint_label
from fedchain.chain.tx import Transactor
from fedchain.errors import ContractRevert, RpcUnavailable
from tests.faultproxy import Fault, FaultProxy

#: The client's timeout per request behind the proxy; a TIMEOUT fault holds the answer longer.
CLIENT_TIMEOUT_S = 0.5
HELD_ANSWER_S = 1.0
#: Quick retries, so that a flaky test run stays short; long enough to outlast a run of faults.
FLAKY = RetrySettings(total_s=30.0, first_delay_s=0.02, max_delay_s=0.2)
#: A short budget for the tests that expect to give up.
SHORT = RetrySettings(total_s=1.0, first_delay_s=0.05, max_delay_s=0.2)


def client(url: str, retry: RetrySettings = FLAKY) -> Web3:
    return http_web3(url, timeout_s=CLIENT_TIMEOUT_S, retry=retry)


def test_a_transactor_behind_a_flaky_endpoint_sends_a_batch_and_reads_state(
    anvil: AnvilNode, probe_artifact: Artifact
) -> None:
    with FaultProxy(anvil.rpc_url, rate=0.3, seed=11, delay_s=HELD_ANSWER_S) as proxy:
        transactor = Transactor(client(proxy.url), anvil.dev_account(11), AbiRegistry())
        probe = Contract.deploy(transactor, probe_artifact.bytecode, 5, abi=probe_artifact.abi)

        pending = [transactor.submit(probe.address, probe.encode("store", 10 + i, f"note {i}")) for i in range(8)]
        receipts = [transactor.wait(p) for p in pending]
        value = probe.call("value")

    assert value == 17
    assert [type(r.events[0]).__name__ for r in receipts] == ["Stored"] * 8
    assert [p.nonce for p in pending] == list(range(pending[0].nonce, pending[0].nonce + 8))
    assert proxy.injected_total > 10 and len(proxy.injected) >= 4  # most kinds of fault were met


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_an_endpoint_failing_every_request_raises_rpc_unavailable_naming_it_in_bounded_time(
    anvil: AnvilNode, fault: Fault
) -> None:
    with FaultProxy(anvil.rpc_url, rate=1.0, faults=[fault], delay_s=HELD_ANSWER_S) as proxy:
        w3 = client(proxy.url, SHORT)
        started = time.monotonic()

        with pytest.raises(RpcUnavailable, match=re.escape(proxy.url)) as caught:
            w3.eth.get_block_number()

    elapsed = time.monotonic() - started
    assert elapsed < SHORT.total_s + CLIENT_TIMEOUT_S + 1.0
    assert proxy.injected[fault] >= 2  # retried, not given up at the first failure
    assert "eth_blockNumber" in str(caught.value) and "reachable" in caught.value.hint


def test_a_node_that_is_down_raises_rpc_unavailable_saying_the_connection_was_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()

    with pytest.raises(RpcUnavailable, match=re.escape(url)) as caught:
        client(url, SHORT).eth.get_block_number()

    assert time.monotonic() - started < SHORT.total_s + 1.0
    assert "ConnectionRefusedError" in str(caught.value)


def test_a_json_rpc_error_is_an_answer_and_is_not_retried(anvil: AnvilNode, probe_artifact: Artifact) -> None:
    with FaultProxy(anvil.rpc_url, rate=0.0) as proxy:
        transactor = Transactor(client(proxy.url), anvil.dev_account(12), AbiRegistry())
        probe = Contract.deploy(transactor, probe_artifact.bytecode, 5, abi=probe_artifact.abi)
        before = proxy.forwarded.get("eth_call", 0)

        with pytest.raises(ContractRevert) as caught:
            probe.call("fail", "no retry")

        assert proxy.forwarded["eth_call"] - before == 1, proxy.forwarded
    assert type(caught.value).__name__ == "ProbeNamed"


def test_a_transaction_resent_after_its_answer_was_lost_counts_as_sent(anvil: AnvilNode, w3: Web3) -> None:
    sender, receiver = anvil.dev_account(13), anvil.dev_account(14).address
    nonce = w3.eth.get_transaction_count(sender.address)
    with FaultProxy(
        anvil.rpc_url,
        rate=1.0,
        faults=[Fault.TIMEOUT],
        methods={"eth_sendRawTransaction"},
        limit=1,
        delay_s=HELD_ANSWER_S,
    ) as proxy:
        transactor = Transactor(client(proxy.url), sender, AbiRegistry())

        first = transactor.send(receiver, b"", value=1)  # reaches the node; its answer is lost; the resend meets it
        second = transactor.send(receiver, b"", value=2)

    assert proxy.injected == {Fault.TIMEOUT: 1}
    assert w3.eth.get_transaction_count(sender.address) == nonce + 2
    assert [w3.eth.get_transaction(r.transaction_hash)["nonce"] for r in (first, second)] == [nonce, nonce + 1]


def test_messages_name_the_endpoint_without_its_credentials_or_api_key() -> None:
    url = "https://user:secret@mainnet.example.io/v3/0123456789abcdef0123456789abcdef?token=x"

    assert endpoint_label(url) == "https://mainnet.example.io/v3/***"
    assert endpoint_label("http://127.0.0.1:8545") == "http://127.0.0.1:8545"
