"""`fedchain task create|show|start|cancel|abandon|settle` and `fedchain withdraw` against a real Anvil."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from eth_utils import to_checksum_address
from rich.console import Console

from fedchain.chain.bindings import TaskStatus
from fedchain.chain.compile import compile_contracts
from fedchain.chain.contract import Contract
from fedchain.chain.erc20 import payment_value
from fedchain.cli import main
from fedchain.client.commitments import data_commitment
from fedchain.console import print_table
from fedchain.fl.reputation import ABANDON_GRACE
from fedchain.publisher.cli import progress_line, render_task
from fedchain.publisher.service import Readiness, post_bond, start_when_ready, task_view
from fedchain.store.digest import keccak256
from fedchain.taskspec import TaskSpec, ValidationSpec, load_model, load_spec
from tests.aggregator.conftest import AGGREGATOR, CLIENTS, FOGS, PUBLISHER, TERMS, World


def key_of(world: World, account: int) -> str:
    return "0x" + world.node.dev_account(account).key.hex()


def run_cli(world: World, account: int, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run `fedchain ARGS` as ``account`` against the world's deployment and store; returns the exit status."""
    monkeypatch.setenv("FEDCHAIN_PRIVATE_KEY", key_of(world, account))
    common = ["--deployment", str(world.deployment_file), "--store", world.store_url]
    return main([*args, *common])


def create_with_cli(world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *extra: str) -> int:
    status = run_cli(
        world,
        PUBLISHER,
        "task",
        "create",
        "--rounds",
        "3",
        "--budget",
        "0.5ether",
        "--psi",
        "2gwei",
        "--min-quality",
        "0.25",
        "--dataset",
        "mnist",
        "--model",
        "lenet5",
        "--strategy",
        "cgsv",
        "--aggregator",
        world.aggregator.address,
        *extra,
        monkeypatch=monkeypatch,
    )
    assert status == 0
    return int(capsys.readouterr().out.strip().splitlines()[-1])


