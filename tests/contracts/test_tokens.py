"""Tasks in an ERC-20 token: what arrives is checked, payouts are pulled to any recipient, odd tokens are handled.

Each test deploys one of the tokens written for them (contracts/test/tokens): a permit token of any
decimals, a USDC-like one with a blacklist and a pause, a USDT-like one that returns no bool, one that
returns false, a fee-on-transfer one and one that reverts on zero-value transfers.
"""

from __future__ import annotations

from typing import Any

from eth_account import Account

from fedchain.chain import bindings
from fedchain.chain.contract import Contract
from fedchain.chain.erc20 import sign_permit
from fedchain.chain.tx import Receipt
from tests.contracts.conftest import (
    AGGREGATOR,
    CLIENTS,
    FOGS,
    PUBLISHER,
    STRANGER,
    ZERO_ADDRESS,
    FedChain,
    TaskParams,
    data_commitment,
)

BUDGET = 10**18


def settle_and_withdraw_everything(chain: FedChain, task: int, accounts: tuple[int, ...]) -> dict[int, int]:
    """Run the staffed task's rounds to the end, settle it and its jobs, and let everyone owed withdraw;
    returns what each of ``accounts`` withdrew."""
    params = TaskParams()
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    for round_ in range(1, params.rounds + 1):
        start = chain.view("TaskRegistry", "state", task).round_started_at
        for index in range(2):
            chain.set_next_timestamp(start + 10 * (index + 1))
            chain.commit_update(task, index, FOGS[index], round_)
        chain.post_round(task, round_, [(10**18, 10, True), (10**18, 20, True)])
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJobs", task, [0, 1], by=STRANGER)
    withdrew = {}
    for account in accounts:
        owed = chain.claimable(account)
        if owed:
            chain.withdraw(account)
        withdrew[account] = owed
    return withdrew


def assert_solvent_and_empty(chain: FedChain) -> None:
    totals = chain.solvency()
    assert totals.balance == totals.held + totals.claimable
    assert totals.deposited == totals.withdrawn + totals.held + totals.claimable


def test_a_whole_task_in_a_permit_token_pays_every_unit_in_and_out(chain: FedChain) -> None:
    token = chain.use_token("PermitToken", 18)
    task = chain.staffed_task()
    assert chain.view("Treasury", "tokenOf", task) == token.address
    # Nothing of the task is in ether: the ether totals never moved.
    assert chain.view("Treasury", "totals").deposited == 0
    accounts = (PUBLISHER, AGGREGATOR, *CLIENTS[:2], *FOGS[:2])
    before = {a: chain.asset_balance(chain.account(a)) for a in accounts}
    withdrew = settle_and_withdraw_everything(chain, task, accounts)
    for account in accounts:
        assert chain.asset_balance(chain.account(account)) == before[account] + withdrew[account]
    totals = chain.solvency()
    assert (totals.held, totals.claimable, totals.balance) == (0, 0, 0)
    assert totals.deposited == totals.withdrawn == sum(withdrew.values())
    # The auditor's money checks hold in token units.
    report = chain.audit(task)
    assert report.passed, report.failures()


