"""Deploying writes a deployment file that later commands trust only after checking it against the chain;
bad input is refused with a clear error and changes nothing."""

from __future__ import annotations

import errno
import json
from collections.abc import Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from eth_utils import keccak
from web3 import Web3

from fedchain.chain.abi import AbiRegistry
from fedchain.chain.commands import DeployRequest, run_deploy
from fedchain.chain.compile import Artifact
from fedchain.chain.deployment import FORMAT, Deployment, Recipe, deploy, load_deployment, open_deployment
from fedchain.chain.keys import KEYSTORE_PASSWORD_ENV, PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, free_port
from fedchain.chain.recipe import ArbiterSettings
from fedchain.chain.tx import Transactor
from fedchain.cli import main
from fedchain.errors import ChainError, ConfigError, ContractRevert, DeploymentError, InsufficientFunds, SigningKeyError
from fedchain.files import keep_aside

#: A made-up arbiter (nobody signs here): what a deployment to a chain that stays up must name.
ARBITER = Account.from_key(keccak(text="fedchain test arbiter")).address


def probe_recipe(artifact: Artifact, *, then_store: int | None = None) -> Recipe:
    """A recipe like the contracts' own: deploys Probe(5) with w3.eth.send_transaction, then optionally calls store."""

    def recipe(w3: Web3, deployer: str, *, confirmations: int = 0) -> Mapping[str, str]:
        factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
        receipt = w3.eth.wait_for_transaction_receipt(factory.constructor(5).transact({"from": deployer}))
        if then_store is not None:
            probe = w3.eth.contract(address=receipt.contractAddress, abi=artifact.abi)
            w3.eth.wait_for_transaction_receipt(probe.functions.store(then_store, "x").transact({"from": deployer}))
        return {"Probe": receipt.contractAddress}

    return recipe


def fresh_account(w3: Web3, anvil: AnvilNode, label: str, wei: int) -> Any:
    """A new account holding ``wei``, funded by Anvil's account 9."""
    account = Account.from_key(keccak(text=f"fedchain test {label}"))
    if wei:
        Transactor(w3, anvil.dev_account(9)).send(account.address, b"", value=wei)
    return account


@pytest.fixture()
def registry(probe_artifact: Artifact) -> AbiRegistry:
    registry = AbiRegistry()
    registry.add_abi(probe_artifact.abi)
    return registry


@pytest.fixture()
def deployed(anvil: AnvilNode, w3: Web3, probe_artifact: Artifact, registry: AbiRegistry) -> Deployment:
    return deploy(
        w3, anvil.dev_account(4), rpc_url=anvil.rpc_url, recipe=probe_recipe(probe_artifact), registry=registry
    )


def test_deployment_records_chain_deployer_block_and_code(deployed: Deployment, anvil: AnvilNode, w3: Web3) -> None:
    address = deployed.address("Probe")
    code = bytes(w3.eth.get_code(address))

    assert (deployed.chain_id, deployed.rpc_url, deployed.deployer) == (
        31337,
        anvil.rpc_url,
        anvil.dev_account(4).address,
    )
    assert deployed.contracts[0].code_hash == "0x" + keccak(code).hex()
    assert w3.eth.get_transaction_count(address) == 1  # a contract's nonce starts at 1: it exists
    assert deployed.block_number <= w3.eth.block_number
    assert deployed.compiler.startswith("solc 0.8.")


def test_deployment_file_round_trips_and_verifies(deployed: Deployment, anvil: AnvilNode, tmp_path: Path) -> None:
    path = deployed.save(tmp_path / "nested" / "deployment.json")

    loaded = load_deployment(path)
    w3, opened = open_deployment(path)

    assert loaded == deployed == opened
    assert json.loads(path.read_text())["format"] == FORMAT
    assert w3.eth.chain_id == deployed.chain_id


def test_verify_refuses_a_chain_with_another_id(deployed: Deployment, w3: Web3) -> None:
    other = Deployment(**{**deployed.__dict__, "chain_id": 1})

    with pytest.raises(DeploymentError, match="on chain id 1 but the node serves chain id 31337"):
        other.verify(w3)


def test_verify_refuses_a_reset_chain(deployed: Deployment) -> None:
    # A fresh node: same chain id, but it forgot everything.
    with AnvilNode() as fresh, pytest.raises(DeploymentError, match="has no code"):
        deployed.verify(fresh.web3())


def test_unknown_contract_name_is_a_deployment_error(deployed: Deployment) -> None:
    with pytest.raises(DeploymentError, match="has no contract Nope"):
        deployed.address("Nope")