def test_task_create_escrows_the_budget_and_names_spec_and_initial_model_by_their_hashes(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # execute
    task_id = create_with_cli(world, monkeypatch, capsys)

    # assert: the chain's terms in its units, the spec and the model in the store under the on-chain ids
    contracts = world.publisher.contracts
    params, state = contracts.task_registry.params(task_id), contracts.task_registry.state(task_id)
    assert (params.rounds, params.psi, params.min_quality) == (3, 2 * 10**9, 25 * 10**16)
    assert (state.budget, state.aggregator, state.status) == (5 * 10**17, world.aggregator.address, TaskStatus.OPEN)
    spec = load_spec(world.publisher.store, params.dataset_id)
    assert (spec.dataset, spec.model, spec.strategy) == ("mnist", "lenet5", "cgsv")
    assert keccak256(spec.to_bytes()) == params.dataset_id
    model = load_model(world.publisher.store, spec, params.model_id, round_number=0)
    assert set(model) == set(spec.param_spec().names)


def test_task_show_prints_terms_state_and_every_client(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[0], data_size=50)

    monkeypatch.delenv("FEDCHAIN_PRIVATE_KEY")  # anyone may look: no key needed to read

    status = main(
        ["task", "show", "--task", str(task_id), "--deployment", str(world.deployment_file), "--store", world.store_url]
    )

    out = capsys.readouterr().out
    assert status == 0
    assert f"task {task_id}: open" in out and "round" in out and "0 of 3" in out
    assert world.session(CLIENTS[0]).address in out and "bidding" in out and "cgsv" in out


def test_on_a_narrow_terminal_task_show_keeps_every_address_and_hash_whole(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[0], data_size=50)
    summary, clients = render_task(task_view(world.publisher, task_id))
    console = Console(width=80, record=True, color_system=None)

    console.print(summary)
    print_table(console, clients, labels=2)

    text = re.sub(r"[\s│]", "", console.export_text())  # a value folded over lines reads whole again
    params = world.publisher.contracts.task_registry.params(task_id)
    assert world.session(CLIENTS[0]).address in text and "0x" + params.dataset_id.hex() in text
    assert "…" not in text


def test_task_start_without_clients_fails_with_the_contracts_error(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = create_with_cli(world, monkeypatch, capsys)

    status = run_cli(world, PUBLISHER, "task", "start", "--task", str(task_id), monkeypatch=monkeypatch)

    assert status == 1
    assert "TaskHasNoClients" in capsys.readouterr().err
    assert world.publisher.contracts.task_registry.state(task_id).status == TaskStatus.OPEN


def test_task_start_by_another_account_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[1], data_size=50)

    status = run_cli(world, AGGREGATOR, "task", "start", "--task", str(task_id), monkeypatch=monkeypatch)

    assert status == 1 and "TaskNotPublisher" in capsys.readouterr().err


def test_task_cancel_settle_and_withdraw_return_the_budget_and_the_deposits(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: a task with one client, then cancelled by its publisher
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[2], data_size=50)
    treasury = world.publisher.contracts.treasury
    before = treasury.claimable(world.publisher.address)

    # execute
    assert run_cli(world, PUBLISHER, "task", "cancel", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    assert run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    balance = world.publisher.w3.eth.get_balance(world.publisher.address)
    assert run_cli(world, PUBLISHER, "withdraw", monkeypatch=monkeypatch) == 0
    assert run_cli(world, PUBLISHER, "withdraw", monkeypatch=monkeypatch) == 0

    # assert: the budget was claimable, then withdrawn (less gas); the client's deposit is claimable; a second withdraw has nothing
    out = capsys.readouterr().out
    assert world.publisher.contracts.task_registry.state(task_id).status == TaskStatus.CANCELLED
    withdrawn = before + 5 * 10**17
    assert f"withdrew {withdrawn} wei" in out and "nothing to withdraw" in out
    gained = world.publisher.w3.eth.get_balance(world.publisher.address) - balance
    assert withdrawn - 10**15 < gained <= withdrawn
    assert (
        treasury.claimable(world.session(CLIENTS[2]).address)
        >= world.publisher.contracts.task_registry.params(task_id).client_deposit
    )


def test_task_create_reads_a_yaml_file_and_flags_override_it(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    config = tmp_path / "task.yaml"
    config.write_text(
        "rounds: 7\nbudget: 2ether\nterms: {round_duration: 90}\nspec: {model: lenet5, lr: 0.2, validation: {seed: 4}}\n"
    )

    task_id = create_with_cli(
        world, monkeypatch, capsys, "--config", str(config), "--round-duration", "45", "--validation-size", "300"
    )

    params = world.publisher.contracts.task_registry.params(task_id)
    assert (params.rounds, params.round_duration) == (3, 45)  # --rounds 3 and --round-duration win over the file
    assert world.publisher.contracts.task_registry.state(task_id).budget == 5 * 10**17
    expected = TaskSpec(model="lenet5", lr=0.2, strategy="cgsv", validation=ValidationSpec(size=300, seed=4))
    assert load_spec(world.publisher.store, params.dataset_id) == expected


def test_the_example_task_config_creates_its_task(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    example = Path(__file__).parents[2] / "configs" / "system" / "task.yaml"

    status = run_cli(
        world,
        PUBLISHER,
        "task",
        "create",
        "--config",
        str(example),
        "--aggregator",
        world.aggregator.address,
        monkeypatch=monkeypatch,
    )

    assert status == 0
    task_id = int(capsys.readouterr().out.strip().splitlines()[-1])
    params = world.publisher.contracts.task_registry.params(task_id)
    assert (params.rounds, params.bidding_duration, params.client_deposit) == (5, 300, 10**15)
    spec = load_spec(world.publisher.store, params.dataset_id)
    assert (spec.model, spec.strategy, spec.privacy_epsilon) == ("lenet5", "fedavg", 2.0)


def test_a_budget_or_deposit_the_contracts_cannot_hold_is_refused_before_anything_is_sent(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    registry = world.publisher.contracts.task_registry
    tasks_before = registry.task_count()

    budget = run_cli(world, PUBLISHER, "task", "create", "--budget", str(2**96), monkeypatch=monkeypatch)
    budget_err = capsys.readouterr().err
    deposit = run_cli(
        world, PUBLISHER, "task", "create", "--client-deposit", "79228162515ether", monkeypatch=monkeypatch
    )
    deposit_err = capsys.readouterr().err

    assert (budget, deposit) == (1, 1)
    assert (
        f"budget {2**96} wei: at most {2**96 - 1} wei (about 7.92e+10 ether); set --budget (budget) lower" in budget_err
    )
    assert "client_deposit 79228162515000000000000000000 wei: at most" in deposit_err
    assert "--client-deposit (terms.client_deposit)" in deposit_err
    assert registry.task_count() == tasks_before
    assert [path for path in Path(world.store_url).rglob("*") if path.is_file()] == []  # not even the spec was written


@pytest.mark.parametrize("mine", [True, False], ids=["block-mined", "latest-block-stale"])
def test_task_abandon_before_the_grace_says_from_when_and_after_it_refunds_the_unspent_budget(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, mine: bool
) -> None:
    # prepare: a running task whose aggregator never posts round 1
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)]})
    registry = world.publisher.contracts.task_registry
    state = registry.state(task_id)
    opens = state.round_started_at + TERMS.round_duration + ABANDON_GRACE + 1

    # execute: too early, then a day and the round later, then once more
    early = run_cli(world, FOGS[1], "task", "abandon", "--task", str(task_id), monkeypatch=monkeypatch)
    early_err = capsys.readouterr().err
    if mine:
        world.advance(opens - world.publisher.block_time())
    else:  # as on a local chain nobody used for a day: the gas estimate runs on a day-old block and says too early
        world.publisher.w3.provider.make_request("evm_increaseTime", [opens - world.publisher.block_time()])
    treasury = world.publisher.contracts.treasury
    claimable = treasury.claimable(world.publisher.address)
    bond_claimable = treasury.claimable(world.aggregator.address)
    done = run_cli(world, FOGS[1], "task", "abandon", "--task", str(task_id), monkeypatch=monkeypatch)
    done_out = capsys.readouterr().out
    after_abandon = treasury.claimable(world.publisher.address)
    again = run_cli(world, FOGS[1], "task", "abandon", "--task", str(task_id), monkeypatch=monkeypatch)
    again_err = capsys.readouterr().err
    settled = run_cli(world, FOGS[1], "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch)
    settled_out = capsys.readouterr().out

    # assert: the refusal names the UTC time and how long until it; anyone may abandon then; the budget comes back
    # at settlement (nothing was posted, so nothing is pending), and the silent aggregator's bond to the sink
    assert early == 1
    opening = datetime.fromtimestamp(opens, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"task {task_id} cannot be abandoned before {opening}, in 1 d" in early_err
    assert done == 0
    assert f"task {task_id} abandoned at round 1 (tx 0x" in done_out
    assert f"next: fedchain task settle --task {task_id}" in done_out
    assert after_abandon == claimable  # abandoning moves no money: the refund waits for settlement
    assert again == 1 and f"task {task_id} is abandoned, not running" in again_err
    assert settled == 0 and f"task {task_id} settled (tx 0x" in settled_out
    assert registry.state(task_id).status == TaskStatus.ABANDONED  # a terminal status: settling leaves it
    assert treasury.claimable(world.publisher.address) == claimable + state.budget_left
    assert treasury.claimable(world.aggregator.address) == bond_claimable


def test_an_open_task_cannot_be_abandoned(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = create_with_cli(world, monkeypatch, capsys)

    status = run_cli(world, PUBLISHER, "task", "abandon", "--task", str(task_id), monkeypatch=monkeypatch)

    assert status == 1 and f"task {task_id} is open, not running" in capsys.readouterr().err


def test_a_fee_cap_that_is_not_an_amount_is_refused_before_anything_is_sent(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: the publisher's nonce before
    before = world.publisher.w3.eth.get_transaction_count(world.publisher.address)

    # execute
    status = run_cli(world, PUBLISHER, "withdraw", "--max-fee", "lots", monkeypatch=monkeypatch)

    # assert: a usage error naming the option; nothing was sent
    assert status == 2
    assert "--max-fee" in capsys.readouterr().err
    assert world.publisher.w3.eth.get_transaction_count(world.publisher.address) == before


def test_a_fee_cap_above_the_base_fee_lets_the_command_through(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # execute: a cap far above what the local chain charges
    status = run_cli(world, PUBLISHER, "withdraw", "--max-fee", "1000gwei", monkeypatch=monkeypatch)

    # assert
    assert status == 0


def test_task_start_while_a_job_is_in_its_auction_is_refused_naming_the_client_until_forced(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: client 0's job is still taking bids; the aggregator is bonded
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[0], data_size=50)
    post_bond(world.aggregator, task_id)
    client = world.session(CLIENTS[0]).address

    # execute: a plain start, then a forced one
    refused = run_cli(world, PUBLISHER, "task", "start", "--task", str(task_id), monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    status_after_refusal = world.publisher.contracts.task_registry.state(task_id).status
    forced = run_cli(world, PUBLISHER, "task", "start", "--task", str(task_id), "--force", monkeypatch=monkeypatch)

    # assert: refused with the client and its auction named and what to do; nothing sent; forced, it starts
    assert refused == 1 and f"client 0 ({client}): its auction takes bids" in err and "--wait" in err
    assert status_after_refusal == TaskStatus.OPEN
    assert forced == 0 and world.publisher.contracts.task_registry.state(task_id).status == TaskStatus.RUNNING


def test_task_start_when_ready_waits_for_the_auction_and_the_hand_off_then_starts(world: World) -> None:
    # prepare: a client whose job is in its auction; each time the publisher finds it waiting, the job moves on a step
    task_id = world.create()
    world.join_and_auction(task_id, CLIENTS[0], data_size=64)
    post_bond(world.aggregator, task_id)
    client = world.session(CLIENTS[0])
    steps = iter(
        [
            lambda: world.bid(task_id, 0, FOGS[0], 10**9, 10**12),
            lambda: world.advance(TERMS.bidding_duration + 1),
            lambda: world.reveal(task_id, 0, FOGS[0], 10**9, 10**12),
            lambda: world.advance(TERMS.reveal_duration + 1),
            lambda: world.close(task_id, 0, CLIENTS[0]),
            lambda: client.contracts.data_handoff.commit_data(task_id, 0, keccak256(b"the client's data")),
        ]
    )
    seen: list[str] = []

    def report(ready: Readiness) -> None:
        seen.append(ready.reasons()[0])
        next(steps)()

    # execute
    start_when_ready(world.publisher, task_id, poll_s=0, report=report)

    # assert: it waited through the auction and the hand-off, and started only after the data was committed
    assert world.publisher.contracts.task_registry.state(task_id).status == TaskStatus.RUNNING
    assert len(seen) == 6 and "takes bids" in seen[0] and "handed its data" in seen[-1]
    assert next(steps, None) is None


def test_task_show_says_whose_data_the_start_waits_for(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)], 1: [(FOGS[1], 10**12)]}, start=False)
    world.session(CLIENTS[0]).contracts.data_handoff.commit_data(task_id, 0, keccak256(b"data of client 0"))
    monkeypatch.delenv("FEDCHAIN_PRIVATE_KEY", raising=False)

    status = main(
        ["task", "show", "--task", str(task_id), "--deployment", str(world.deployment_file), "--store", world.store_url]
    )

    out = capsys.readouterr().out
    assert status == 0 and "no: waiting for client(s) 1" in out
    blocks = out.split("clients and jobs")[1]
    first, second = blocks.split("\n1 · ")
    assert "data handed off" in first and "data waiting: has not handed its data" in second


@pytest.mark.parametrize(
    "command",
    [
        ("task", "show"),
        ("task", "watch"),
        ("task", "start"),
        ("task", "cancel"),
        ("task", "settle"),
        ("task", "abandon"),
        ("challenge", "list"),
    ],
)
def test_a_task_that_does_not_exist_is_named_with_the_tasks_there_are(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, command: tuple[str, str]
) -> None:
    missing = world.publisher.contracts.task_registry.task_count() + 7

    status = run_cli(world, PUBLISHER, *command, "--task", str(missing), monkeypatch=monkeypatch)

    err = capsys.readouterr().err
    assert status == 1 and f"there is no task {missing} on this deployment" in err and "revert" not in err.lower()


def test_read_only_commands_offer_no_signing_or_fee_options(capsys: pytest.CaptureFixture) -> None:
    assert main(["task", "show", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--deployment" in text and "--keystore" not in text and "--max-fee" not in text


def test_withdraw_leaves_an_amount_smaller_than_its_gas_unless_told_anyway(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: a task whose client deposit is 1 wei, cancelled: the client can claim 1 wei
    task_id = create_with_cli(world, monkeypatch, capsys, "--client-deposit", "1")
    client = world.session(CLIENTS[3])
    client.contracts.round_ledger.join(task_id, data_commitment(50, keccak256(b"salt")), value=1)
    assert run_cli(world, PUBLISHER, "task", "cancel", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    assert run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    treasury = world.publisher.contracts.treasury
    before = treasury.claimable(client.address)
    capsys.readouterr()

    # execute
    first = run_cli(world, CLIENTS[3], "withdraw", monkeypatch=monkeypatch)
    kept = treasury.claimable(client.address)
    out = capsys.readouterr().out
    anyway = run_cli(world, CLIENTS[3], "withdraw", "--anyway", monkeypatch=monkeypatch)

    # assert: the dust stays claimable with the reason; --anyway takes it
    assert before == 1 and first == 0 and kept == 1
    assert "not withdrawn: 1 wei" in out and "gas" in out and "--anyway" in out
    assert anyway == 0 and treasury.claimable(client.address) == 0 and "withdrew 1 wei" in capsys.readouterr().out


def test_task_watch_follows_a_task_to_its_end_and_prints_where_it_stands(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: a task with one client whose job is in its auction, then cancelled and settled
    task_id = create_with_cli(world, monkeypatch, capsys)
    world.join_and_auction(task_id, CLIENTS[4], data_size=50)
    open_line = progress_line(task_view(world.publisher, task_id))
    assert run_cli(world, PUBLISHER, "task", "cancel", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    assert run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    capsys.readouterr()
    monkeypatch.delenv("FEDCHAIN_PRIVATE_KEY")

    # execute: piped, a watch of an ended task prints its line and tables and returns
    status = main(
        [
            "task",
            "watch",
            "--task",
            str(task_id),
            "--deployment",
            str(world.deployment_file),
            "--store",
            world.store_url,
        ]
    )

    # assert
    out = capsys.readouterr().out
    assert open_line.startswith(f"task {task_id}: open · round 0 of 3 · 1 client(s) · jobs 1 bidding")
    assert "data handed off 0/1" in open_line
    assert status == 0 and f"task {task_id}: cancelled" in out and "clients and jobs" in out
    assert world.session(CLIENTS[4]).address in out


def test_a_task_in_a_token_is_created_shown_and_withdrawn_in_it_to_another_recipient(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: a USDC-like token (6 decimals, a blacklist) that the publisher and a client hold
    publisher, client = world.publisher, world.session(CLIENTS[3])
    artifact = compile_contracts()["BlacklistToken"]
    token = Contract.deploy(publisher.transactor, artifact.bytecode, abi=artifact.abi)
    for session in (publisher, client):
        token.transact("mint", session.address, 10**12)

    # execute: a task of 250 USDC whose deposits are in USDC too; a client joins (the agent's payment path),
    # the task is cancelled and settled; the client, blacklisted, withdraws to another address
    task_id = create_with_cli(
        world, monkeypatch, capsys, "--token", token.address, "--budget", "250000000", "--client-deposit", "5000000"
    )
    value = payment_value(client.contracts.treasury, task_id, 5_000_000)
    client.contracts.round_ledger.join(task_id, data_commitment(50, b"\1" * 32), value=value)
    assert run_cli(world, PUBLISHER, "task", "show", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    shown = capsys.readouterr().out
    assert run_cli(world, PUBLISHER, "task", "cancel", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    assert run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch) == 0
    token.transact("setBlacklisted", client.address, True)
    refused = run_cli(world, CLIENTS[3], "withdraw", "--token", token.address, monkeypatch=monkeypatch)
    cold = "0x" + "c0" * 20
    moved = run_cli(world, CLIENTS[3], "withdraw", "--token", token.address, "--to", cold, monkeypatch=monkeypatch)
    assert run_cli(world, PUBLISHER, "withdraw", "--token", token.address, monkeypatch=monkeypatch) == 0
    out = capsys.readouterr().out

    # assert: amounts are the token's smallest units, shown with its symbol and decimals; the refused withdrawal
    # changed nothing, the second went to the cold address; the publisher got its budget back in the token
    assert "250 bUSD (250000000 units)" in shown and "5 bUSD (5000000 units)" in shown
    assert refused != 0 and moved == 0
    assert token.call("balanceOf", to_checksum_address(cold)) == 5_000_000
    assert "withdrew 250 bUSD (250000000 units)" in out
    assert token.call("balanceOf", publisher.address) == 10**12
    assert int(world.publisher.contracts.treasury.claimable_in(token.address, publisher.address)) == 0
