// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {TaskFlow} from "./utils/TaskFlow.sol";
import {ITaskRegistry} from "../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../contracts/interfaces/IRoundLedger.sol";
import {ReputationMath} from "../../contracts/libraries/ReputationMath.sol";

/// @title Flows: where each forfeit and refund of a task goes, to the wei
/// @notice Deterministic companions of the invariant campaign: each flow ends with every account's claim checked.
contract FlowsTest is TaskFlow {
    function setUp() public {
        deployFedChain();
        setUpParticipants(2);
    }

    function test_aRemovedClientsDepositGoesToTheSinkAndNothingToThePublisher() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        p.rounds = 1;
        uint256 t = createTask(p);
        joinAuctionAndStart(t, p);
        commitRound(t, 1, false);
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[1] = measurement(0, COMMIT_AFTER, false, true); // rejected: quality 0, r_a 0, removed
        post(t, 1, 0, ms);
        finalizeAfterWindows(t, 1, ms);
        ledger.settle(t);

        assertEq(claimableOf(t, SINK), p.clientDeposit, "the removed client's deposit");
        assertTrue(ledger.client(t, 1).status == IRoundLedger.ClientStatus.Removed, "removed");
        assertEq(claimableOf(t, clients[1]), 0, "the removed client gets nothing back");
        IRoundLedger.ClientInfo memory kept = ledger.client(t, 0);
        uint256 pay = ReputationMath.roundPayment(p.psi, kept.lossReputation, kept.timeReputation, 0, 0);
        uint256 duration = registry.state(t).finishedAt - registry.state(t).startedAt;
        uint256 total = ReputationMath.totalReputation(kept.lossReputation, kept.timeReputation, p.reputationCap);
        uint256 bonus = ReputationMath.finalBonus(p.phi, p.expectedDuration, duration, total);
        assertEq(claimableOf(t, clients[0]), pay + bonus + p.clientDeposit, "the client in good standing");
        assertEq(claimableOf(t, PUBLISHER), BUDGET - pay - bonus, "the publisher: its refund, no forfeit");
        assertEq(claimableOf(t, AGGREGATOR), p.aggregatorBond, "the bond back whole");
    }

    function test_aMissedRoundsFogDepositGoesToTheClient() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = createTask(p);
        joinAuctionAndStart(t, p);
        vm.warp(registry.roundDeadline(t) + 1);
        vm.prank(STRANGER);
        auction.reportMissedRound(t, 0);
        assertEq(claimableOf(t, clients[0]), p.fogDeposit, "the missed round's deposit to its client");
        assertEq(claimableOf(t, PUBLISHER), 0, "nothing to the publisher");
        assertEq(claimableOf(t, SINK), 0, "nothing to the sink");
    }

    function test_aCancelledTaskRefundsItsBudgetOnceAndReturnsEveryDepositAndTheBond() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = createTask(p);
        for (uint256 i; i < 2; ++i) {
            vm.prank(clients[i]);
            ledger.join{value: p.clientDeposit}(t, dataCommitment(DATA_SIZE, salt(i)));
        }
        vm.prank(PUBLISHER);
        registry.cancelTask(t);
        assertEq(registry.state(t).budgetLeft, 0, "nothing left of the budget");
        ledger.settle(t);
        assertEq(claimableOf(t, PUBLISHER), BUDGET, "the budget back, once");
        assertEq(claimableOf(t, clients[0]) + claimableOf(t, clients[1]), 2 * p.clientDeposit, "deposits back");
        assertEq(claimableOf(t, AGGREGATOR), p.aggregatorBond, "the bond back");
        assertEq(treasury.held(t), 0, "nothing held");
    }
}