def test_missing_deployment_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match="no deployment file") as caught:
        load_deployment(tmp_path / "absent.json")

    assert "fedchain deploy" in caught.value.hint


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"format": "something-else"}, "format"),
        ({"chain_id": "31337"}, "chain_id"),
        ({"deployer": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"}, "checksum"),
        ({"contracts": [{"name": "Probe", "address": "0x01"}]}, "contracts\\[0\\]"),
        (
            {
                "contracts": [
                    {"name": "Probe", "address": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "code_hash": "0x12"}
                ]
            },
            "code_hash",
        ),
    ],
)
def test_malformed_deployment_file_names_the_bad_field(
    deployed: Deployment, tmp_path: Path, change: dict, complaint: str
) -> None:
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps({**deployed.to_dict(), **change}))

    with pytest.raises(DeploymentError, match=complaint):
        load_deployment(path)


def test_deployment_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deployment.json"
    path.write_text("{not json")

    with pytest.raises(DeploymentError, match="not valid JSON"):
        load_deployment(path)


def test_revert_during_deployment_is_named_and_changes_nothing(
    anvil: AnvilNode, w3: Web3, probe_artifact: Artifact, registry: AbiRegistry
) -> None:
    account = anvil.dev_account(5)
    nonce = w3.eth.get_transaction_count(account.address)

    with pytest.raises(ContractRevert) as caught:
        deploy(w3, account, rpc_url=anvil.rpc_url, recipe=probe_recipe(probe_artifact, then_store=3), registry=registry)

    assert type(caught.value).__name__ == "ProbeTooSmall" and attrgetter("value")(caught.value) == 3
    assert w3.eth.get_transaction_count(account.address) == nonce  # the rehearsal on a fork caught it


@pytest.mark.parametrize("wei", [0, 10**9])
def test_deployer_that_cannot_pay_is_refused_and_nothing_is_sent(
    anvil: AnvilNode, w3: Web3, probe_artifact: Artifact, registry: AbiRegistry, wei: int
) -> None:
    account = fresh_account(w3, anvil, f"poor {wei}", wei)

    with pytest.raises(InsufficientFunds, match=f"deployer {account.address} holds {wei} wei") as caught:
        deploy(w3, account, rpc_url=anvil.rpc_url, recipe=probe_recipe(probe_artifact), registry=registry)

    assert "gas" in str(caught.value)
    assert w3.eth.get_transaction_count(account.address) == 0
    assert w3.eth.get_balance(account.address) == wei


def test_deploy_without_rpc_url_uses_a_local_chain_and_stops_it(
    probe_artifact: Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)
    out = tmp_path / "deployment.json"

    deployment = run_deploy(DeployRequest(out=out, chain_id=777), recipe=probe_recipe(probe_artifact))

    assert load_deployment(out) == deployment
    assert deployment.chain_id == 777
    assert deployment.deployer == "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"  # Anvil's public account 0
    with pytest.raises(ChainError, match="no Ethereum node answers"):
        open_deployment(out)  # the node is gone


def test_deploying_again_keeps_the_earlier_deployment_file_beside_the_new_one(
    probe_artifact: Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)
    out = tmp_path / "deployment.json"
    first = run_deploy(DeployRequest(out=out, chain_id=777), recipe=probe_recipe(probe_artifact))

    second = run_deploy(DeployRequest(out=out, chain_id=778), recipe=probe_recipe(probe_artifact))
    third = run_deploy(DeployRequest(out=out, chain_id=779), recipe=probe_recipe(probe_artifact))

    kept = sorted(tmp_path.glob("deployment.replaced-*.json"))
    assert load_deployment(out) == third
    assert sorted(load_deployment(path).chain_id for path in kept) == [first.chain_id, second.chain_id]


def test_deploy_refuses_an_out_folder_it_cannot_write_before_deploying(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")

    with pytest.raises(ConfigError, match="cannot write into the folder") as caught:
        run_deploy(DeployRequest(out=tmp_path / "a-file" / "deployment.json", chain_id=777))  # no node is started
    assert "--out" in (caught.value.hint or "")


def test_a_deployment_file_that_cannot_be_written_after_deploying_is_reported_with_the_record(
    probe_artifact: Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare: the disk fills up between the check and the write (a fault injected into the file system only)
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)

    def disk_full(self: Deployment, path: Path) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Deployment, "save", disk_full)

    # execute
    with pytest.raises(
        DeploymentError, match="the contracts are deployed, but the deployment file could not be written"
    ) as caught:
        run_deploy(DeployRequest(out=tmp_path / "deployment.json", chain_id=777), recipe=probe_recipe(probe_artifact))

    # assert: the record of where the contracts are is in the error, whole
    record = json.loads((caught.value.hint or "").split("where they are: ", 1)[1])
    assert record["chain_id"] == 777 and record["contracts"]


