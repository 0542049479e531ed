"""The committed bindings match the contracts, and drive the real deployment with typed values and errors."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from eth_utils import keccak
from web3 import Web3

from fedchain.chain import bindings
from fedchain.chain.bindings import FedChainContracts, TaskCreated, TaskParams, TaskUnknown
from fedchain.chain.codegen import BINDINGS_PATH, render
from fedchain.chain.codegen import main as codegen_main
from fedchain.chain.compile import PROJECT_ROOT, Artifact, compile_contracts
from fedchain.chain.deployment import Deployment, deploy
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.chain.node import AnvilNode
from fedchain.chain.tx import Transactor
from fedchain.errors import ContractRevert
from fedchain.fl.reputation import minimum_aggregator_bond

WAD = 10**18


def test_committed_bindings_are_generated_from_the_current_contracts() -> None:
    expected = render(compile_contracts())

    assert BINDINGS_PATH.read_text() == expected, "bindings are stale: run `python -m fedchain.chain.codegen`"
    assert codegen_main(["--check"]) == 0


def test_every_contract_error_and_event_has_a_binding() -> None:
    artifacts = compile_contracts()
    declared = {e["name"] for a in artifacts.values() for e in a.abi if e["type"] in ("error", "event")}

    bound = {cls.abi["name"] for cls in bindings.REGISTRY.errors} | {
        cls.abi["name"] for cls in bindings.REGISTRY.events
    }

    assert declared <= bound
    assert set(bindings.CONTRACTS) >= {"Treasury", "TaskRegistry", "RoundLedger", "FogAuction"}
    assert all(issubclass(cls, ContractRevert) for cls in bindings.REGISTRY.errors)


def test_compile_cache_is_read_the_second_time_and_keyed_by_source(probe_artifact: Artifact, tmp_path: Path) -> None:
    sources = tmp_path / "contracts"
    shutil.copytree(Path(__file__).with_name("contracts"), sources)
    build = tmp_path / "build"
    build.mkdir()
    for cached in (PROJECT_ROOT / "build" / "test-contracts").glob(
        "artifacts-*.json"
    ):  # the session compiled these sources
        shutil.copy(cached, build)
    (cache,) = build.glob("artifacts-*.json")
    marked = json.loads(cache.read_text())
    marked["Probe"]["bytecode"] = "0xfeed"  # only a cache read can return this
    cache.write_text(json.dumps(marked))

    second = compile_contracts(sources, build)
    (sources / "Probe.sol").write_text((sources / "Probe.sol").read_text() + "\n// changed\n")
    third = compile_contracts(sources, build)

    assert second["Probe"].bytecode == "0xfeed"
    assert third["Probe"].bytecode != "0xfeed"  # recompiled (only the metadata hash differs from the first)
    assert third["Probe"].abi == probe_artifact.abi
    assert [p.name for p in build.glob("artifacts-*.json")] != [cache.name]  # a new key, the stale file gone


@pytest.fixture(scope="module")
def fedchain(anvil: AnvilNode, w3: Web3) -> tuple[FedChainContracts, Deployment]:
    account = anvil.dev_account(7)
    deployment = deploy(w3, account, rpc_url=anvil.rpc_url)
    return FedChainContracts.bind(deployment, Transactor(w3, account)), deployment


def task_params(**changes: Any) -> TaskParams:
    params = TaskParams(
        model_id=keccak(text="lenet5"),
        dataset_id=keccak(text="mnist"),
        rounds=3,
        target_accuracy=0,
        expected_duration=600,
        psi=10**15,
        phi=10**12,
        min_loss_reputation=WAD // 10,
        min_time_reputation=WAD // 10,
        min_quality=WAD // 2,
        max_round_time=300,
        reputation_cap=10 * WAD,
        client_deposit=10**16,
        fog_deposit=2 * 10**16,
        cycles_per_sample=1000,
        round_duration=400,
        bidding_duration=100,
        reveal_duration=100,
        time_tolerance=5,
        max_clients=50,
        second_price=False,
        challenge_window=3600,
        challenge_bond=5 * 10**15,
        aggregator_bond=minimum_aggregator_bond(50, 10**16, 10**15, 10 * WAD, WAD),  # the least for a budget of 1 ether
        self_trained=False,
    )
    return params._replace(**changes)


def test_typed_transaction_returns_typed_event_with_struct(
    fedchain: tuple[FedChainContracts, Deployment], w3: Web3
) -> None:
    contracts, deployment = fedchain
    params = task_params()

    receipt = contracts.task_registry.create_task(params, contracts.task_registry.transactor.address, value=WAD)

    (created,) = receipt.events_of(TaskCreated)
    assert isinstance(created, TaskCreated) and dataclasses.is_dataclass(created)
    assert created.budget == WAD and created.params == params and isinstance(created.params, TaskParams)
    history = fetch_events(w3, bindings.REGISTRY, LogQuery.of(deployment))
    assert created in history


def test_custom_error_becomes_its_generated_exception_class(fedchain: tuple[FedChainContracts, Deployment]) -> None:
    contracts, _ = fedchain

    with pytest.raises(TaskUnknown) as caught:
        contracts.task_registry.cancel_task(999_999)

    assert caught.value.task_id == 999_999
    assert caught.value.hint == "No task has this id."
    assert "TaskUnknown(task_id=999999)" in str(caught.value)


def test_invalid_struct_field_is_named_by_the_contract(fedchain: tuple[FedChainContracts, Deployment]) -> None:
    contracts, _ = fedchain

    with pytest.raises(bindings.TaskInvalidParameter) as caught:
        contracts.task_registry.create_task(
            task_params(rounds=0), contracts.task_registry.transactor.address, value=WAD
        )

    assert caught.value.field.rstrip(b"\0") == b"rounds" and caught.value.value == 0


def test_an_aggregator_bond_below_what_one_round_can_move_is_refused_naming_the_least(
    fedchain: tuple[FedChainContracts, Deployment],
) -> None:
    contracts, _ = fedchain
    least = task_params().aggregator_bond
    count = contracts.task_registry.task_count()

    with pytest.raises(bindings.TaskBondTooSmall) as caught:
        contracts.task_registry.create_task(
            task_params(aggregator_bond=least - 1), contracts.task_registry.transactor.address, value=WAD
        )

    assert (caught.value.bond, caught.value.minimum) == (least - 1, least)
    assert contracts.task_registry.task_count() == count