def test_a_fee_on_transfer_token_is_refused_at_task_creation(chain: FedChain) -> None:
    token = chain.use_token("FeeToken")
    with chain.reverts(bindings.TreasuryTokenShortfall, token.address, BUDGET, BUDGET - BUDGET // 100):
        chain.create_task(budget=BUDGET, bond=False)


def test_a_payment_without_allowance_says_to_approve_and_ether_is_refused_on_a_token_task(chain: FedChain) -> None:
    token = chain.use_token("PermitToken", 18)
    params = TaskParams()
    publisher, aggregator = chain.account(PUBLISHER), chain.account(AGGREGATOR)
    with chain.reverts(bindings.TreasuryAllowanceTooLow, token.address, publisher, 0, BUDGET):
        chain.send(
            "TaskRegistry", "createTokenTask", params.as_tuple(), aggregator, token.address, BUDGET, by=PUBLISHER
        )
    task = chain.create_task(params, budget=BUDGET)
    commitment = data_commitment(600, b"\1" * 32)
    # Ether sent to a token task is refused by each module with its own error; 0 is what it expects.
    with chain.reverts(bindings.LedgerWrongDeposit, task, params.client_deposit, 0):
        chain.send("RoundLedger", "join", task, commitment, by=CLIENTS[0], value=params.client_deposit)
    with chain.reverts(
        bindings.TreasuryAllowanceTooLow, token.address, chain.account(CLIENTS[0]), 0, params.client_deposit
    ):
        chain.send("RoundLedger", "join", task, commitment, by=CLIENTS[0])
    assert chain.view("Treasury", "expectedValue", task, 5) == 0


def test_only_the_registry_binds_a_token_and_only_to_a_contract(chain: FedChain) -> None:
    chain.use_token("PermitToken", 18)
    with chain.reverts(bindings.TreasuryUnauthorized, chain.account(STRANGER)):
        chain.send("Treasury", "bindToken", 99, chain.token.address if chain.token else ZERO_ADDRESS, by=STRANGER)
    not_a_token = chain.account(STRANGER)
    with chain.reverts(bindings.TreasuryNotAToken, not_a_token):
        chain.send(
            "TaskRegistry",
            "createTokenTask",
            TaskParams().as_tuple(),
            chain.account(AGGREGATOR),
            not_a_token,
            BUDGET,
            by=PUBLISHER,
        )


def test_a_token_that_returns_false_moves_nothing_and_a_refused_withdrawal_can_be_retried(chain: FedChain) -> None:
    token = chain.use_token("FalseToken")
    token.transact("setRefuse", True)
    with chain.reverts(bindings.SafeERC20FailedOperation, token.address):
        chain.create_task(budget=BUDGET, bond=False)
    token.transact("setRefuse", False)
    task = chain.create_task(budget=BUDGET, bond=False)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    token.transact("setRefuse", True)
    with chain.reverts(bindings.SafeERC20FailedOperation, token.address):
        chain.withdraw(PUBLISHER)
    assert chain.claimable(PUBLISHER) == BUDGET  # the failed claim changed nothing
    token.transact("setRefuse", False)
    before = chain.asset_balance(chain.account(PUBLISHER))
    chain.withdraw(PUBLISHER)
    assert chain.asset_balance(chain.account(PUBLISHER)) == before + BUDGET
    assert_solvent_and_empty(chain)


def test_a_token_that_returns_no_bool_runs_a_whole_task(chain: FedChain) -> None:
    chain.use_token("NoBoolToken")
    task = chain.staffed_task()
    accounts = (PUBLISHER, AGGREGATOR, *CLIENTS[:2], *FOGS[:2])
    withdrew = settle_and_withdraw_everything(chain, task, accounts)
    assert all(withdrew.values())
    totals = chain.solvency()
    assert (totals.held, totals.claimable, totals.balance) == (0, 0, 0)


def test_a_blacklisted_payee_names_another_recipient_and_a_pause_blocks_nobody_for_good(chain: FedChain) -> None:
    token = chain.use_token("BlacklistToken")
    params = TaskParams()
    task = chain.create_task(params, budget=BUDGET, bond=False)
    chain.join(task, CLIENTS[0], params=params)
    chain.join(task, CLIENTS[1], params=params)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    blocked, other = chain.account(CLIENTS[0]), chain.account(CLIENTS[1])
    token.transact("setBlacklisted", blocked, True)
    with chain.reverts(bindings.Blacklisted, blocked):
        chain.withdraw(CLIENTS[0])
    # The blacklisted client's balance waits; everyone else is paid as usual.
    assert chain.claimable(CLIENTS[0]) == params.client_deposit
    chain.withdraw(CLIENTS[1])
    # It names a recipient of its own.
    fresh = Account.create().address
    chain.send("Treasury", "withdrawTo", token.address, fresh, by=CLIENTS[0])
    assert chain.asset_balance(fresh) == params.client_deposit
    # A pause blocks every transfer; the balances stay claimable and the claims go through after it.
    token.transact("setPaused", True)
    with chain.reverts(bindings.Paused):
        chain.withdraw(PUBLISHER)
    token.transact("setPaused", False)
    chain.withdraw(PUBLISHER)
    assert chain.asset_balance(other) > 0
    assert_solvent_and_empty(chain)
    assert chain.solvency().claimable == 0


def test_zero_amounts_never_call_a_token_that_refuses_zero_transfers(chain: FedChain) -> None:
    chain.use_token("ZeroRevertToken")
    params = TaskParams()
    task = chain.create_task(params, budget=BUDGET)
    chain.join(task, CLIENTS[0], params=params)
    chain.open_auction(task, CLIENTS[0])
    chain.advance(params.bidding_duration + params.reveal_duration + 2)
    receipt = chain.close_auction(task, 0, CLIENTS[0])  # no bid: an escrow of 0, no transfer
    assert receipt.events_of(bindings.AuctionClosed)[0].escrow == 0
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)
    for account in (PUBLISHER, AGGREGATOR, CLIENTS[0]):
        chain.withdraw(account)
    assert_solvent_and_empty(chain)


def test_decimals_do_not_matter_to_the_contracts(chain: FedChain) -> None:
    chain.use_token("PermitToken", 0)
    params = TaskParams(client_deposit=7, fog_deposit=3, challenge_bond=4, aggregator_bond=10**6, psi=1, phi=1)
    task = chain.create_task(params, budget=1000)
    chain.join(task, CLIENTS[0], params=params)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    assert (chain.claimable(PUBLISHER), chain.claimable(CLIENTS[0]), chain.claimable(AGGREGATOR)) == (1000, 7, 10**6)


def permit(chain: FedChain, token: Contract, owner: int, amount: int) -> tuple[Any, ...]:
    """An EIP-2612 permit of ``amount`` for the Treasury, signed by account ``owner`` as the agents sign it."""
    signed = sign_permit(chain.transactor(owner), token.address, chain.addresses["Treasury"], amount, chain.now())
    assert signed is not None
    return signed