def test_keeping_a_file_aside_never_reuses_a_name(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    kept = []
    for content in ("a", "b", "c"):  # within one second: the stamp alone would repeat
        path.write_text(content)
        kept.append(keep_aside(path))

    assert not path.exists() and keep_aside(path) is None
    assert [k.read_text() for k in kept if k is not None] == ["a", "b", "c"]


def test_deploy_to_an_unreachable_node_fails_and_touches_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + "11" * 32)
    out = tmp_path / "deployment.json"
    url = f"http://127.0.0.1:{free_port()}"

    committee = ["--arbiter", ARBITER]  # a complete request: only the node is missing

    code = main(["deploy", "--rpc-url", url, "--out", str(out), *committee])

    assert code == 1 and f"no Ethereum node answers at {url}" in capsys.readouterr().err
    assert not out.exists()
    out.write_text("an earlier deployment")
    assert main(["deploy", "--rpc-url", url, "--out", str(out), *committee]) == 1
    assert [path.name for path in tmp_path.iterdir()] == [out.name] and out.read_text() == "an earlier deployment"


def test_deploy_to_a_chain_that_stays_up_without_an_arbiter_is_refused_before_anything_is_sent(
    anvil: AnvilNode, w3: Web3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prepare: a funded deployer key, its nonce before
    deployer = anvil.dev_account(5)
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + deployer.key.hex())
    out = tmp_path / "d.json"
    nonce = w3.eth.get_transaction_count(deployer.address)

    # execute: the command line, and the request behind it
    code = main(["deploy", "--rpc-url", anvil.rpc_url, "--out", str(out)])
    err = capsys.readouterr().err
    with pytest.raises(ConfigError, match="needs its arbiter committee") as caught:
        run_deploy(DeployRequest(rpc_url=anvil.rpc_url, out=out))

    # assert: a clear error saying what to pass; nothing deployed, no file
    assert code == 1
    assert "a deployment on a chain that stays up needs its arbiter committee, fixed for good at deployment" in err
    assert "hint: name each member with --arbiter ADDRESS" in err and "--quorum M" in err
    assert "--arbiter ADDRESS" in (caught.value.hint or "")
    assert w3.eth.get_transaction_count(deployer.address) == nonce
    assert not out.exists()


@pytest.mark.parametrize(
    "flags",
    [("--quorum", "2"), ("--verdict-window", "3h"), ("--sink", ARBITER)],
    ids=["quorum", "verdict-window", "sink"],
)
def test_committee_settings_without_its_members_are_a_usage_error(
    flags: tuple[str, ...],
    anvil: AnvilNode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + anvil.dev_account(5).key.hex())

    code = main(["deploy", "--rpc-url", anvil.rpc_url, *flags, "--out", str(tmp_path / "d.json")])

    assert code == 2
    assert f"{flags[0]} set the arbiter committee: name its members too, with --arbiter ADDRESS for each" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize(
    "flags", [("--arbiter", "nope"), ("--arbiter", ARBITER, "--sink", "0x12")], ids=["arbiter", "sink"]
)
def test_a_malformed_arbiter_or_sink_is_a_config_error_before_anything_is_deployed(
    flags: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)

    code = main(["deploy", *flags, "--out", str(tmp_path / "d.json")])

    err = capsys.readouterr().err
    assert code == 1 and "not an address" in err and "hint:" in err
    assert not (tmp_path / "d.json").exists()


def test_deploy_refuses_the_wrong_chain_id(anvil: AnvilNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + anvil.dev_account(6).key.hex())

    with pytest.raises(ChainError, match="serves chain id 31337, not the expected 5"):
        run_deploy(
            DeployRequest(
                rpc_url=anvil.rpc_url, chain_id=5, out=tmp_path / "d.json", arbiters=ArbiterSettings.of([ARBITER])
            )
        )

    assert not (tmp_path / "d.json").exists()


def test_deploy_to_a_remote_node_needs_a_key(anvil: AnvilNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)

    with pytest.raises(SigningKeyError, match="no key"):
        run_deploy(DeployRequest(rpc_url=anvil.rpc_url, out=tmp_path / "d.json"))


def test_deploy_signs_with_a_keystore(
    anvil: AnvilNode, w3: Web3, probe_artifact: Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fedchain.chain.keys import write_keystore

    account = fresh_account(w3, anvil, "keystore", 10**18)
    keystore = write_keystore(account, tmp_path / "key.json", "s3cret", kdf="pbkdf2", iterations=2)
    monkeypatch.setenv(KEYSTORE_PASSWORD_ENV, "s3cret")
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)

    deployment = run_deploy(
        DeployRequest(rpc_url=anvil.rpc_url, keystore=keystore, out=tmp_path / "d.json"),
        recipe=probe_recipe(probe_artifact),
    )

    assert deployment.deployer == account.address
    assert w3.eth.get_transaction_count(account.address) == 1