def create_with_permit(chain: FedChain, signature: tuple[Any, ...]) -> Receipt:
    """The publisher's ``createTokenTaskWithPermit`` of the default terms and ``BUDGET`` in the helpers' token."""
    assert chain.token is not None
    return chain.send(
        "TaskRegistry",
        "createTokenTaskWithPermit",
        TaskParams().as_tuple(),
        chain.account(AGGREGATOR),
        chain.token.address,
        BUDGET,
        signature,
        by=PUBLISHER,
    )


def test_permit_pays_in_one_transaction_and_a_front_run_permit_does_no_harm(chain: FedChain) -> None:
    token = chain.use_token("PermitToken", 18)
    params = TaskParams()
    receipt = create_with_permit(chain, permit(chain, token, PUBLISHER, BUDGET))
    task = receipt.events_of(bindings.TaskCreated)[0].task_id
    assert chain.view("Treasury", "held", task) == BUDGET
    # A client's permit seen in the mempool and submitted first by someone else: the join still goes through.
    client = chain.account(CLIENTS[0])
    signed = permit(chain, token, CLIENTS[0], params.client_deposit)
    Contract(chain.transactor(STRANGER), token.address, token.abi).transact(
        "permit", client, chain.addresses["Treasury"], params.client_deposit, *signed
    )
    commitment = data_commitment(600, b"\2" * 32)
    chain.send("RoundLedger", "joinWithPermit", task, commitment, signed, by=CLIENTS[0])
    assert chain.view("RoundLedger", "clientCount", task) == 1
    # A permit that is no good, with no allowance behind it, is refused with what to do.
    bad = (chain.now() + 3600, 27, b"\1" * 32, b"\2" * 32)
    with chain.reverts(
        bindings.TreasuryAllowanceTooLow, token.address, chain.account(CLIENTS[1]), 0, params.client_deposit
    ):
        chain.send("RoundLedger", "joinWithPermit", task, commitment, bad, by=CLIENTS[1])


def test_a_token_that_does_not_name_its_permit_domain_gets_no_permit_but_an_approval(chain: FedChain) -> None:
    token = chain.use_token("BlacklistToken")  # no EIP-2612, no EIP-5267
    assert sign_permit(chain.transactor(PUBLISHER), token.address, chain.addresses["Treasury"], 1, chain.now()) is None


def test_a_token_that_calls_back_into_the_treasury_mid_payment_reverts_the_payment(chain: FedChain) -> None:
    token = chain.use_token("ReentrantToken", chain.addresses["Treasury"])
    task = chain.create_task(budget=BUDGET, bond=False)
    token.transact("arm", True)
    # Paying in: the token's transferFrom calls withdrawTo while the Treasury's deposit runs.
    with chain.reverts(bindings.ReentrancyGuardReentrantCall):
        chain.join(task, CLIENTS[0])
    # Paying out: the same from inside withdrawTo's transfer.
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    with chain.reverts(bindings.ReentrancyGuardReentrantCall):
        chain.withdraw(PUBLISHER)
    token.transact("arm", False)
    chain.withdraw(PUBLISHER)
    assert_solvent_and_empty(chain)


def test_the_treasurys_own_checks_of_value_binding_and_permit_callers(chain: FedChain) -> None:
    # Prepare: a Treasury of its own whose "modules" are the stranger's account, so that it can call them directly.
    token = chain.use_token("PermitToken", 18)
    stranger = chain.account(STRANGER)
    artifact = chain.artifacts["Treasury"]
    own = Contract.deploy(chain.transactor(STRANGER), artifact.bytecode, *[stranger] * 4, stranger, abi=artifact.abi)
    # Execute / assert: ether must come as the amount; a token task takes none; a task binds its token once
    with chain.reverts(bindings.TreasuryWrongValue, 99, 100):
        own.transact("deposit", 7, stranger, 100, value=99)
    own.transact("bindToken", 8, token.address)
    with chain.reverts(bindings.TreasuryTokenAlreadyBound, 8):
        own.transact("bindToken", 8, token.address)
    with chain.reverts(bindings.TreasuryWrongValue, 5, 0):
        own.transact("deposit", 8, stranger, 5, value=5)
    # Only modules apply permits.
    with chain.reverts(bindings.TreasuryUnauthorized, chain.account(CLIENTS[0])):
        chain.send("Treasury", "usePermit", token.address, stranger, 1, (0, 27, b"\1" * 32, b"\2" * 32), by=CLIENTS[0])


def test_a_bad_permit_at_creation_and_a_budget_past_uint96_are_refused(chain: FedChain) -> None:
    token = chain.use_token("PermitToken", 18)
    bad = (chain.now() + 3600, 27, b"\1" * 32, b"\2" * 32)
    with chain.reverts(bindings.TreasuryAllowanceTooLow, token.address, chain.account(PUBLISHER), 0, BUDGET):
        create_with_permit(chain, bad)
    # A client's earnings are a uint96: a larger budget, possible in a token, would lock the rounds.
    with chain.reverts(bindings.TaskInvalidParameter, b"budget".ljust(32, b"\0"), 2**96):
        chain.create_task(TaskParams(), budget=2**96, bond=False)
